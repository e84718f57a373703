// Package kubeapi serves the pods of the node through the Kubernetes API's
// own paths and encodings, so that unchanged clients (client-go informers,
// kubectl, pollers of the kubelet's /pods) read them from the node rather
// than from the API server.
//
// Handler answers, from podsapi's store, only the requests pinned to the
// node: a list or watch of pods whose field selector requires
// spec.nodeName=<node>, a get of a pod the store holds, and the kubelet's
// GET /pods; with WithDiscovery, also the discovery documents (/api,
// /api/v1, /apis, /version); with WithNamespaces, WithNode and
// WithResource, the lists, gets and watches of the namespaces, of the node
// and of the owner kinds of pods (apps/v1 ReplicaSets, Deployments,
// StatefulSets, DaemonSets; batch/v1 Jobs, CronJobs), from stores of their
// own (package kindstore), served by the same code as the pods; with
// WithNodeView, every list as the stores hold it (the node's slice), with
// no field selector pinning it to the node. Handler.Local tells the front
// door which requests those are and what rights each needs; every other
// request is the door's to pass through to the API server. It answers in the forms the
// API server answers pods in, negotiated by the Accept header as the API
// server negotiates it: pods in JSON or protobuf, PartialObjectMetadata
// and PartialObjectMetadataList (metadata-only informers), and Tables of
// the API server's pod columns (kubectl). The package neither
// authenticates nor authorizes: the door does, before it calls ServeHTTP.
//
// The objects it serves carry podsapi's resourceVersions, not the API
// server's (see docs/kubeapi.md): a client resumes a watch from them here,
// and must never use them as preconditions of writes to the API server.
package kubeapi
