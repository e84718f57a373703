package service

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/admit"
	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/store"
)

// DefaultWatchQueue is the default number of live events a watcher may have
// queued before it is dropped for falling behind.
const DefaultWatchQueue = 1000

// podField is the number of the pod field in PodListResponse (pods),
// PodGetResponse (pod), and in the kubelet wire's ListPodsResponse (pods) and
// GetPodResponse (pod): a list or a pod is encoded the same way in all four,
// so that both wires share their responses byte for byte.
const podField protowire.Number = 1

// handler serves the pods of a PodReader to both wires: the typed
// kubelet.pods.v1alpha1.Pods (podsHandler) and the kubelet's own
// v1alpha1.Pods (kubeletHandler). Both read the same shared views, so that a
// pod is never encoded twice because two wires exist.
type handler struct {
	store    PodReader
	queue    int
	metrics  *Metrics
	shutdown <-chan struct{}
	logger   *slog.Logger
	lists    listCache
	// streams finds the Stream of a watch's response (WithStreams).
	streams func(context.Context) Stream
	// snapshots are the enveloped snapshots of the watches in flight.
	snapshots snapshotCache
	// replays are the enveloped blocks of the history replayed to resumed
	// watches.
	replays replayCache
	budget  *budget.Budget
	// responses bounds the unary responses in flight (inflight.go).
	responses *responsesInFlight
	// projections are the projections of the masks in use.
	projections maskCache
	progress    *progressClock
	// processes and caller serve FindPods by pid and caller (find.go).
	processes Processes
	caller    func(ctx context.Context) (int32, bool)
	// client names the client of a request (WithClient); turns and masks
	// are the shares of snapshot and projection work of the clients
	// (fairness.go).
	client func(ctx context.Context) string
	turns  snapshotTurns
	masks  watchMasks
	// waiters are the FindPods calls that wait (findwait.go).
	waiters findWaiters
	// workloads answers the workloads of FindPods' matches (workload.go).
	workloads Workloads
}

// newHandler returns a handler of s configured by opts.
func newHandler(s PodReader, opts []Option) *handler {
	h := &handler{store: s, queue: DefaultWatchQueue, logger: slog.Default(), progress: &progressClock{interval: DefaultProgressInterval}, projections: newMaskCache(), processes: podcgroup.NewReader(""),
		turns:   snapshotTurns{perClient: DefaultSnapshotsPerClient, slice: DefaultSnapshotTurn},
		masks:   watchMasks{perClient: DefaultMasksPerClient, total: DefaultMaxWatchMasks},
		waiters: findWaiters{max: DefaultMaxFindWait, slots: admit.NewSlots(DefaultMaxFindWaiters, DefaultMaxFindWaitersPerClient)}}
	for _, opt := range opts {
		opt(h)
	}
	h.snapshots.metrics = h.metrics
	// A snapshot is kept for the next watch in line while the turns send
	// them one after another (snapshotCache).
	h.snapshots.keep, h.turns.idle = h.turns.busy, h.snapshots.dropIdle
	h.snapshots.maxIdle = maxIdleSnapshotBytes
	h.snapshots.budget, h.lists.budget, h.waiters.budget = h.budget, h.budget, h.budget
	h.replays.metrics, h.replays.budget = h.metrics, h.budget
	h.replays.maxIdle = maxIdleReplayBytes
	if total := h.budget.Total(); total > 0 {
		h.replays.maxIdle = min(maxIdleReplayBytes, total/8)
		h.responses = newResponsesInFlight(total/2, h.metrics)
		h.snapshots.maxIdle = int(min(maxIdleSnapshotBytes, total/8))
	}
	return h
}

// maxIdleReplayBytes bounds the enveloped blocks of the history kept while no
// watch replays them (at most an eighth of the budget): a herd of watches
// resuming one after another shares them.
const maxIdleReplayBytes = 32 << 20

// maxIdleSnapshotBytes bounds the enveloped snapshots kept while no watch
// writes them, for the next watch waiting for its snapshot turn (at most an
// eighth of the budget): the turns send a client's snapshots one after
// another.
const maxIdleSnapshotBytes = 32 << 20

// Handlers are the two services of one PodReader, sharing their caches: a
// response built for one wire is reused by the other.
type Handlers struct {
	// Pods is the typed kubelet.pods.v1alpha1.Pods.
	Pods podsv1alpha1connect.PodsHandler
	// Kubelet is the kubelet's own v1alpha1.Pods, pods as bytes.
	Kubelet v1alpha1connect.PodsHandler
	// h serves both (TrackResponses).
	h *handler
}

// New returns the typed Pods API served from s. Field masks reach it through
// the context set by the FieldMasks interceptor; without it every response
// carries whole pods.
func New(s PodReader, opts ...Option) podsv1alpha1connect.PodsHandler {
	return podsHandler{newHandler(s, opts)}
}

// NewKubelet returns the kubelet's own Pods API (v1alpha1.Pods) served from
// s, with the same semantics as New: field masks are honoured, DELETED
// carries the last known state of the pod.
func NewKubelet(s PodReader, opts ...Option) v1alpha1connect.PodsHandler {
	return kubeletHandler{newHandler(s, opts)}
}

// NewHandlers returns both services of s, sharing one cache of responses.
func NewHandlers(s PodReader, opts ...Option) Handlers {
	h := newHandler(s, opts)
	return Handlers{Pods: podsHandler{h}, Kubelet: kubeletHandler{h}, h: h}
}

// list returns the encoded fields of a ListPods response: every pod of the
// store that sel selects as field 1, which both wires share, and the store
// version they reflect. The response of a store version, selection and mask
// is assembled once and shared by every request that asks for it; the pods
// sel leaves out are never encoded.
func (h *handler) list(ctx context.Context, sel *selector) ([]byte, uint64, error) {
	mask := maskFrom(ctx)
	version, pods := h.store.List()
	raw, built, err := h.lists.get(version, mask.Key()+"|"+sel.cacheKey(), h.clientOf(ctx), func() ([]byte, error) {
		if sel != nil {
			selected := make([]*store.Pod, 0, len(pods))
			for _, p := range pods {
				if sel.matches(p) {
					selected = append(selected, p)
				}
			}
			pods = selected
		}
		pr := h.projection(mask)
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
		return nil, 0, err
	}
	h.metrics.viewUsed(viewList, built)
	if err := h.responses.reserve(ctx, h.clientOf(ctx), int64(len(raw))); err != nil {
		return nil, 0, err
	}
	return raw, version, nil
}

// listWorkloads returns the encoded fields of a ListPods response that asks
// for workloads or selects by them (opts): the pods of the store that sel
// and opts select as field 1, and, with opts.include, their workloads as
// field 3, with the store version they reflect. Workloads change without
// the store changing: the response is assembled for its call alone, from
// the pods' shared views.
func (h *handler) listWorkloads(ctx context.Context, sel *selector, opts workloadOptions) ([]byte, uint64, error) {
	pr := h.projection(maskFrom(ctx))
	version, pods := h.store.List()
	selected := make([]*store.Pod, 0, len(pods))
	views := make([][]byte, 0, len(pods))
	size := 0
	for _, p := range pods {
		if !sel.matches(p) || !h.selectsWorkload(opts.sel, p.UID) {
			continue
		}
		v, err := h.view(p, pr)
		if err != nil {
			return nil, 0, err
		}
		selected, views = append(selected, p), append(views, v)
		size += protowire.SizeTag(podField) + protowire.SizeBytes(len(v))
	}
	if err := h.responses.reserve(ctx, h.clientOf(ctx), int64(size)); err != nil {
		return nil, 0, err
	}
	raw := make([]byte, 0, size)
	for _, v := range views {
		raw = appendPod(raw, v)
	}
	if opts.include {
		raw = h.appendWorkloadsMap(raw, selected)
	}
	h.metrics.viewUsed(viewList, true)
	return raw, version, nil
}

// get returns the encoded fields of a GetPod response: the pod with uid as
// field 1, which both wires share.
func (h *handler) get(ctx context.Context, uid types.UID) ([]byte, error) {
	if uid == "" {
		return nil, errEmptyUID
	}
	p, ok := h.store.Get(uid)
	if !ok {
		return nil, errNotFound(uid)
	}
	v, err := h.view(p, h.projection(maskFrom(ctx)))
	if err != nil {
		return nil, err
	}
	raw := appendPod(make([]byte, 0, protowire.SizeTag(podField)+protowire.SizeBytes(len(v))), v)
	if err := h.responses.reserve(ctx, h.clientOf(ctx), int64(len(raw))); err != nil {
		return nil, err
	}
	return raw, nil
}

// podsHandler is the typed kubelet.pods.v1alpha1.Pods.
type podsHandler struct{ *handler }

// ListPods returns the pods of the store that the request selects, and the
// store's revision.
func (h podsHandler) ListPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodListRequest]) (*connect.Response[podsv1alpha1.PodListResponse], error) {
	sel, err := newSelector(req.Msg.GetNamespace(), req.Msg.GetLabelSelector(), req.Msg.GetFieldSelector())
	if err != nil {
		return nil, err
	}
	wopts, err := h.newWorkloadOptions(req.Msg.GetIncludeWorkloads(), req.Msg.GetWorkloadSelector())
	if err != nil {
		return nil, err
	}
	var (
		raw     []byte
		version uint64
	)
	if wopts.any() {
		raw, version, err = h.listWorkloads(ctx, sel, wopts)
	} else {
		raw, version, err = h.list(ctx, sel)
	}
	if err != nil {
		return nil, err
	}
	// The revision is a typed field, the pods raw fields: the message is
	// written as revision then pods, and the cached pods are not copied.
	return connect.NewResponse(withRaw(&podsv1alpha1.PodListResponse{Revision: h.store.Revision(version)}, raw)), nil
}

// GetPod returns the pod with the requested UID.
func (h podsHandler) GetPod(ctx context.Context, req *connect.Request[podsv1alpha1.PodGetRequest]) (*connect.Response[podsv1alpha1.PodGetResponse], error) {
	uid := types.UID(req.Msg.GetPodUID())
	raw, err := h.get(ctx, uid)
	if err != nil {
		return nil, err
	}
	if w := h.workloadOf(uid); w != nil {
		raw = protowire.AppendTag(raw, getWorkloadField, protowire.BytesType)
		raw = protowire.AppendBytes(raw, w)
	}
	return connect.NewResponse(withRaw(&podsv1alpha1.PodGetResponse{}, raw)), nil
}

// WatchPods streams the selected pods (or the changes since resume_from),
// the sync marker, then every change, each with the store's revision.
func (h podsHandler) WatchPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	sel, err := newSelector(req.Msg.GetNamespace(), req.Msg.GetLabelSelector(), req.Msg.GetFieldSelector())
	if err != nil {
		return err
	}
	wopts, err := h.newWorkloadOptions(req.Msg.GetIncludeWorkloads(), req.Msg.GetWorkloadSelector())
	if err != nil {
		return err
	}
	opts := watchOptions{sel: sel, resumeFrom: req.Msg.GetResumeFrom(), progress: req.Msg.GetProgressNotify(), revisions: true, workloads: wopts}
	// One response message serves every send: connect encodes it before
	// Send returns. The revision is a typed field beside the shared event.
	// The revision string is formatted once per version: the snapshot's
	// events share one.
	resp := &podsv1alpha1.PodWatchResponse{}
	var revVersion uint64
	return h.watch(ctx, typedEvents, opts, newWatchWire(stream, func(ev []byte, version uint64) *podsv1alpha1.PodWatchResponse {
		if resp.Revision == "" || version != revVersion {
			resp.Revision, revVersion = h.store.Revision(version), version
		}
		return withRaw(resp, ev)
	}))
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
