package podtypes

import "fmt"

// EventType says what a watch event reports.
type EventType int

const (
	// Added reports a pod new to the watcher: part of the initial snapshot,
	// or a pod that appeared later.
	Added EventType = iota + 1
	// Modified reports a new state of a pod the watcher knows.
	Modified
	// Deleted reports a pod that is gone, with its last known state (a
	// kubelet's carries only the pod's namespace, name and UID).
	Deleted
	// Synced follows the initial snapshot of Added events (the wires'
	// INITIAL_SYNC_COMPLETE): the watcher now knows every current pod. Its
	// event has no pod. The store's own events are never Synced.
	Synced
)

// String returns the name of the event type: ADDED, MODIFIED, DELETED or
// SYNCED.
func (t EventType) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	case Synced:
		return "SYNCED"
	default:
		return fmt.Sprintf("EventType(%d)", int(t))
	}
}
