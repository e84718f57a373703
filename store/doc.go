// Package store keeps the pods of the node, each version encoded once, and
// fans their changes out to watchers.
//
// Pod sources write to a Store through Upsert, Delete and MarkSynced. Readers
// get immutable *Pod values: every version of a pod is encoded once with
// k8s.io/api's generated Marshal when it is written, and the bytes, together
// with any view derived from them (for example the pod trimmed by a field
// mask), are shared by every request and every watcher that needs them.
//
// Watchers get a snapshot of the current pods and every later change, with no
// gap and no duplicate between the two. Each watcher has a bounded queue of
// live events; the snapshot is not counted against it, so a new watcher is
// never dropped for the size of the node. A watcher whose queue is full is
// dropped at once and never blocks the store, the sources or other watchers.
//
// Every change moves the store's version by one. Revision names a version
// together with the store's instance, random per store, so that a revision of
// a store before a restart is never taken for one of the current store. The
// store keeps its latest changes in a bounded history (WithHistory), from
// which WatchFrom replays the changes after a revision, with the same promise
// as Watch: no gap and no duplicate between the replay and the live events.
//
// Each pod version also carries its labels and selectable fields (the pod
// field selectors of the Kubernetes API server, SelectableFields), computed
// once when it is written, so that selectors never decode a pod.
//
// Beside the pods, the store keeps what the container runtime told of its
// pods and containers (RuntimePod, RuntimeContainer: PutRuntimePod,
// PutRuntimeContainer, SyncRuntime, from package nri), bounded in bytes
// (WithRuntimeFacts). They are never pods: no list, get or watch sees them
// and they move no version. The Find calls answer from them for what the
// pod source has not reported yet, a Match with a nil Pod and the
// runtime's Runtime for a pod the pod source does not know.
package store
