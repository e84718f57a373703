package service

import (
	"github.com/podsapi/podsapi/fieldmask"
	"github.com/podsapi/podsapi/store"
)

// projection is the field mask of a request or stream together with the
// keys of the shared views it selects, derived once rather than per pod or
// per event.
type projection struct {
	// mask trims the pods; nil keeps them whole.
	mask *fieldmask.Mask
	// view is the key of a pod trimmed by mask.
	view string
	// events are the keys of the encoded watch events, by wire and event
	// type.
	events [numWires][store.Deleted + 1]string
}

// newProjection returns the projection of mask, which may be nil.
func newProjection(mask *fieldmask.Mask) *projection {
	key := mask.Key()
	p := &projection{mask: mask, view: "mask:" + key}
	for _, f := range []eventEncoding{typedEvents, kubeletEvents} {
		for _, t := range []store.EventType{store.Added, store.Modified, store.Deleted} {
			p.events[f.id][t] = f.name + ":" + t.String() + ":" + key
		}
	}
	return p
}

// projection returns the projection of mask (nil: the whole pod), shared by
// every call with the same mask.
func (h *handler) projection(mask *fieldmask.Mask) *projection {
	p, _ := get(h.projections, "call|"+mask.Key(), func() (*projection, error) { return newProjection(mask), nil })
	return p
}

// watchProjection returns the projection of a watch with mask (nil: the
// whole pod), shared by every watch with the same mask: a watch's mask is
// widened to identityPaths, so that every event names its pod.
func (h *handler) watchProjection(mask *fieldmask.Mask) (*projection, error) {
	if mask == nil {
		return h.projection(nil), nil
	}
	return get(h.projections, "watch|"+mask.Key(), func() (*projection, error) {
		u, err := mask.Union(identityPaths...)
		if err != nil {
			return nil, err
		}
		return newProjection(u), nil
	})
}
