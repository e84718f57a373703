package service

import (
	"context"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// kubeletHandler is the kubelet's own v1alpha1.Pods: pods as the bytes of
// their Kubernetes protobuf encoding. Its ListPodsResponse and GetPodResponse
// are byte for byte the typed service's responses, so both wires share them;
// its watch events are encoded WatchPodsEvent{type = 1, pod = 2} and cached
// like the typed ones.
type kubeletHandler struct{ *handler }

// ListPods returns every pod of the store.
func (h kubeletHandler) ListPods(ctx context.Context, _ *connect.Request[v1alpha1.ListPodsRequest]) (*connect.Response[v1alpha1.ListPodsResponse], error) {
	raw, _, err := h.list(ctx, nil)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(withRaw(&v1alpha1.ListPodsResponse{}, raw)), nil
}

// GetPod returns the pod with the requested UID. An empty UID is NOT_FOUND,
// as the kubelet answers it (the typed service says INVALID_ARGUMENT).
func (h kubeletHandler) GetPod(ctx context.Context, req *connect.Request[v1alpha1.GetPodRequest]) (*connect.Response[v1alpha1.GetPodResponse], error) {
	uid := types.UID(req.Msg.GetPodUID())
	if uid == "" {
		return nil, errNotFound(uid)
	}
	raw, err := h.get(ctx, uid)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(withRaw(&v1alpha1.GetPodResponse{}, raw)), nil
}

// WatchPods streams the current pods, INITIAL_SYNC_COMPLETE, then every
// change.
func (h kubeletHandler) WatchPods(ctx context.Context, _ *connect.Request[v1alpha1.WatchPodsRequest], stream *connect.ServerStream[v1alpha1.WatchPodsEvent]) error {
	resp := &v1alpha1.WatchPodsEvent{}
	return h.watch(ctx, kubeletEvents, watchOptions{}, newWatchWire(stream, func(ev []byte, _ uint64) *v1alpha1.WatchPodsEvent { return withRaw(resp, ev) }))
}
