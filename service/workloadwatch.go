package service

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/workload"
)

// WorkloadNotifier is implemented by Workloads that tell when the workload
// of pods changes without the pods changing (*workload.Resolver does):
// WatchPods then sends those changes to the watches that serve workloads.
type WorkloadNotifier interface {
	// Notify calls f with the UIDs of the pods whose workload changed,
	// until stop is called. f must not block nor keep the slice.
	Notify(f func(pods []types.UID)) (stop func())
}

// The numbers of the fields of PodWatchResponse.workload and
// PodListResponse.workloads, and of the map entry's key and value.
const (
	watchWorkloadField protowire.Number = 4
	listWorkloadsField protowire.Number = 3
	mapKeyField        protowire.Number = 1
	mapValueField      protowire.Number = 2
)

// maxWorkloadSelectorLen bounds the kind and the name of a workload
// selector, in bytes: a Kubernetes name is at most 253.
const maxWorkloadSelectorLen = 253

// workloadSelector selects pods by their workload. A nil *workloadSelector
// selects every pod.
type workloadSelector struct {
	kind, name string
}

// workloadOptions are what a ListPods or WatchPods request asks of
// workloads.
type workloadOptions struct {
	// include asks for the workload of every pod sent.
	include bool
	// sel selects pods by their workload; nil selects every pod.
	sel *workloadSelector
}

// any reports whether the request asks anything of workloads.
func (o workloadOptions) any() bool { return o.include || o.sel != nil }

// newWorkloadOptions validates what a request asks of workloads.
func (h *handler) newWorkloadOptions(include bool, sel *podsv1alpha1.WorkloadSelector) (workloadOptions, error) {
	o := workloadOptions{include: include}
	if sel == nil {
		return o, nil
	}
	if h.workloads == nil {
		return o, errWorkloadsOff
	}
	for field, v := range map[string]string{"workload_selector.kind": sel.GetKind(), "workload_selector.name": sel.GetName()} {
		if len(v) > maxWorkloadSelectorLen {
			return o, errSelector(field, fmt.Errorf("%d bytes, more than the limit of %d", len(v), maxWorkloadSelectorLen))
		}
	}
	o.sel = &workloadSelector{kind: sel.GetKind(), name: sel.GetName()}
	return o, nil
}

// selectsWorkload reports whether s selects the pod uid: its workload has a
// kind, and the kind and name the selector asks (an empty one matches any).
func (h *handler) selectsWorkload(s *workloadSelector, uid types.UID) bool {
	if s == nil {
		return true
	}
	if h.workloads == nil {
		return false
	}
	w, ok := h.workloads.Workload(uid)
	return ok && w.Kind != "" && (s.kind == "" || w.Kind == s.kind) && (s.name == "" || w.Name == s.name)
}

// appendWorkloadsMap appends PodListResponse.workloads for pods: one entry
// per pod the handler answers a workload for.
func (h *handler) appendWorkloadsMap(b []byte, pods []*store.Pod) []byte {
	if h.workloads == nil {
		return b
	}
	var entry []byte
	for _, p := range pods {
		w, ok := h.workloads.Workload(p.UID)
		if !ok {
			continue
		}
		entry = protowire.AppendTag(entry[:0], mapKeyField, protowire.BytesType)
		entry = protowire.AppendString(entry, string(p.UID))
		entry = protowire.AppendTag(entry, mapValueField, protowire.BytesType)
		entry = protowire.AppendBytes(entry, appendWorkload(nil, w))
		b = protowire.AppendTag(b, listWorkloadsField, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b
}

// workloadWatch is the state of a WatchPods call that serves workloads or
// selects by them. It learns of the workloads that change without their pod
// (WorkloadNotifier), and, with a selector, which pods the client holds as
// selected, since a pod's workload can change between two of its events.
// What it keeps is bounded by the pods of the node.
type workloadWatch struct {
	opts workloadOptions
	// held, with a selector, are the pods the client was sent as
	// selected and not since as deleted.
	held map[types.UID]struct{}
	// sentWorkloads, when the call serves workloads, is the workload each
	// pod the client holds was last sent with: a change of the pod that
	// the field mask hides is sent when its workload changed.
	sentWorkloads map[types.UID]workload.Workload

	mu sync.Mutex
	// pending are the pods whose workload changed, not yet handled.
	pending map[types.UID]struct{}
	changed chan struct{}
	stop    func()
}

// newWorkloadWatch returns the workloadWatch of a call with opts, registered
// with the handler's WorkloadNotifier if it has one, or nil when the call
// asks nothing of workloads or the handler answers none (a selector was
// refused before). Call end when the call ends.
func (h *handler) newWorkloadWatch(opts workloadOptions) *workloadWatch {
	if !opts.any() || h.workloads == nil {
		return nil
	}
	ww := &workloadWatch{opts: opts, pending: map[types.UID]struct{}{}, changed: make(chan struct{}, 1), stop: func() {}}
	if opts.sel != nil {
		ww.held = map[types.UID]struct{}{}
	}
	if opts.include {
		ww.sentWorkloads = map[types.UID]workload.Workload{}
	}
	if n, ok := h.workloads.(WorkloadNotifier); ok {
		ww.stop = n.Notify(ww.note)
	}
	return ww
}

// note takes the pods whose workload changed.
func (ww *workloadWatch) note(uids []types.UID) {
	ww.mu.Lock()
	for _, uid := range uids {
		ww.pending[uid] = struct{}{}
	}
	ww.mu.Unlock()
	select {
	case ww.changed <- struct{}{}:
	default:
	}
}

// take returns the pods whose workload changed since the last take.
func (ww *workloadWatch) take() []types.UID {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	uids := make([]types.UID, 0, len(ww.pending))
	for uid := range ww.pending {
		uids = append(uids, uid)
	}
	clear(ww.pending)
	return uids
}

// end stops the notifications of the call.
func (ww *workloadWatch) end() {
	if ww != nil {
		ww.stop()
	}
}

// changes returns the channel that is ready when workloads changed, or nil
// when the call does not serve them.
func (ww *workloadWatch) changes() <-chan struct{} {
	if ww == nil {
		return nil
	}
	return ww.changed
}

// selects reports whether the call selects p, as its selectors see it now:
// the snapshot's events ask it.
func (c *watchCall) selects(p *store.Pod) bool {
	if !c.sel.matches(p) {
		return false
	}
	return c.wl == nil || c.h.selectsWorkload(c.wl.opts.sel, p.UID)
}

// holdAll notes that the client may hold every pod of the store the call's
// other selectors select: a resumed watch cannot tell which it holds.
func (c *watchCall) holdAll() {
	if c.wl == nil || c.wl.opts.sel == nil {
		return
	}
	_, pods := c.h.store.List()
	for _, p := range pods {
		if c.sel.matches(p) {
			c.wl.held[p.UID] = struct{}{}
		}
	}
}

// workloadEventFor returns the type of the event a call with a workloadWatch
// sends for the store's event ev, or false when it sends none. With a
// workload selector it follows what the client holds: a pod it holds that
// stops matching is DELETED, one it does not hold that starts matching is
// ADDED. A MODIFIED that the field mask hides whole is not sent, unless the
// pod's workload changed meanwhile and the call serves workloads.
func (c *watchCall) workloadEventFor(ev store.Event) (store.EventType, bool, error) {
	uid := ev.Pod.UID
	t := ev.Type
	if c.wl.opts.sel != nil {
		_, held := c.wl.held[uid]
		now := ev.Type != store.Deleted && c.sel.matches(ev.Pod) && c.h.selectsWorkload(c.wl.opts.sel, uid)
		switch {
		case now && !held:
			t = store.Added
		case !now && held:
			t = store.Deleted
		case now && held:
			if ev.Type == store.Added {
				// A resumed watch's pod the client may not hold.
				t = store.Added
			} else {
				t = store.Modified
			}
		default:
			return t, false, nil
		}
	} else {
		var ok bool
		if t, ok = selectedType(ev, c.sel); !ok {
			return t, false, nil
		}
	}
	if t == store.Modified && c.wl.workloadChanged(c.h, uid) {
		return t, true, nil
	}
	if t == store.Modified && ev.Type == store.Modified && c.pr.mask != nil {
		same, err := c.h.sameView(ev.Prev, ev.Pod, c.pr)
		if err != nil || same {
			return t, false, err
		}
	}
	return t, true, nil
}

// workloadChanged reports whether the call serves workloads and the
// workload of uid is not the one the client was last sent.
func (ww *workloadWatch) workloadChanged(h *handler, uid types.UID) bool {
	if !ww.opts.include || h.workloads == nil {
		return false
	}
	now, ok := h.workloads.Workload(uid)
	last, sent := ww.sentWorkloads[uid]
	return ok != sent || now != last
}

// sent notes that the client was sent an event of type t about uid, with
// the workload w when ok.
func (ww *workloadWatch) sent(t store.EventType, uid types.UID, w workload.Workload, ok bool) {
	if ww.sentWorkloads != nil {
		if t == store.Deleted || !ok {
			delete(ww.sentWorkloads, uid)
		} else {
			ww.sentWorkloads[uid] = w
		}
	}
	if ww.held == nil {
		return
	}
	if t == store.Deleted {
		delete(ww.held, uid)
	} else {
		ww.held[uid] = struct{}{}
	}
}

// sendWorkloadChanges sends what the pods whose workload changed look like
// to the call now, at the store version c.last: MODIFIED with the new
// workload, or, with a workload selector, ADDED or DELETED when the pod
// starts or stops matching. A pod with a change still queued for the call
// gets its new workload with that change.
func (c *watchCall) sendWorkloadChanges() error {
	for _, uid := range c.wl.take() {
		p, ok := c.h.store.Get(uid)
		if !ok || p.Version > c.last {
			// Gone, or a change of the pod is queued for the call, which
			// carries the new workload.
			continue
		}
		t := store.Modified
		if c.wl.opts.sel != nil {
			_, held := c.wl.held[uid]
			now := c.sel.matches(p) && c.h.selectsWorkload(c.wl.opts.sel, uid)
			switch {
			case now && !held:
				t = store.Added
			case !now && held:
				t = store.Deleted
			case !now:
				continue
			}
		}
		if t == store.Modified && !c.wl.workloadChanged(c.h, uid) {
			continue
		}
		if err := c.check(); err != nil {
			return err
		}
		if err := c.send(t, p, c.last); err != nil {
			return err
		}
	}
	return nil
}

// withWorkload returns ev, an encoded event of type t about uid, with the
// pod's workload appended when the call serves workloads, and notes what
// the client was sent.
func (c *watchCall) withWorkload(ev []byte, t store.EventType, uid types.UID) []byte {
	var (
		w  workload.Workload
		ok bool
	)
	if c.wl.opts.include && c.h.workloads != nil {
		if w, ok = c.h.workloads.Workload(uid); ok {
			ev = protowire.AppendTag(ev[:len(ev):len(ev)], watchWorkloadField, protowire.BytesType)
			ev = protowire.AppendBytes(ev, appendWorkload(nil, w))
		}
	}
	c.wl.sent(t, uid, w, ok)
	return ev
}

// compile-time check: the resolver tells of changes.
var _ WorkloadNotifier = (*workload.Resolver)(nil)
