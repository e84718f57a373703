package store

import "github.com/podsapi/podsapi/podtypes"

// EventType says what happened to a pod (podtypes.EventType). The store's
// events are Added, Modified or Deleted, never podtypes.Synced.
type EventType = podtypes.EventType

// The types of the store's events.
const (
	// Added reports a pod that is new to the store.
	Added = podtypes.Added
	// Modified reports a new version of a pod the store had.
	Modified = podtypes.Modified
	// Deleted reports a pod that is gone; the event carries its last version.
	Deleted = podtypes.Deleted
)

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
