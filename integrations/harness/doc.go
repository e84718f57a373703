// Package harness is the integration tests' rig: it runs what an agent
// finds on a node that runs podsapi, so that a test can point a real agent
// at podsapi and at the API server directly, and compare.
//
// A Cluster is a real kube-apiserver v1.37.2 and etcd on loopback
// (test/kubetest, from the binaries PODSAPI_KUBE_BIN names: the test is
// skipped when it is unset) that writes an audit log of every request, with
// podsapi's own identity granted what deploy/ grants it (with the
// components kube-api-kinds and node-view: PodsapiKindsRules). On it, a
// test makes pods (bound to a node: there is no scheduler) and agents:
// ServiceAccounts bound to the rules the test gives them, with a
// TokenRequest token each, as a DaemonSet's pod gets one, and a kubeconfig
// whose contexts reach the API server ("direct"), podsapi's front door
// ("podsapi": its full view) and the door's node view ("node": the door's
// URL + NodeViewPath) with the same token.
//
// A Podsapi is the real podsapi-server binary of one node, with
// --source=apiserver (a node whose kubelet has no Pods API), its Pods API
// on a UNIX socket, its front door (the node's pods through the Kubernetes
// API's own paths) on a loopback HTTPS port with a serving certificate of
// its own, and its metrics on a UNIX socket. The binary is the one
// PODSAPI_SERVER_BIN names (make integrations builds it once and caches
// it), or else one go build makes from the main module for the test
// binary. WithNodeView runs it so that the door's node view holds the
// owners of the node's pods (--workloads=apiserver).
//
// What an agent costs is read three ways: per user from the API server's
// audit log (Cluster.Requests; Cluster.Asked counts them by verb and
// resource), per resource and verb from the API server's /metrics
// (Cluster.APIServer), and what the door answered itself (route "local")
// or passed through to the API server (route "proxied") from podsapi's
// /metrics (Podsapi.Door). Record writes a measurement as a row of the
// results table that docs/integrations.md embeds.
//
// The control plane, the processes and the waits for their readiness
// (kubetest.Process), the waits for what a test does not drive
// (kubetest.Eventually, within kubetest.Timeout), the kubeconfigs
// (kubetest.WriteKubeconfig) and the byte-counting proxy (kubetest.Proxy)
// are test/kubetest's, which the main module's tests use too.
package harness
