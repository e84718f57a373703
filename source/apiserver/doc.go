// Package apiserver is the pod source that follows the pods of one node on
// the Kubernetes API server: one watch with the field selector
// spec.nodeName=NODE, through client-go's reflector, fanned out by podsapi
// to every agent of the node.
//
// # Feed
//
// The reflector lists from the API server's watch cache, never with a
// quorum read of etcd: with the streaming list of KEP-3157 (WatchList: a
// watch with sendInitialEvents=true, which client-go v0.37 uses by default)
// where the API server supports it, or else with a list at
// resourceVersion "0". Its watches ask for bookmarks, so that a watch that
// resumes after a restart of the API server starts from a recent resource
// version. The Source keeps the pods it sent the sink, keyed by namespace
// and name, and sends only what changed: an event or a relisted pod whose
// resourceVersion is the one already sent is not sent again, so that a
// relist after 410 Gone, a watch restarted or an outage turns into no
// MODIFIED for pods that did not change. The pods missing from a relist
// (deleted while the watch was down) are deleted from the sink. After the
// first complete list, the Source calls MarkSynced.
//
// A mirror pod (annotation kubernetes.io/config.mirror, which a kubelet
// sets on the API server's copy of a static pod) is served under the UID in
// that annotation, the UID the kubelet gives the static pod itself: agents
// see the same UIDs whichever source feeds podsapi. Managed fields are
// dropped from every pod.
//
// # Bounds
//
// Requests are rate limited on the client (WithRateLimit: 5 per second,
// burst 10), retried with the reflector's exponential backoff and jitter
// (WithBackoff: 800 ms doubling to 30 s), opened within 10 s, and a list
// must answer within a minute. The answer to a list is bounded to
// WithMaxResponseBytes (64 MiB), each watch event to 16 MiB by client-go's
// decoder. The sink is the in-memory store: a slow or failing API server
// delays only the Source's own goroutine, never the server's handlers.
//
// # Outages
//
// When a list or a watch fails (the API server is down or unreachable,
// refuses the credentials, or a load balancer closes the connection), the
// Source keeps the pods it has sent (no Delete, nothing for clients to
// see), logs the outage once at warning level, counts each failure in
// podsapi_source_errors_total{source="apiserver",reason} and sets
// podsapi_source_connected{source="apiserver"} to 0. The first request
// that succeeds logs the recovery once and sets it to 1. A 410 Gone is no
// outage: it is counted with reason "expired", logged, and the relist that
// follows is counted in podsapi_source_relists_total.
// podsapi_source_last_success_timestamp_seconds{source="apiserver"} is the
// time of the last answer or event from the API server. client-go's own
// logs go to the Source's logger at debug level.
//
// All calls to the Sink are made from the goroutine running Run.
//
// # Permissions
//
// The credentials need get, list and watch on pods, cluster-wide (RBAC
// cannot restrict a list to a field selector; see the README).
package apiserver
