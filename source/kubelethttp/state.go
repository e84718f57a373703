package kubelethttp

import (
	"bytes"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// state is what one Run has sent its sink.
type state struct {
	s        *Source
	sink     Sink
	known    map[types.UID][]byte // The encoding of each pod sent to the sink.
	problems map[string]bool      // The invalid pods of the last poll.
	synced   bool                 // MarkSynced was called.
	down     bool                 // Polls are failing and that was logged.
}

func newState(s *Source, sink Sink) *state {
	return &state{s: s, sink: sink, known: make(map[types.UID][]byte), problems: make(map[string]bool)}
}

// apply sends the sink the difference between pods and what it has.
func (st *state) apply(pods []corev1.Pod) {
	type entry struct {
		pod *corev1.Pod
		raw []byte
	}
	var (
		next     = make(map[types.UID]entry, len(pods))
		order    = make([]types.UID, 0, len(pods))
		problems = make(map[string]bool)
	)
	for i := range pods {
		pod := &pods[i]
		key := pod.Namespace + "/" + pod.Name
		var problem string
		switch _, dup := next[pod.UID]; {
		case pod.UID == "":
			problem = "a pod without a UID: skipped"
		case dup:
			problem = "a pod with the UID of an earlier pod: skipped"
		}
		if problem != "" {
			key += " " + string(pod.UID)
			problems[key] = true
			if !st.problems[key] {
				st.s.metrics.CountError(reasonInvalid)
				st.s.warn.Warn(reasonInvalid, "kubelet listed "+problem, "namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID)
			}
			continue
		}
		raw, err := pod.Marshal()
		if err != nil {
			// Cannot happen for a decoded pod; never compare it as equal.
			raw = nil
		}
		next[pod.UID] = entry{pod: pod, raw: raw}
		order = append(order, pod.UID)
	}
	st.problems = problems
	if st.down {
		st.down = false
		st.s.log.Info("kubelet answers again: publishing the differences", "url", st.s.url, "pods", len(next))
	}

	for _, uid := range slices.Sorted(maps.Keys(st.known)) {
		if _, ok := next[uid]; !ok {
			delete(st.known, uid)
			st.sink.Delete(uid)
			st.s.log.Debug("pod gone", "uid", uid)
		}
	}
	for _, uid := range order {
		e := next[uid]
		if prev, ok := st.known[uid]; ok && e.raw != nil && bytes.Equal(prev, e.raw) {
			continue
		}
		st.known[uid] = e.raw
		st.sink.Upsert(e.pod)
		st.s.log.Debug("pod changed", "namespace", e.pod.Namespace, "name", e.pod.Name, "uid", uid)
	}
	if !st.synced {
		st.synced = true
		st.sink.MarkSynced()
		st.s.log.Info("kubelet pods synced", "url", st.s.url, "pods", len(st.known), "interval", st.s.interval)
	}
}

// fail counts a failed poll and logs the first of a series.
func (st *state) fail(err *pollError) {
	st.s.metrics.CountError(err.reason)
	if st.down {
		st.s.log.Debug("kubelet still unavailable", "reason", err.reason, "error", err)
		return
	}
	st.down = true
	msg := "kubelet unavailable: serving the last known pods and retrying"
	if !st.synced {
		msg = "kubelet unavailable: not synced yet, retrying"
	}
	st.s.log.Warn(msg, "url", st.s.url, "reason", err.reason, "error", err)
	if err.hint != "" {
		// Its own record, so that it is not lost among the attributes.
		st.s.log.Warn("kubelet authorization: "+err.hint, "url", st.s.url)
	}
}
