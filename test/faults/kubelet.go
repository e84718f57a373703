package faults

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/store"
)

// Kubelet wraps the handler of the kubelet's wire (v1alpha1.Pods), breaking
// what its fields say, as Pods does the typed one. Nil fields break
// nothing.
type Kubelet struct {
	v1alpha1connect.PodsHandler
	// Served is called at the start of every call.
	Served func()
	// ListLimiter and GetLimiter give ListPods and GetPod a rate limit each,
	// instead of the one the server shares between them.
	ListLimiter, GetLimiter *rate.Limiter
	// UnknownForMissing answers UNKNOWN instead of NOT_FOUND.
	UnknownForMissing bool
	// EmptyUIDInvalid answers GetPod of an empty UID with INVALID_ARGUMENT,
	// where a kubelet answers NOT_FOUND.
	EmptyUIDInvalid bool
	// WatchLimiter rate-limits WatchPods.
	WatchLimiter *rate.Limiter
	// NoSyncMarker watches Store without INITIAL_SYNC_COMPLETE.
	NoSyncMarker *store.Store
	// WatchQueue is the queue of the watches of NoSyncMarker.
	WatchQueue int
}

// Hook returns the hooks.Hooks field that installs k around the kubelet
// wire's handler.
func (k *Kubelet) Hook() func(v1alpha1connect.PodsHandler) v1alpha1connect.PodsHandler {
	return func(h v1alpha1connect.PodsHandler) v1alpha1connect.PodsHandler {
		k.PodsHandler = h
		return k
	}
}

func (k *Kubelet) served() {
	if k.Served != nil {
		k.Served()
	}
}

var errRateLimited = connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))

// ListPods serves ListPods, with its own rate limit if ListLimiter is set.
func (k *Kubelet) ListPods(ctx context.Context, req *connect.Request[v1alpha1.ListPodsRequest]) (*connect.Response[v1alpha1.ListPodsResponse], error) {
	defer k.served()
	if k.ListLimiter != nil && !k.ListLimiter.Allow() {
		return nil, errRateLimited
	}
	return k.PodsHandler.ListPods(ctx, req)
}

// GetPod serves GetPod, with its own rate limit if GetLimiter is set,
// UNKNOWN for NOT_FOUND if UnknownForMissing is set, and INVALID_ARGUMENT
// for an empty UID if EmptyUIDInvalid is set.
func (k *Kubelet) GetPod(ctx context.Context, req *connect.Request[v1alpha1.GetPodRequest]) (*connect.Response[v1alpha1.GetPodResponse], error) {
	defer k.served()
	if k.GetLimiter != nil && !k.GetLimiter.Allow() {
		return nil, errRateLimited
	}
	if k.EmptyUIDInvalid && req.Msg.GetPodUID() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("podUID must not be empty"))
	}
	resp, err := k.PodsHandler.GetPod(ctx, req)
	if k.UnknownForMissing && connect.CodeOf(err) == connect.CodeNotFound {
		return nil, connect.NewError(connect.CodeUnknown, errors.New("no such pod"))
	}
	return resp, err
}

var kubeletTypes = map[store.EventType]v1alpha1.EventType{
	store.Added: v1alpha1.EventType_ADDED, store.Modified: v1alpha1.EventType_MODIFIED, store.Deleted: v1alpha1.EventType_DELETED,
}

// sendKubelet sends the events of watchStore on a stream of the kubelet
// wire.
func sendKubelet(stream *connect.ServerStream[v1alpha1.WatchPodsEvent]) func(bool, store.EventType, *store.Pod) error {
	return func(marker bool, t store.EventType, p *store.Pod) error {
		if marker {
			return stream.Send(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE})
		}
		return stream.Send(&v1alpha1.WatchPodsEvent{Type: kubeletTypes[t], Pod: p.Raw()})
	}
}

// WatchPods serves WatchPods, rate-limited if WatchLimiter is set, without
// the sync marker if NoSyncMarker is set.
func (k *Kubelet) WatchPods(ctx context.Context, req *connect.Request[v1alpha1.WatchPodsRequest], stream *connect.ServerStream[v1alpha1.WatchPodsEvent]) error {
	k.served()
	if k.WatchLimiter != nil && !k.WatchLimiter.Allow() {
		return errRateLimited
	}
	if k.NoSyncMarker != nil {
		return watchStore(ctx, k.NoSyncMarker, k.WatchQueue, false, true, sendKubelet(stream))
	}
	return k.PodsHandler.WatchPods(ctx, req, stream)
}

// Stalled returns the hooks of both wires that make every watch of st stall
// once synced: the snapshot and INITIAL_SYNC_COMPLETE, then nothing, the
// stream left open until the client leaves.
func Stalled(st *store.Store, queue int) (func(podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler, func(v1alpha1connect.PodsHandler) v1alpha1connect.PodsHandler) {
	return func(h podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler {
			return stalledPods{h, st, queue}
		}, func(h v1alpha1connect.PodsHandler) v1alpha1connect.PodsHandler {
			return stalledKubelet{h, st, queue}
		}
}

type stalledPods struct {
	podsv1alpha1connect.PodsHandler
	st    *store.Store
	queue int
}

func (s stalledPods) WatchPods(ctx context.Context, _ *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	return watchStore(ctx, s.st, s.queue, true, false, sendTyped(stream))
}

type stalledKubelet struct {
	v1alpha1connect.PodsHandler
	st    *store.Store
	queue int
}

func (s stalledKubelet) WatchPods(ctx context.Context, _ *connect.Request[v1alpha1.WatchPodsRequest], stream *connect.ServerStream[v1alpha1.WatchPodsEvent]) error {
	return watchStore(ctx, s.st, s.queue, true, false, sendKubelet(stream))
}

// watchStore is a watch of st that sends the sync marker only if marker,
// and the live events only if live (else it stays open, silent, until the
// client leaves).
func watchStore(ctx context.Context, st *store.Store, queue int, marker, live bool, send func(marker bool, t store.EventType, p *store.Pod) error) error {
	snapshot, w := st.Watch(queue, func(int) {})
	defer w.Stop()
	for _, p := range snapshot {
		if err := send(false, store.Added, p); err != nil {
			return err
		}
	}
	if marker {
		if err := send(true, 0, nil); err != nil {
			return err
		}
	}
	if !live {
		<-ctx.Done()
		return ctx.Err()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Dropped():
			return connect.NewError(connect.CodeResourceExhausted, errors.New("fell behind"))
		case <-w.Ready():
			for _, ev := range w.Take(nil) {
				if err := send(false, ev.Type, ev.Pod); err != nil {
					return err
				}
			}
		}
	}
}
