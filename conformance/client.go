package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// The field mask headers of the API.
const (
	maskHeader    = "x-kubernetes-fieldmask"
	maskBinHeader = "x-kubernetes-fieldmask-bin"
)

// c.recvTimeout() bounds the wait for one watch event the suite expects
// (Config.EventTimeout).
func (c *C) recvTimeout() time.Duration { return c.env.cfg.EventTimeout }

// textMask returns metadata with one x-kubernetes-fieldmask value per
// argument.
func textMask(values ...string) http.Header {
	h := http.Header{}
	for _, v := range values {
		h.Add(maskHeader, v)
	}
	return h
}

// binMask returns metadata with paths as a serialized FieldMask.
func binMask(paths ...string) http.Header {
	b, err := proto.Marshal(&fieldmaskpb.FieldMask{Paths: paths})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set(maskBinHeader, connect.EncodeBinaryHeader(b))
	return h
}

// describe formats a request for failure messages.
func describe(rpc string, h http.Header, detail string) string {
	var parts []string
	for _, k := range []string{maskHeader, maskBinHeader} {
		for _, v := range h.Values(k) {
			parts = append(parts, fmt.Sprintf("%s: %q", k, v))
		}
	}
	s := rpc
	if detail != "" {
		s += "(" + detail + ")"
	}
	if len(parts) > 0 {
		s += " with " + strings.Join(parts, ", ")
	}
	return s
}

func codeOf(err error) connect.Code {
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}

// codeName is the gRPC name of the code of err, "OK" for nil.
func codeName(err error) string {
	if err == nil {
		return "OK"
	}
	return fmt.Sprintf("%s (%v)", strings.ToUpper(strings.ReplaceAll(codeSnake(codeOf(err)), " ", "_")), err)
}

func codeSnake(c connect.Code) string {
	return strings.ReplaceAll(c.String(), "_", " ")
}

func withHeader[T any](msg *T, h http.Header) *connect.Request[T] {
	req := connect.NewRequest(msg)
	for k, vs := range h {
		for _, v := range vs {
			req.Header().Add(k, v)
		}
	}
	return req
}

// pace waits for the suite's own client-side rate limit, so that ordinary
// calls of the cases are not refused by the implementation's.
func (c *C) pace() {
	if c.env.pacer != nil {
		if err := c.env.pacer.Wait(c.ctx); err != nil {
			c.Fatalf("interrupted: %v", err)
		}
	}
}

// call makes one call with f, bounded by EventTimeout. A call that gets no
// answer in time fails the case and is remembered: the calls of the later
// cases fail at once, naming it, rather than each waiting in vain.
func (c *C) call(request string, f func(ctx context.Context) error) error {
	if msg, ok := c.env.defect(noAnswer); ok {
		c.Failf(request, "an answer", "not attempted: "+msg)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.recvTimeout())
	defer cancel()
	err := f(ctx)
	if err != nil && ctx.Err() == context.DeadlineExceeded && c.ctx.Err() == nil {
		c.env.seen(noAnswer, fmt.Sprintf("%s got no answer within %s (case %s)", request, c.recvTimeout(), c.id))
		c.Failf(request, "an answer within "+c.recvTimeout().String(), "none: "+codeName(err))
	}
	return err
}

// retryRateLimited calls f until it is not refused with RESOURCE_EXHAUSTED
// (a leftover of another case's exhausted bucket), within bounds.
func retryRateLimited(c *C, request string, f func(ctx context.Context) error) error {
	var err error
	for range 50 {
		c.pace()
		if err = c.call(request, f); codeOf(err) != connect.CodeResourceExhausted || c.env.pacer == nil {
			return err
		}
		select {
		case <-c.ctx.Done():
			return err
		case <-time.After(time.Duration(float64(time.Second) / float64(c.env.pacer.Limit()))):
		}
	}
	return err
}

// list calls ListPods with h, paced and retried when rate limited.
func (c *C) list(h http.Header) ([]*corev1pb.Pod, error) {
	return c.listWith(c.env.client, h)
}

func (c *C) listWith(client podsClient, h http.Header) ([]*corev1pb.Pod, error) {
	var pods []*corev1pb.Pod
	err := retryRateLimited(c, describe("ListPods", h, ""), func(ctx context.Context) error {
		var err error
		pods, err = client.list(ctx, h)
		return err
	})
	return pods, err
}

// mustList is list that fails the case on an error.
func (c *C) mustList(h http.Header) []*corev1pb.Pod {
	pods, err := c.list(h)
	if err != nil {
		c.Failf(describe("ListPods", h, ""), "OK", codeName(err))
	}
	return pods
}

// get calls GetPod with h, paced and retried when rate limited.
func (c *C) get(uid string, h http.Header) (*corev1pb.Pod, error) {
	var pod *corev1pb.Pod
	err := retryRateLimited(c, describe("GetPod", h, "podUID="+uid), func(ctx context.Context) error {
		var err error
		pod, err = c.env.client.get(ctx, uid, h)
		return err
	})
	return pod, err
}

func (c *C) mustGet(uid string, h http.Header) *corev1pb.Pod {
	pod, err := c.get(uid, h)
	if err != nil {
		c.Failf(describe("GetPod", h, "podUID="+uid), "OK", codeName(err))
	}
	return pod
}

// event is one WatchPods event, or the error that ended the stream.
type event struct {
	typ podsv1alpha1.EventType
	pod *corev1pb.Pod
	err error
	rev string // the revision of the event, on a stream that has them
}

func (ev event) String() string {
	if ev.err != nil {
		return "stream ended: " + codeName(ev.err)
	}
	if ev.pod == nil {
		return ev.typ.String() + " (no pod)"
	}
	m := ev.pod.GetMetadata()
	return fmt.Sprintf("%s %s/%s uid=%s version=%s phase=%s", ev.typ, m.GetNamespace(), m.GetName(), m.GetUid(), m.GetAnnotations()[versionAnnotation], ev.pod.GetStatus().GetPhase())
}

// watch is a WatchPods stream. It is opened and read only when the case
// asks for an event, so that a case can stop reading it; the wait for the
// response headers is part of the wait for the first event (an
// implementation sends them with its first event).
type watch struct {
	c        *C
	desc     string
	client   podsClient
	header   http.Header
	ctx      context.Context
	cancel   context.CancelFunc
	once     sync.Once
	events   chan event
	done     chan struct{}
	stream   podStream // set by pump before done is closed
	ended    bool
	received int // events received
}

// watch returns a WatchPods stream with h on the suite's client.
func (c *C) watch(h http.Header) *watch {
	return c.watchWith(c.env.client, h)
}

func (c *C) watchWith(client podsClient, h http.Header) *watch {
	w := &watch{c: c, desc: describe("WatchPods", h, ""), client: client, header: h, events: make(chan event), done: make(chan struct{})}
	if msg, ok := c.env.defect(noAnswer); ok {
		c.Failf(w.desc, "a stream", "not attempted: "+msg)
	}
	w.ctx, w.cancel = context.WithCancel(c.ctx)
	c.Cleanup(w.close)
	return w
}

func (w *watch) pump() {
	defer close(w.done)
	stream, err := w.client.watch(w.ctx, w.header)
	if err != nil {
		select {
		case w.events <- event{err: err}:
		case <-w.ctx.Done():
		}
		return
	}
	w.stream = stream
	for {
		var ev event
		if typ, pod, ok := stream.receive(); ok {
			ev = event{typ: typ, pod: pod}
			if r, ok := stream.(revisioned); ok {
				ev.rev = r.revision()
			}
		} else {
			ev.err = stream.err()
			if ev.err == nil {
				ev.err = errors.New("the stream ended without a status")
			}
		}
		select {
		case w.events <- ev:
		case <-w.ctx.Done():
			return
		}
		if ev.err != nil {
			return
		}
	}
}

// close ends the stream.
func (w *watch) close() {
	w.cancel()
	w.once.Do(func() { close(w.done) })
	<-w.done
	if w.stream != nil {
		w.stream.close()
	}
}

// next returns the next event (or the end of the stream), failing the case
// if none comes within timeout.
func (w *watch) next(timeout time.Duration) event {
	ev, ok := w.tryNext(timeout)
	if !ok {
		w.c.Failf(w.desc, "a watch event within "+timeout.String(), w.nothing())
	}
	return ev
}

// nothing describes a watch that sent nothing more.
func (w *watch) nothing() string {
	if w.received == 0 {
		return "nothing, not even the response headers"
	}
	return fmt.Sprintf("nothing after %d events", w.received)
}

// tryNext returns the next event, or false after timeout.
func (w *watch) tryNext(timeout time.Duration) (event, bool) {
	if w.ended {
		w.c.Fatalf("internal: reading a watch that has ended")
	}
	w.once.Do(func() { go w.pump() })
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ev := <-w.events:
		if ev.err != nil {
			w.ended = true
		} else {
			w.received++
		}
		return ev, true
	case <-t.C:
		return event{}, false
	case <-w.c.ctx.Done():
		w.c.Fatalf("timed out waiting for an event of %s", w.desc)
		return event{}, false
	}
}

// mustNext is next that fails the case when the stream ended.
func (w *watch) mustNext() event {
	ev := w.next(w.c.recvTimeout())
	if ev.err != nil {
		w.c.Failf(w.desc, "a watch event", ev.String())
	}
	return ev
}

// snapshotEvent reads the next event of the initial snapshot. A stream
// that sends nothing within EventTimeout lacks the sync marker: the case
// fails naming it, and so do, at once, the later cases that need it.
func (w *watch) snapshotEvent() event {
	if msg, ok := w.c.env.defect(noSyncMarker); ok {
		w.c.Failf(w.desc, "ADDED events, then EVENT_TYPE_INITIAL_SYNC_COMPLETE", "not attempted: "+msg)
	}
	ev, ok := w.tryNext(w.c.recvTimeout())
	if !ok {
		seen := fmt.Sprintf("%s within %s", w.nothing(), w.c.recvTimeout())
		w.c.env.seen(noSyncMarker, fmt.Sprintf("no EVENT_TYPE_INITIAL_SYNC_COMPLETE: %s sent %s (case %s)", w.desc, seen, w.c.id))
		w.c.Failf(w.desc, "ADDED events, then EVENT_TYPE_INITIAL_SYNC_COMPLETE", "no EVENT_TYPE_INITIAL_SYNC_COMPLETE: "+seen)
	}
	return ev
}

// initial reads the initial snapshot up to INITIAL_SYNC_COMPLETE and
// returns its pods, checking its form.
func (w *watch) initial() []*corev1pb.Pod {
	var pods []*corev1pb.Pod
	seen := map[string]bool{}
	for {
		ev := w.snapshotEvent()
		if ev.err != nil {
			w.c.Failf(w.desc, "ADDED events, then EVENT_TYPE_INITIAL_SYNC_COMPLETE", ev.String())
		}
		switch ev.typ {
		case podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE:
			if ev.pod != nil {
				w.c.Failf(w.desc, "EVENT_TYPE_INITIAL_SYNC_COMPLETE without a pod", ev.String()+" with a pod")
			}
			return pods
		case podsv1alpha1.EventType_EVENT_TYPE_ADDED:
			uid := ev.pod.GetMetadata().GetUid()
			if seen[uid] {
				w.c.Failf(w.desc, "one EVENT_TYPE_ADDED per pod in the initial snapshot", "a second "+ev.String())
			}
			seen[uid] = true
			pods = append(pods, ev.pod)
		default:
			w.c.Failf(w.desc, "EVENT_TYPE_ADDED events then EVENT_TYPE_INITIAL_SYNC_COMPLETE", ev.String())
		}
	}
}

// observer is an unmasked watch the cases use to wait for the effects of
// the driver.
type observer struct {
	*watch
	pods map[string]*corev1pb.Pod // by name, the pods it saw, latest state
	// last is the latest event of each pod of the case, by name: the
	// events of the other pods, read while waiting for one, are kept, since
	// an implementation delivers the changes of different pods in any
	// order.
	last map[string]event
}

// observe opens an observer, past its initial snapshot.
func (c *C) observe() *observer {
	for attempt := 0; ; attempt++ {
		o := &observer{watch: c.watch(nil), pods: map[string]*corev1pb.Pod{}, last: map[string]event{}}
		pods, err := o.tryInitial()
		if codeOf(err) == connect.CodeResourceExhausted && attempt < 100 {
			// Dropped during a burst of changes: watch again.
			o.close()
			continue
		}
		if err != nil {
			c.Failf(o.desc, "the initial snapshot", codeName(err))
		}
		for _, p := range pods {
			o.pods[p.GetMetadata().GetName()] = p
			o.last[p.GetMetadata().GetName()] = event{typ: podsv1alpha1.EventType_EVENT_TYPE_ADDED, pod: p}
		}
		return o
	}
}

// tryInitial is initial that returns the error that ended the stream.
func (w *watch) tryInitial() ([]*corev1pb.Pod, error) {
	var pods []*corev1pb.Pod
	for {
		ev := w.snapshotEvent()
		if ev.err != nil {
			return nil, ev.err
		}
		if ev.typ == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			return pods, nil
		}
		pods = append(pods, ev.pod)
	}
}

// waitFor reads events until one about the pod named name satisfies ok,
// and returns it; the latest event seen of that pod, if it satisfies ok,
// is returned at once. Events about other pods are kept (latest first) for
// their own waits. When the observer
// is dropped for falling behind (a burst of changes beyond a small watch
// queue), it watches again and checks the new snapshot with ok. A stream
// that sends nothing at all within EventTimeout has stalled: the case
// fails, and so do, at once, the later cases that wait for changes.
func (o *observer) waitFor(name string, what string, ok func(ev event) bool) event {
	if msg, stalled := o.c.env.defect(stalledWatch); stalled {
		o.c.Failf("driver change of "+name, what, "not attempted: "+msg)
	}
	if ev, seen := o.last[name]; seen && ok(ev) {
		return ev
	}
	deadline := time.Now().Add(o.c.recvTimeout())
	silent := true
	for {
		left := time.Until(deadline)
		if left <= 0 {
			if silent {
				o.c.env.seen(stalledWatch, fmt.Sprintf("a synced WatchPods stream stalled: it sent nothing within %s while the driver changed %s (case %s)", o.c.recvTimeout(), name, o.c.id))
				o.c.Failf("driver change of "+name, what+" within "+o.c.recvTimeout().String(), "nothing: the stream stalled")
			}
			o.c.Failf("driver change of "+name, what+" within "+o.c.recvTimeout().String(), "no such event")
		}
		ev, got := o.tryNext(left)
		if !got {
			continue
		}
		silent = false
		if ev.err != nil && codeOf(ev.err) == connect.CodeResourceExhausted {
			o.c.Logf("observer dropped (%v): watching again", ev.err)
			o.watch.close()
			*o = *o.c.observe()
			p, present := o.pods[name]
			snap := event{typ: podsv1alpha1.EventType_EVENT_TYPE_ADDED, pod: p}
			if !present {
				snap = event{typ: podsv1alpha1.EventType_EVENT_TYPE_DELETED, pod: &corev1pb.Pod{}}
			}
			if ok(snap) {
				return snap
			}
			continue
		}
		if ev.err != nil {
			o.c.Failf(o.desc, what, ev.String())
		}
		evName := ev.pod.GetMetadata().GetName()
		if ev.typ == podsv1alpha1.EventType_EVENT_TYPE_DELETED {
			delete(o.pods, evName)
		} else {
			o.pods[evName] = ev.pod
		}
		if o.c.ofRun(ev.pod) {
			o.last[evName] = ev
		}
		if evName != name {
			continue
		}
		if ok(ev) {
			return ev
		}
	}
}

// waitVersion waits for the pod named name to be at version v.
func (o *observer) waitVersion(name string, v int) event {
	want := fmt.Sprint(v)
	return o.waitFor(name, fmt.Sprintf("an event of %s at version %s", name, want), func(ev event) bool {
		return ev.typ != podsv1alpha1.EventType_EVENT_TYPE_DELETED && ev.pod.GetMetadata().GetAnnotations()[versionAnnotation] == want
	})
}

// waitDeleted waits for the pod named name to be deleted.
func (o *observer) waitDeleted(name string) event {
	return o.waitFor(name, "EVENT_TYPE_DELETED of "+name, func(ev event) bool {
		return ev.typ == podsv1alpha1.EventType_EVENT_TYPE_DELETED
	})
}

// lastAttempt reports whether attempt (from 0) is the last of a case that
// compares two reads of the node (a watch's snapshot and ListPods, say),
// which differ when a pod changed in between. An implementation that
// serves manifest statuses gets three attempts; one that computes
// statuses, which change on their own for a while (a kubelet's new pods
// start), gets up to 40, a quarter of a second apart.
func (c *C) lastAttempt(attempt int) bool {
	if c.env.cfg.Features.ManifestStatus {
		return attempt >= 2
	}
	if attempt >= 39 {
		return true
	}
	select {
	case <-c.ctx.Done():
		return true
	case <-time.After(250 * time.Millisecond):
		return false
	}
}
