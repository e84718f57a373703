package service

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/store"
)

// DefaultWatchQueue is the default number of live events a watcher may have
// queued before it is dropped for falling behind.
const DefaultWatchQueue = 1000

// podField is the number of the pod field in PodListResponse (pods),
// PodGetResponse (pod) and PodWatchResponse (pod): a pod is framed the same
// way in all three.
const podField protowire.Number = 1

// typeField is the number of PodWatchResponse.type.
const typeField protowire.Number = 2

// Option configures the handler New returns.
type Option func(*handler)

// WithWatchQueue sets how many live events a watcher may have queued before
// it is dropped for falling behind. The default is DefaultWatchQueue.
func WithWatchQueue(n int) Option {
	return func(h *handler) { h.queue = max(n, 1) }
}

// WithMetrics sets the metrics that count dropped watch events and the use
// of shared views. By default nothing is counted.
func WithMetrics(m *Metrics) Option {
	return func(h *handler) { h.metrics = m }
}

// WithShutdown sets a channel whose closing ends every open watch with
// UNAVAILABLE. By default watches end only when their client leaves.
func WithShutdown(ch <-chan struct{}) Option {
	return func(h *handler) { h.shutdown = ch }
}

// WithLogger sets the logger of errors the client cannot be told about in
// detail. The default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(h *handler) { h.logger = l }
}

// handler implements the Pods API on a Store.
type handler struct {
	store    Store
	queue    int
	metrics  *Metrics
	shutdown <-chan struct{}
	logger   *slog.Logger
	lists    listCache
}

// New returns the Pods API served from s. Field masks reach it through the
// context set by the interceptors of Interceptors; without them every
// response carries whole pods.
func New(s Store, opts ...Option) podsv1alpha1connect.PodsHandler {
	h := &handler{store: s, queue: DefaultWatchQueue, logger: slog.Default()}
	for _, opt := range opts {
		opt(h)
	}
	return h
}

// ListPods returns every pod of the store. The response of a store version
// and mask is assembled once and shared by every request that asks for it.
func (h *handler) ListPods(ctx context.Context, _ *connect.Request[podsv1alpha1.PodListRequest]) (*connect.Response[podsv1alpha1.PodListResponse], error) {
	mask := maskFrom(ctx)
	version, pods := h.store.List()
	raw, built, err := h.lists.get(version, mask.Key(), func() ([]byte, error) {
		pr := newProjection(mask)
		views := make([][]byte, len(pods))
		size := 0
		for i, p := range pods {
			v, err := h.view(p, pr)
			if err != nil {
				return nil, err
			}
			views[i] = v
			size += protowire.SizeTag(podField) + protowire.SizeBytes(len(v))
		}
		raw := make([]byte, 0, size)
		for _, v := range views {
			raw = appendPod(raw, v)
		}
		return raw, nil
	})
	if err != nil {
		return nil, err
	}
	h.metrics.viewUsed(viewList, built)
	return connect.NewResponse(withRaw(&podsv1alpha1.PodListResponse{}, raw)), nil
}

// GetPod returns the pod with the requested UID.
func (h *handler) GetPod(ctx context.Context, req *connect.Request[podsv1alpha1.PodGetRequest]) (*connect.Response[podsv1alpha1.PodGetResponse], error) {
	uid := types.UID(req.Msg.GetPodUID())
	if uid == "" {
		return nil, errEmptyUID
	}
	p, ok := h.store.Get(uid)
	if !ok {
		return nil, errNotFound(uid)
	}
	v, err := h.view(p, newProjection(maskFrom(ctx)))
	if err != nil {
		return nil, err
	}
	raw := appendPod(make([]byte, 0, protowire.SizeTag(podField)+protowire.SizeBytes(len(v))), v)
	return connect.NewResponse(withRaw(&podsv1alpha1.PodGetResponse{}, raw)), nil
}

// view returns the encoding of p trimmed by pr's mask, computed once per pod
// version and mask and shared by every request that needs it.
func (h *handler) view(p *store.Pod, pr *projection) ([]byte, error) {
	if pr.mask == nil {
		return p.Raw(), nil
	}
	built := false
	v, err := p.View(pr.view, func(raw []byte) ([]byte, error) {
		built = true
		return pr.mask.AppendProjection(make([]byte, 0, len(raw)), raw)
	})
	h.metrics.viewUsed(viewMask, built)
	if err != nil {
		h.logger.Error("cannot project pod", "uid", p.UID, "namespace", p.Namespace, "name", p.Name, "mask", pr.mask.String(), "error", err)
		return nil, errEncoding
	}
	return v, nil
}

// appendPod appends v, an encoded pod, as field 1 of a response message.
func appendPod(b, v []byte) []byte {
	b = protowire.AppendTag(b, podField, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// withRaw sets raw, the encoding of msg's fields, as msg's raw fields:
// connect's codec then writes those bytes instead of marshalling msg.
func withRaw[M proto.Message](msg M, raw []byte) M {
	msg.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
	return msg
}
