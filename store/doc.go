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
package store
