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
// the time of the last event or snapshot received. HTTP/2 pings detect a
// connection that went silent.
//
// A pod whose bytes do not decode is logged, counted with reason "decode"
// and skipped. An event of an unknown type, or a second
// INITIAL_SYNC_COMPLETE, is logged, counted with reason "protocol" and
// ignored.
//
// All calls to the Sink are made from the goroutine running Run.
package kubeletgrpc
