package store

// EventType says what happened to a pod.
type EventType int

const (
	// Added reports a pod that is new to the store.
	Added EventType = iota + 1
	// Modified reports a new version of a pod the store had.
	Modified
	// Deleted reports a pod that is gone; the event carries its last version.
	Deleted
)

// String returns the name of the event type.
func (t EventType) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	default:
		return "UNKNOWN"
	}
}

// Event is one change of the store, shared by every watcher.
type Event struct {
	// Type says what happened.
	Type EventType
	// Pod is the new version of the pod, or its last version for Deleted.
	Pod *Pod
	// Prev is the version the pod had before a Modified event, else nil.
	Prev *Pod
	// Version is the store version this change made: Pod.Version for Added
	// and Modified, the version of the deletion for Deleted.
	Version uint64
}
