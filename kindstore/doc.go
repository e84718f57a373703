// Package kindstore keeps the objects of one Kubernetes kind other than
// pods (the namespaces, the node, and the owner kinds of pods: ReplicaSets,
// Deployments, StatefulSets, DaemonSets, Jobs, CronJobs), so that the
// front door (kubeapi) answers their lists, gets and watches itself, as it
// answers the node's pods.
//
// A Store is fed as a client-go informer feeds its handlers: it is a
// cache.ResourceEventHandler (OnAdd, OnUpdate, OnDelete), so that a shared
// informer of the API server feeds it in the full view, and a tracker of
// the node's slice in the node view. Each version of an object is encoded
// once (protobuf) into a store.Store of its own, which gives the kind what
// it gives pods: podsapi's revisions as resourceVersions, watchers with
// bounded queues, a bounded history to resume watches from (410 Expired
// beyond it), views encoded once per version and the bounds in bytes. The
// object's resourceVersion and managed fields are not kept: the door
// serves podsapi's revisions, and a relist that changes nothing but the
// API server's resourceVersions is no change.
//
// MarkSynced says the feed delivered its first complete state; Contact
// and Age say how long ago the API server was last heard from, for a
// metric of how old the answers may be while it is unreachable.
package kindstore
