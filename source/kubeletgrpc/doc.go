// Package kubeletgrpc is the pod source that follows the Pods API a
// Kubernetes kubelet serves itself (feature gate PodsAPI, KEP-4188: alpha in
// 1.36, beta and on by default in 1.37) on the UNIX socket
// /var/lib/kubelet/pods-api/pods-api.sock.
//
// That API's wire format is package v1alpha1 (k8s.io/kubelet/pkg/apis/pods/v1alpha1),
// with pods as bytes holding the protobuf encoding of a v1.Pod. The Source
// reads it so that podsapi can sit on a kubelet's socket and serve the same
// pods with typed messages, validated field masks, its own watch semantics
// and its own metrics on another socket.
//
// # Feed
//
// The Source calls WatchPods and collects the ADDED events of the initial
// snapshot until INITIAL_SYNC_COMPLETE. It then sends the sink the
// difference between the snapshot and what it had sent before (nothing, the
// first time): a Delete for each pod that vanished and an Upsert for each pod
// that is new or changed. After the first snapshot it calls MarkSynced. Live
// ADDED and MODIFIED events are Upserts; DELETED events, which carry only
// the pod's name, namespace and UID, are Deletes by UID.
//
// A kubelet's event carries the pod its status manager was given, which
// can be older than the version the Source already sent (from a resync or
// an earlier event). An event of a pod from the API server whose
// resourceVersion is lower than the one sent (both integers) is not
// applied. A static pod's versions carry nothing that orders them: an
// older one is applied, and the next resync puts the newer one back.
//
// # Resync
//
// A kubelet's watch reports only the changes of a pod's status (its status
// manager's notifications): an edit of a static pod that keeps its UID
// (labels, annotations, arguments) is in its ListPods at once and never on
// its watch, and a replaced static pod (a new UID) reaches the watch 10-15 s
// after ListPods shows it. So once synced the Source also calls ListPods
// every resync interval (WithResyncInterval, default 10 s) and reconciles
// the list as it does a snapshot: what differs becomes Upserts and Deletes,
// an unchanged list nothing. Each resync costs one token of the kubelet's
// rate limit, which every client shares; one that the limit refuses
// (RESOURCE_EXHAUSTED) is counted with reason "resync" and doubles the wait
// before the next, up to 8 intervals.
//
// # Keepalive
//
// The Source pings the kubelet (HTTP/2 PING) only after DefaultPingInterval
// (6 minutes) of silence, and never more often than every MinPingInterval
// (5 minutes): a kubelet, like every grpc-go server with the default
// keepalive enforcement policy, closes a connection that pings more often
// with GOAWAY ENHANCE_YOUR_CALM "too_many_pings". A ping unanswered within
// PingTimeout ends the connection.
//
// # Outages
//
// When the stream ends or the socket does not answer (the kubelet restarts,
// say), the Source keeps the pods it has sent (no Delete, nothing for
// clients to see), logs the outage once, counts it in
// podsapi_source_errors_total{source="kubelet-grpc",reason}, and reconnects
// with exponential backoff and jitter (WithBackoff). The next snapshot is
// reconciled as above, so that changes made while it was disconnected are
// neither lost nor duplicated; the recovery is logged once.
// podsapi_source_last_success_timestamp_seconds{source="kubelet-grpc"} is
// the time of the last event or snapshot received.
//
// A pod whose bytes do not decode is logged, counted with reason "decode"
// and skipped. An event of an unknown type, or a second
// INITIAL_SYNC_COMPLETE, is logged, counted with reason "protocol" and
// ignored.
//
// All calls to the Sink are made from the goroutine running Run.
package kubeletgrpc
