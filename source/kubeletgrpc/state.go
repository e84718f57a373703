package kubeletgrpc

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
)

// state is what one Run has sent its sink, carried from stream to stream.
type state struct {
	s    *Source
	sink Sink
	// lists is the client of the resyncs' ListPods, whose answers are
	// bounded as a snapshot, not as one event.
	lists  v1alpha1connect.PodsClient
	known  map[types.UID]sent // Each pod sent to the sink.
	synced bool               // MarkSynced was called.
	down   bool               // An outage is going on and was logged.
	// resyncBackoff multiplies the resync interval after the kubelet's
	// rate limit refused a resync; 0 after a success.
	resyncBackoff int
	// gone holds the pods a resync found gone before the watch said so,
	// by UID, with the number of the resync. A v1.37 kubelet sends a
	// spurious ADDED for a static pod it is deleting, just before its
	// DELETED (its status manager forgets the pod's status first): an
	// ADDED or MODIFIED of a pod in gone is not applied, the watch's
	// DELETED or a list that has the pod again ends it, and an entry
	// lives two resyncs at most.
	gone    map[types.UID]int
	resyncs int
}

// resyncTimeout bounds one resync's ListPods.
const resyncTimeout = 10 * time.Second

// maxResyncBackoff is the most the resync interval is multiplied by after
// refusals of the kubelet's rate limit.
const maxResyncBackoff = 8

func newState(s *Source, sink Sink) *state {
	return &state{s: s, sink: sink, known: make(map[types.UID]sent)}
}

// sent is the version of a pod sent to the sink.
type sent struct {
	raw []byte // The pod's encoding.
	rv  string // Its metadata.resourceVersion.
}

// result is how one stream ended.
type result struct {
	synced bool   // The stream delivered its initial snapshot.
	reason string // The reason label of the error.
	err    error
}

// entry is one pod of a snapshot.
type entry struct {
	pod *corev1.Pod
	raw []byte
}

// watch opens one WatchPods stream and follows it until it ends. Once the
// stream is synced it also lists the kubelet's pods every resync interval
// and reconciles them (see resync): a kubelet's watch reports only status
// changes.
func (st *state) watch(ctx context.Context, client v1alpha1connect.PodsClient) result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.WatchPods(ctx, connect.NewRequest(&v1alpha1.WatchPodsRequest{}))
	if err != nil {
		return result{reason: reasonConnect, err: err}
	}
	// The stream is read in a goroutine of its own, so that the resyncs
	// can interleave with its events; the sink is still called from this
	// one only.
	events := make(chan *v1alpha1.WatchPodsEvent)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(events)
		for stream.Receive() {
			select {
			case events <- stream.Msg():
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		_ = stream.Close()
		wg.Wait()
	}()
	var (
		snapshot = make(map[types.UID]entry)
		received bool
		synced   bool
		resync   resyncTimer
		bytes    int64 // Of the pods received before INITIAL_SYNC_COMPLETE.
	)
	defer resync.stop()
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				break loop
			}
			received = true
			if synced {
				st.s.metrics.Success(time.Now())
			} else {
				bytes += int64(len(ev.GetPod()))
				if res := st.s.snapshot.check(len(snapshot), bytes); res != nil {
					return *res
				}
			}
			switch ev.GetType() {
			case v1alpha1.EventType_ADDED, v1alpha1.EventType_MODIFIED:
				pod, ok := st.decode(ev)
				switch {
				case !ok:
				case !synced:
					snapshot[pod.UID] = entry{pod: pod, raw: ev.GetPod()}
				default:
					if _, ok := st.gone[pod.UID]; ok {
						st.s.log.Debug("kubelet reported a pod its list no longer has: ignored", "event", ev.GetType().String(),
							"namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID)
						break
					}
					if have, ok := st.known[pod.UID]; ok && older(pod.ResourceVersion, have.rv) {
						st.s.log.Debug("kubelet reported an older version of a pod: ignored", "event", ev.GetType().String(),
							"namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID,
							"resourceVersion", pod.ResourceVersion, "sent", have.rv)
						break
					}
					st.upsert(pod, ev.GetPod(), ev.GetType())
				}
			case v1alpha1.EventType_DELETED:
				pod, ok := st.decode(ev)
				switch {
				case !ok:
				case !synced:
					delete(snapshot, pod.UID)
				default:
					delete(st.gone, pod.UID)
					st.delete(pod.UID, pod.Namespace, pod.Name)
				}
			case v1alpha1.EventType_INITIAL_SYNC_COMPLETE:
				if synced {
					st.protocolError("a second INITIAL_SYNC_COMPLETE event: ignored", ev)
					break
				}
				synced = true
				st.s.metrics.Success(time.Now())
				st.reconcile(snapshot)
				snapshot = nil
				resync.start(st.s.resync)
			default:
				st.protocolError("an event of unknown type: ignored", ev)
			}
		case <-resync.c:
			resync.start(st.resync(ctx, st.lists))
		}
	}
	err = stream.Err()
	if err == nil {
		err = errors.New("the kubelet ended the WatchPods stream")
	}
	reason := reasonStream
	if !received {
		reason = reasonConnect
	}
	return result{synced: synced, reason: reason, err: err}
}

// resyncTimer is the timer of the next resync; nil channel when none.
type resyncTimer struct {
	t *time.Timer
	c <-chan time.Time
}

// start arms the timer for d from now; d <= 0 disarms it.
func (r *resyncTimer) start(d time.Duration) {
	r.stop()
	if d <= 0 {
		return
	}
	r.t = time.NewTimer(d)
	r.c = r.t.C
}

func (r *resyncTimer) stop() {
	if r.t != nil {
		r.t.Stop()
		r.t, r.c = nil, nil
	}
}

// resync lists the kubelet's pods and sends the sink what differs from
// what it has: a kubelet's watch reports only the changes of a pod's
// status, while its ListPods shows edits of a static pod's metadata and
// spec, and replaced static pods, at once. It returns the wait before the
// next resync: the resync interval, doubled after each refusal by the
// kubelet's rate limit (one bucket shared by every client) up to
// maxResyncBackoff times the interval, and reset by a success.
//
// The list is taken while no event is being applied, so the events that
// follow it are newer than it; an event that was already on its way when
// the kubelet answered may be applied after it, and the next resync
// settles that.
func (st *state) resync(ctx context.Context, client v1alpha1connect.PodsClient) time.Duration {
	interval := st.s.resync
	cctx, cancel := context.WithTimeout(ctx, resyncTimeout)
	defer cancel()
	start := time.Now()
	res, err := client.ListPods(cctx, connect.NewRequest(&v1alpha1.ListPodsRequest{}))
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		st.s.metrics.CountError(reasonResync)
		if connect.CodeOf(err) == connect.CodeResourceExhausted {
			st.resyncBackoff = min(max(2*st.resyncBackoff, 2), maxResyncBackoff)
			st.s.log.Debug("resync refused by the kubelet's rate limit: waiting longer", "wait", interval*time.Duration(st.resyncBackoff))
		} else {
			st.s.log.Debug("resync failed", "error", err)
		}
		return interval * time.Duration(max(st.resyncBackoff, 1))
	}
	st.resyncBackoff = 0
	listed := make(map[types.UID]entry, len(res.Msg.GetPods()))
	for _, raw := range res.Msg.GetPods() {
		pod := new(corev1.Pod)
		if err := pod.Unmarshal(raw); err != nil || pod.UID == "" {
			// Counted and logged as the watch's are; the pod keeps the state
			// the watch gave it.
			st.s.metrics.CountError(reasonDecode)
			st.s.log.Warn("cannot decode a pod of the kubelet's ListPods: resync skipped", "bytes", len(raw), "error", err)
			return interval
		}
		listed[pod.UID] = entry{pod: pod, raw: raw}
	}
	st.resyncs++
	for uid, n := range st.gone {
		if _, ok := listed[uid]; ok || st.resyncs-n > 2 {
			delete(st.gone, uid)
		}
	}
	changed, gone := st.apply(listed)
	for _, uid := range gone {
		if st.gone == nil {
			st.gone = make(map[types.UID]int)
		}
		st.gone[uid] = st.resyncs
	}
	if deleted := len(gone); changed+deleted > 0 {
		st.s.log.Debug("resync found changes the watch did not report", "changed", changed, "deleted", deleted,
			"pods", len(listed), "took", time.Since(start))
	}
	return interval
}

// reconcile sends the sink the difference between the snapshot and what it
// has, marks it synced the first time, and ends any outage.
func (st *state) reconcile(snapshot map[types.UID]entry) {
	if st.down {
		st.down = false
		st.s.log.Info("kubelet Pods API available again: reconciling", "pods", len(snapshot))
	}
	changed, gone := st.apply(snapshot)
	deleted := len(gone)
	if !st.synced {
		st.synced = true
		st.sink.MarkSynced()
		st.s.log.Info("kubelet Pods API synced", "socket", st.s.socket, "pods", len(st.known))
	} else {
		st.s.log.Debug("reconciled with a new snapshot", "pods", len(st.known), "changed", changed, "deleted", deleted)
	}
}

// apply sends the sink the difference between pods, all the kubelet's
// pods, and what it has: a Delete for each pod that is gone and an Upsert
// for each that is new or changed. It returns how many changed and the
// UIDs of those gone.
func (st *state) apply(pods map[types.UID]entry) (changed int, deleted []types.UID) {
	for _, uid := range slices.Sorted(maps.Keys(st.known)) {
		if _, ok := pods[uid]; !ok {
			st.sink.Delete(uid)
			delete(st.known, uid)
			deleted = append(deleted, uid)
			st.s.log.Debug("pod gone", "uid", uid)
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(pods)) {
		e := pods[uid]
		if !bytes.Equal(st.known[uid].raw, e.raw) {
			st.known[uid] = sent{raw: e.raw, rv: e.pod.ResourceVersion}
			st.sink.Upsert(e.pod)
			changed++
		}
	}
	return changed, deleted
}

// upsert sends a pod the sink does not have in this version.
func (st *state) upsert(pod *corev1.Pod, raw []byte, typ v1alpha1.EventType) {
	if bytes.Equal(st.known[pod.UID].raw, raw) {
		return
	}
	st.known[pod.UID] = sent{raw: raw, rv: pod.ResourceVersion}
	st.sink.Upsert(pod)
	st.s.log.Debug("pod changed", "event", typ.String(), "namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID)
}

// older reports whether a pod at resourceVersion rv is older than the
// version sent, at resourceVersion have. A kubelet's watch event carries
// the pod its status manager was given with the new status, which may be a
// version older than the one its pod manager holds and a resync or an
// earlier event already sent: such an event is not applied. Only an API
// server's pods can be told older, when both resourceVersions are
// well-formed integers and rv is the lower, as apimachinery's
// resourceversion.CompareResourceVersion compares them (the comparison
// Kubernetes defines for resourceVersions of one resource). A static pod has no resourceVersion, and nothing
// else the kubelet sends orders its versions (an edit that keeps its UID
// keeps its generation and the kubelet's config annotations too): its
// events are applied as they come, and the next resync settles a stale
// one.
func older(rv, have string) bool {
	c, err := resourceversion.CompareResourceVersion(rv, have)
	return err == nil && c < 0
}

// delete removes a pod from the sink.
func (st *state) delete(uid types.UID, namespace, name string) {
	if _, ok := st.known[uid]; !ok {
		return
	}
	delete(st.known, uid)
	st.sink.Delete(uid)
	st.s.log.Debug("pod deleted", "namespace", namespace, "name", name, "uid", uid)
}

// decode returns the pod of ev, or logs and counts why it has none.
func (st *state) decode(ev *v1alpha1.WatchPodsEvent) (*corev1.Pod, bool) {
	pod := new(corev1.Pod)
	if err := pod.Unmarshal(ev.GetPod()); err != nil {
		st.s.metrics.CountError(reasonDecode)
		st.s.warn.Warn(reasonDecode, "cannot decode a pod of the kubelet: skipped", "event", ev.GetType().String(),
			"bytes", len(ev.GetPod()), "error", err)
		return nil, false
	}
	if pod.UID == "" {
		st.protocolError("a pod without a UID: skipped", ev, "namespace", pod.Namespace, "name", pod.Name)
		return nil, false
	}
	return pod, true
}

// protocolError logs and counts an event the Source does not expect.
func (st *state) protocolError(msg string, ev *v1alpha1.WatchPodsEvent, attrs ...any) {
	st.s.metrics.CountError(reasonProtocol)
	st.s.warn.Warn(reasonProtocol, "kubelet sent "+msg, append([]any{"event", ev.GetType().String()}, attrs...)...)
}

// fail counts a stream that ended and logs the outage once.
func (st *state) fail(reason string, err error) {
	st.s.metrics.CountError(reason)
	if st.down {
		st.s.log.Debug("kubelet Pods API still unavailable", "reason", reason, "error", err)
		return
	}
	st.down = true
	msg := "kubelet Pods API unavailable: serving the last known pods and reconnecting"
	if !st.synced {
		msg = "kubelet Pods API unavailable: not synced yet, retrying"
	}
	st.s.log.Warn(msg, "socket", st.s.socket, "reason", reason, "error", err)
}
