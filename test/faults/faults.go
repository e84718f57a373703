// Package faults plants faults in the server's assembly (hooks.Hooks), for
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
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
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
	// FindAlwaysDeleted answers FindPods as if include_deleted were set.
	FindAlwaysDeleted bool
}

// Hook returns the hooks.Hooks field that installs p around the typed
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
		return nil, errRateLimited
	}
	return p.PodsHandler.ListPods(ctx, req)
}

// GetPod serves GetPod, with its own rate limit if GetLimiter is set, and
// UNKNOWN for NOT_FOUND if UnknownForMissing is set.
func (p *Pods) GetPod(ctx context.Context, req *connect.Request[podsv1alpha1.PodGetRequest]) (*connect.Response[podsv1alpha1.PodGetResponse], error) {
	defer p.served()
	if p.GetLimiter != nil && !p.GetLimiter.Allow() {
		return nil, errRateLimited
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
		return errRateLimited
	}
	if p.NoSyncMarker != nil {
		return watchStore(ctx, p.NoSyncMarker, p.WatchQueue, false, true, sendTyped(stream))
	}
	return p.PodsHandler.WatchPods(ctx, req, stream)
}

// sendTyped returns the send function of watchStore for a typed stream.
func sendTyped(stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) func(bool, store.EventType, *store.Pod) error {
	return func(marker bool, t store.EventType, p *store.Pod) error {
		if marker {
			return stream.Send(&podsv1alpha1.PodWatchResponse{Type: podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE})
		}
		pod := new(corev1pb.Pod)
		if err := proto.Unmarshal(p.Raw(), pod); err != nil {
			return err
		}
		return stream.Send(&podsv1alpha1.PodWatchResponse{Type: podsv1alpha1.EventType(kubeletTypes[t]), Pod: pod})
	}
}
