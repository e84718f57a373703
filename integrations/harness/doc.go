// Package harness runs, for the integration tests of real agents, what an
// agent finds on a node that runs podsapi: a real kube-apiserver v1.37.2 and
// etcd on loopback (package kubetest, from the binaries PODSAPI_KUBE_BIN
// names: the test is skipped when it is unset), and the real podsapi-server
// binary with --source=apiserver for one node, serving its Pods API on a
// UNIX socket and the node's pods through the Kubernetes API's own paths
// on its front door (HTTPS on a loopback port).
//
// An Env gives the tests the node's name, pods created on it through the
// API server, agents (ServiceAccounts with the rights a test gives them and
// a token each) with their kubeconfigs for the API server directly and for
// the front door, and counters of what the door answered itself (route
// "local") or passed through to the API server (route "proxied"), and of the
// API server's pod lists and watches, read from both servers' /metrics: the
// cost an agent puts on the API server with and without podsapi.
//
// podsapi-server is the binary PODSAPI_SERVER_BIN names (make integrations
// builds it once and caches it), or else one go build makes from ../ for
// the test.
package harness
