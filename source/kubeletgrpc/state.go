package kubeletgrpc

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/v1alpha1/v1alpha1connect"
)

// state is what one Run has sent its sink, carried from stream to stream.
type state struct {
	s      *Source
	sink   Sink
	known  map[types.UID][]byte // The encoding of each pod sent to the sink.
	synced bool                 // MarkSynced was called.
	down   bool                 // An outage is going on and was logged.
}

func newState(s *Source, sink Sink) *state {
	return &state{s: s, sink: sink, known: make(map[types.UID][]byte)}
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

// watch opens one WatchPods stream and follows it until it ends.
func (st *state) watch(ctx context.Context, client v1alpha1connect.PodsClient) result {
	stream, err := client.WatchPods(ctx, connect.NewRequest(&v1alpha1.WatchPodsRequest{}))
	if err != nil {
		return result{reason: reasonConnect, err: err}
	}
	defer func() { _ = stream.Close() }()
	var (
		snapshot = make(map[types.UID]entry)
		received bool
		synced   bool
		bytes    int64 // Of the pods received before INITIAL_SYNC_COMPLETE.
	)
	for stream.Receive() {
		received = true
		ev := stream.Msg()
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
				st.upsert(pod, ev.GetPod(), ev.GetType())
			}
		case v1alpha1.EventType_DELETED:
			pod, ok := st.decode(ev)
			switch {
			case !ok:
			case !synced:
				delete(snapshot, pod.UID)
			default:
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
		default:
			st.protocolError("an event of unknown type: ignored", ev)
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

// reconcile sends the sink the difference between the snapshot and what it
// has, marks it synced the first time, and ends any outage.
func (st *state) reconcile(snapshot map[types.UID]entry) {
	if st.down {
		st.down = false
		st.s.log.Info("kubelet Pods API available again: reconciling", "pods", len(snapshot))
	}
	deleted, changed := 0, 0
	for _, uid := range slices.Sorted(maps.Keys(st.known)) {
		if _, ok := snapshot[uid]; !ok {
			st.sink.Delete(uid)
			delete(st.known, uid)
			deleted++
			st.s.log.Debug("pod gone while disconnected", "uid", uid)
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(snapshot)) {
		e := snapshot[uid]
		if !bytes.Equal(st.known[uid], e.raw) {
			st.known[uid] = e.raw
			st.sink.Upsert(e.pod)
			changed++
		}
	}
	if !st.synced {
		st.synced = true
		st.sink.MarkSynced()
		st.s.log.Info("kubelet Pods API synced", "socket", st.s.socket, "pods", len(st.known))
	} else {
		st.s.log.Debug("reconciled with a new snapshot", "pods", len(st.known), "changed", changed, "deleted", deleted)
	}
}

// upsert sends a pod the sink does not have in this version.
func (st *state) upsert(pod *corev1.Pod, raw []byte, typ v1alpha1.EventType) {
	if bytes.Equal(st.known[pod.UID], raw) {
		return
	}
	st.known[pod.UID] = raw
	st.sink.Upsert(pod)
	st.s.log.Debug("pod changed", "event", typ.String(), "namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID)
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
