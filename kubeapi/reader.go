package kubeapi

import "github.com/podsapi/podsapi/store"

// PodReader is what the handler reads the pods from: a *store.Store.
type PodReader interface {
	// Synced reports whether the pod sources have delivered their initial,
	// complete state.
	Synced() bool
	// List returns the current pods sorted by namespace, name and UID, and
	// the store version they reflect.
	List() (version uint64, pods []*store.Pod)
	// Watch returns the current pods and a watcher of every later change,
	// with a queue of at most queue events.
	Watch(queue int, onDrop func(lost int)) ([]*store.Pod, *store.Watcher)
	// WatchFrom is Watch for a watcher resuming after a revision: it
	// returns the range of changes made after it instead of a snapshot, or
	// store.ErrRevisionTooOld or store.ErrRevisionInvalid.
	WatchFrom(revision string, queue int, onDrop func(lost int)) (store.Replay, *store.Watcher, error)
	// ReadHistory returns the changes after a store version up to another,
	// at most cap(buf) of them, or store.ErrRevisionTooOld.
	ReadHistory(after, until uint64, buf []store.Event) ([]store.Event, error)
	// Revision returns the opaque revision of a store version.
	Revision(version uint64) string
}
