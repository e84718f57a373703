// Package faults plants faults in the server's assembly (server.Hooks), for
// the conformance suite's self-test: each fault breaks one behaviour the
// suite must catch. It is test support, not a public API.
package faults

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/store"
)

// Without returns a hook that removes the interceptors named names from the
// chain: by name, never by index.
func Without(names ...string) func([]guard.Named) []guard.Named {
	return func(chain []guard.Named) []guard.Named {
		return slices.DeleteFunc(chain, func(n guard.Named) bool { return slices.Contains(names, n.Name) })
	}
}

// Pods wraps the typed handler, breaking what its fields say. Nil fields
// break nothing.
type Pods struct {
	podsv1alpha1connect.PodsHandler
	// Served is called at the start of every call.
	Served func()
	// ListLimiter and GetLimiter give ListPods and GetPod a rate limit each,
	// instead of the one the server shares between them.
	ListLimiter, GetLimiter *rate.Limiter
	// UnknownForMissing answers UNKNOWN instead of NOT_FOUND.
	UnknownForMissing bool
	// WatchLimiter rate-limits WatchPods.
	WatchLimiter *rate.Limiter
	// NoSyncMarker watches Store without EVENT_TYPE_INITIAL_SYNC_COMPLETE.
	NoSyncMarker *store.Store
	// WatchQueue is the queue of the watches of NoSyncMarker.
	WatchQueue int
}

// Hook returns the server.Hooks field that installs p around the typed
// handler.
func (p *Pods) Hook() func(podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler {
	return func(h podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler {
		p.PodsHandler = h
		return p
	}
}

func (p *Pods) served() {
	if p.Served != nil {
		p.Served()
	}
}

// ListPods serves ListPods, with its own rate limit if ListLimiter is set.
func (p *Pods) ListPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodListRequest]) (*connect.Response[podsv1alpha1.PodListResponse], error) {
	defer p.served()
	if p.ListLimiter != nil && !p.ListLimiter.Allow() {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))
	}
	return p.PodsHandler.ListPods(ctx, req)
}

// GetPod serves GetPod, with its own rate limit if GetLimiter is set, and
// UNKNOWN for NOT_FOUND if UnknownForMissing is set.
func (p *Pods) GetPod(ctx context.Context, req *connect.Request[podsv1alpha1.PodGetRequest]) (*connect.Response[podsv1alpha1.PodGetResponse], error) {
	defer p.served()
	if p.GetLimiter != nil && !p.GetLimiter.Allow() {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))
	}
	resp, err := p.PodsHandler.GetPod(ctx, req)
	if p.UnknownForMissing && connect.CodeOf(err) == connect.CodeNotFound {
		return nil, connect.NewError(connect.CodeUnknown, errors.New("no such pod"))
	}
	return resp, err
}

// WatchPods serves WatchPods, rate-limited if WatchLimiter is set, without
// the sync marker if NoSyncMarker is set.
func (p *Pods) WatchPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	p.served()
	if p.WatchLimiter != nil && !p.WatchLimiter.Allow() {
		return connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))
	}
	if p.NoSyncMarker != nil {
		return watchWithoutMarker(ctx, p.NoSyncMarker, p.WatchQueue, stream)
	}
	return p.PodsHandler.WatchPods(ctx, req, stream)
}

// watchWithoutMarker is a watch of st that forgets the sync marker.
func watchWithoutMarker(ctx context.Context, st *store.Store, queue int, stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	snapshot, w := st.Watch(queue, func(int) {})
	defer w.Stop()
	send := func(t podsv1alpha1.EventType, p *store.Pod) error {
		pod := new(corev1pb.Pod)
		if err := proto.Unmarshal(p.Raw(), pod); err != nil {
			return err
		}
		return stream.Send(&podsv1alpha1.PodWatchResponse{Type: t, Pod: pod})
	}
	for _, p := range snapshot {
		if err := send(podsv1alpha1.EventType_EVENT_TYPE_ADDED, p); err != nil {
			return err
		}
	}
	types := map[store.EventType]podsv1alpha1.EventType{
		store.Added: podsv1alpha1.EventType_EVENT_TYPE_ADDED, store.Modified: podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, store.Deleted: podsv1alpha1.EventType_EVENT_TYPE_DELETED,
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Dropped():
			return connect.NewError(connect.CodeResourceExhausted, errors.New("fell behind"))
		case <-w.Ready():
			for _, ev := range w.Take(nil) {
				if err := send(types[ev.Type], ev.Pod); err != nil {
					return err
				}
			}
		}
	}
}
