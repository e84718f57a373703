package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// state is the reflector's store: it keeps the pods sent to the sink, keyed
// by namespace and name, and sends the sink only what changed. The
// reflector calls its cache.Store methods from the goroutine running Run;
// request may be called from any goroutine.
type state struct {
	cache.Store // The pods sent to the sink, as sent.
	s           *Source
	sink        Sink

	mu       sync.Mutex
	lists    int       // Complete lists stored.
	down     bool      // An outage is going on and was logged.
	downedAt time.Time // When it began.
}

func newState(s *Source, sink Sink) *state {
	return &state{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), s: s, sink: sink}
}

// Add stores a pod of a watch event.
func (st *state) Add(obj any) error { return st.put(obj) }

// Update stores a pod of a watch event.
func (st *state) Update(obj any) error { return st.put(obj) }

func (st *state) put(obj any) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("apiserver: the reflector stored a %T, not a pod", obj)
	}
	st.s.metrics.Success(time.Now())
	pod = servedPod(pod)
	old := st.known(pod)
	if err := st.Store.Update(pod); err != nil {
		return err
	}
	st.send(old, pod, "pod changed")
	return nil
}

// Delete removes a pod of a watch event.
func (st *state) Delete(obj any) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("apiserver: the reflector deleted a %T, not a pod", obj)
	}
	st.s.metrics.Success(time.Now())
	old := st.known(pod)
	if old == nil {
		return nil
	}
	if err := st.Store.Delete(old); err != nil {
		return err
	}
	st.sink.Delete(old.UID)
	st.s.log.Debug("pod deleted", "namespace", old.Namespace, "name", old.Name, "uid", old.UID)
	return nil
}

// Replace stores a complete list: the pods that are not in it are deleted,
// those that changed are sent, those that did not are not. The first one
// marks the sink synced.
func (st *state) Replace(list []any, resourceVersion string) error {
	st.s.metrics.Success(time.Now())
	pods := make([]any, 0, len(list))
	listed := make(map[string]bool, len(list))
	for _, obj := range list {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return fmt.Errorf("apiserver: the reflector listed a %T, not a pod", obj)
		}
		pod = servedPod(pod)
		pods = append(pods, pod)
		listed[pod.Namespace+"/"+pod.Name] = true
	}
	deleted := 0
	for _, obj := range st.Store.List() {
		old := obj.(*corev1.Pod)
		if !listed[old.Namespace+"/"+old.Name] {
			st.sink.Delete(old.UID)
			deleted++
			st.s.log.Debug("pod deleted while the watch was down", "namespace", old.Namespace, "name", old.Name, "uid", old.UID)
		}
	}
	changed := 0
	for _, obj := range pods {
		pod := obj.(*corev1.Pod)
		if st.send(st.known(pod), pod, "pod changed while the watch was down") {
			changed++
		}
	}
	if err := st.Store.Replace(pods, resourceVersion); err != nil {
		return err
	}
	st.mu.Lock()
	st.lists++
	first := st.lists == 1
	st.mu.Unlock()
	if first {
		st.sink.MarkSynced()
		st.s.log.Info("API server synced", "node", st.s.nodeName, "pods", len(pods), "resourceVersion", resourceVersion)
		return nil
	}
	st.s.conn.CountRelist()
	st.s.log.Info("relisted the node's pods", "pods", len(pods), "changed", changed, "deleted", deleted,
		"resourceVersion", resourceVersion)
	return nil
}

// Bookmark records that the API server is alive and up to resourceVersion.
func (st *state) Bookmark(resourceVersion string) {
	st.s.metrics.Success(time.Now())
	st.Store.Bookmark(resourceVersion)
}

// known returns the version of pod the sink has, or nil.
func (st *state) known(pod *corev1.Pod) *corev1.Pod {
	obj, ok, _ := st.Store.GetByKey(pod.Namespace + "/" + pod.Name)
	if !ok {
		return nil
	}
	return obj.(*corev1.Pod)
}

// send sends the sink pod unless old, the version it has, is the same; it
// says whether it sent it. A pod that replaced another of the same name
// (another UID) deletes it first.
func (st *state) send(old, pod *corev1.Pod, msg string) bool {
	switch {
	case old == nil:
	case old.UID != pod.UID:
		st.sink.Delete(old.UID)
	case old.ResourceVersion == pod.ResourceVersion:
		return false
	}
	st.sink.Upsert(pod)
	st.s.log.Debug(msg, "namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID,
		"resourceVersion", pod.ResourceVersion)
	return true
}

// request records how a list or watch request went: a failure counts an
// error and begins an outage, logged once; a success ends it.
func (st *state) request(ctx context.Context, reason string, opts metav1.ListOptions, err error) {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return // The Source is stopping.
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case err == nil:
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		// The API server answered: the resource version is too old.
		st.s.metrics.CountError(reasonExpired)
		st.s.log.Info("watch expired (410 Gone): listing the node's pods again", "resourceVersion", opts.ResourceVersion)
		err = nil
	default:
		st.s.metrics.CountError(reason)
		st.s.conn.SetConnected(false)
		if st.down {
			st.s.log.Debug("API server still unavailable", "request", reason, "error", err)
			return
		}
		st.down, st.downedAt = true, time.Now()
		msg := "API server unavailable: serving the last known pods and retrying"
		if st.lists == 0 {
			msg = "API server unavailable: not synced yet, retrying"
		}
		st.s.warn.Warn(reason, msg, "error", err)
		return
	}
	st.s.metrics.Success(time.Now())
	st.s.conn.SetConnected(true)
	if st.down {
		st.down = false
		st.s.log.Info("API server available again", "request", reason, "outage", time.Since(st.downedAt).Round(time.Millisecond))
	}
}
