package workload

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// ownerKey names an object the Resolver gets: a ReplicaSet or Job a pod of
// the node references and, with WithSlice, every object of the node's slice
// (slice.go). Its UID is the one its referrer names: an owner deleted and
// created again under its name is another. A namespace's is empty: a pod
// names its namespace by name only.
type ownerKey struct {
	kind, namespace, name string
	uid                   types.UID
}

// podRef is what the Resolver knows of one pod.
type podRef struct {
	// w is the pod's workload when the pod alone tells it (owner is nil).
	w Workload
	// owner is the ReplicaSet or Job to ask about, and hash the pod's
	// pod-template-hash label, for derivation.
	owner *ownerKey
	hash  string
	// keys are the entries the pod holds: its owner's and, with
	// WithSlice, its controller's and its namespace's.
	keys []ownerKey
}

// entry is what the Resolver knows of one owner, kept while a pod of the
// node, or an entry it controls, holds it.
type entry struct {
	pods map[types.UID]struct{}
	// children are the entries this one controls that hold it (with
	// WithSlice: a Deployment's ReplicaSets, a CronJob's Jobs); parent is
	// the entry that controls this one, when this one holds it.
	children map[ownerKey]struct{}
	parent   *ownerKey
	// obj is the object the API server last answered, with WithSlice, nil
	// while none is known or it is gone; told says the event handlers
	// were told of it (added).
	obj  Object
	told bool
	// recheck asks for a get at once (Recheck).
	recheck bool
	// answer is the API server's last answer; answered says there is one.
	answer   Workload
	answered bool
	// gone says the owner does not exist (any more) under that UID.
	gone bool
	// confirmed is when the API server last answered; checked when it was
	// last asked; failed says that last ask failed.
	confirmed, checked time.Time
	// failures counts the gets failed in a row, which back off.
	failures int
	asking   bool
	// stale says the answer was told stale: older than the stale-after
	// bound, its pods' workloads Unresolved by time, not by an answer.
	stale bool
}

// Resolver resolves the workload of the node's pods. Feed it every pod of
// the node (Observe) and every deletion (Forget); Run asks the API server in
// the background. Its methods are safe for concurrent use.
type Resolver struct {
	getter                              Getter
	refresh, retry, staleAfter, timeout time.Duration
	maxOwners                           int
	onChange                            func([]types.UID)
	log                                 *slog.Logger
	now                                 func() time.Time

	wake chan struct{}

	// listeners are the functions Notify registered, by their keys.
	listenersMu sync.Mutex
	listeners   map[uint64]func([]types.UID)
	nextKey     uint64

	registerer prometheus.Registerer
	metrics    *metrics

	mu   sync.Mutex
	pods map[types.UID]podRef
	// forgotten are the last answers of the pods Forget dropped, the
	// oldest first in forgottenOrder, bounded by maxForgotten.
	forgotten      map[types.UID]Workload
	forgottenOrder []types.UID
	owners         map[ownerKey]*entry
	// waiting are the pods whose owner found no room among the owners
	// (maxOwners), answered by derivation until an owner leaves.
	waiting map[types.UID]struct{}
	gets    map[string]uint64

	// slice is the state of WithSlice (slice.go); its zero value is off.
	slice slice
}

// NewResolver returns a Resolver configured by opts.
func NewResolver(opts ...Option) *Resolver {
	r := &Resolver{
		refresh: 30 * time.Minute, retry: 10 * time.Second, staleAfter: time.Hour,
		timeout: 10 * time.Second, maxOwners: 4096, onChange: func([]types.UID) {},
		log: slog.Default(), now: time.Now,
		wake: make(chan struct{}, 1),
		pods: map[types.UID]podRef{}, forgotten: map[types.UID]Workload{}, owners: map[ownerKey]*entry{}, waiting: map[types.UID]struct{}{}, gets: map[string]uint64{},
	}
	for _, o := range opts {
		o(r)
	}
	r.register()
	return r
}

// Notify calls f, outside the Resolver's lock, with the UIDs of the pods
// whose workload changed after an answer of the API server, or turned
// Unresolved when the answer grew older than the stale-after bound (told
// at that instant, by Run), until stop is
// called: a watch that serves workloads registers itself for its lifetime.
// f must not block, and must not keep the slice.
func (r *Resolver) Notify(f func(pods []types.UID)) (stop func()) {
	r.listenersMu.Lock()
	defer r.listenersMu.Unlock()
	if r.listeners == nil {
		r.listeners = map[uint64]func([]types.UID){}
	}
	key := r.nextKey
	r.nextKey++
	r.listeners[key] = f
	return func() {
		r.listenersMu.Lock()
		defer r.listenersMu.Unlock()
		delete(r.listeners, key)
	}
}

// notify calls every function Notify registered with changed.
func (r *Resolver) notify(changed []types.UID) {
	r.listenersMu.Lock()
	defer r.listenersMu.Unlock()
	for _, f := range r.listeners {
		f(changed)
	}
}

// Observe takes a new version of a pod of the node. It never blocks on the
// API server: an owner not known yet is asked about by Run.
func (r *Resolver) Observe(pod *corev1.Pod) {
	w, ref := direct(pod)
	next := podRef{w: w}
	if ref != nil {
		next = podRef{owner: &ownerKey{kind: ref.Kind, namespace: pod.Namespace, name: ref.Name, uid: ref.UID}, hash: pod.Labels[podTemplateHashLabel]}
	}
	if r.getter != nil {
		next.keys = r.keysOf(pod, next.owner)
	}
	r.mu.Lock()
	prev, had := r.pods[pod.UID]
	if had && slices.Equal(prev.keys, next.keys) {
		r.pods[pod.UID] = next
		r.mu.Unlock()
		return
	}
	if had {
		r.release(pod.UID, prev, next.keys)
	}
	r.pods[pod.UID] = next
	if !r.reference(pod.UID, next.keys) {
		r.waiting[pod.UID] = struct{}{}
	}
	r.mu.Unlock()
	r.deliver()
}

// reference makes pod uid hold the entries of keys, creating each (and
// having Run ask about it) that no pod of the node held yet, and reports
// whether it could hold them all: false when the Resolver already keeps
// maxOwners owners. r.mu is held.
func (r *Resolver) reference(uid types.UID, keys []ownerKey) bool {
	all := true
	for _, key := range keys {
		if e := r.entryFor(key); e != nil {
			e.pods[uid] = struct{}{}
		} else {
			all = false
		}
	}
	return all
}

// entryFor returns the entry of key, created (and Run woken to ask about
// it) when none is kept, or nil when there is no room for it (maxOwners).
// r.mu is held.
func (r *Resolver) entryFor(key ownerKey) *entry {
	e := r.owners[key]
	if e == nil {
		if len(r.owners) >= r.maxOwners {
			return nil
		}
		e = &entry{pods: map[types.UID]struct{}{}, children: map[ownerKey]struct{}{}}
		r.owners[key] = e
		r.signal()
	}
	return e
}

// admitWaiting registers the pods, and the entries' controllers, that
// waited for room among the owners, as far as there is room. r.mu is held.
func (r *Resolver) admitWaiting() {
	for uid := range r.waiting {
		if p, ok := r.pods[uid]; ok && !r.reference(uid, p.keys) {
			continue
		}
		delete(r.waiting, uid)
	}
	r.admitParents()
}

// maxForgotten bounds the last answers kept of pods that left the node,
// which FindPods serves with the deleted pods it still matches.
const maxForgotten = 1024

// Forget drops a pod that left the node, and its owner's answer when no
// other pod of the node references the owner. The pod's last answer is
// kept, as it was, among the last maxForgotten pods forgotten.
func (r *Resolver) Forget(uid types.UID) {
	r.mu.Lock()
	prev, ok := r.pods[uid]
	if !ok {
		r.mu.Unlock()
		return
	}
	w := prev.w
	if prev.owner != nil {
		w = r.answer(prev, r.owners[*prev.owner])
	}
	r.release(uid, prev, nil)
	delete(r.pods, uid)
	if _, dup := r.forgotten[uid]; !dup {
		if len(r.forgottenOrder) >= maxForgotten {
			delete(r.forgotten, r.forgottenOrder[0])
			r.forgottenOrder = r.forgottenOrder[1:]
		}
		r.forgottenOrder = append(r.forgottenOrder, uid)
	}
	r.forgotten[uid] = w
	r.mu.Unlock()
	r.deliver()
}

// release drops pod uid's hold on its entries but those of keep (which its
// next version holds too: a namespace is not dropped and got again when a
// pod changes owners), or its place among the pods waiting for room; an
// entry nothing holds any more is dropped and makes room for them. r.mu is
// held.
func (r *Resolver) release(uid types.UID, p podRef, keep []ownerKey) {
	delete(r.waiting, uid)
	freed := false
	for _, key := range p.keys {
		if slices.Contains(keep, key) {
			continue
		}
		if e := r.owners[key]; e != nil {
			delete(e.pods, uid)
			freed = r.dropIfFree(key, e) || freed
		}
	}
	if freed {
		r.admitWaiting()
	}
}

// dropIfFree drops the entry e of key when nothing holds it any more,
// telling the event handlers its object is deleted, and lets go of its
// controller's entry, and reports whether it dropped it. r.mu is held.
func (r *Resolver) dropIfFree(key ownerKey, e *entry) bool {
	if len(e.pods) > 0 || len(e.children) > 0 {
		return false
	}
	delete(r.owners, key)
	r.untell(key, e)
	r.setParent(key, e, nil)
	return true
}

// signal wakes Run.
func (r *Resolver) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Workload returns the workload of the pod with the given UID, and false
// when the Resolver has not observed the pod. A pod forgotten is answered
// as it was when it was forgotten, while it is among the last 1,024.
func (r *Resolver) Workload(uid types.UID) (Workload, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		w, ok := r.forgotten[uid]
		return w, ok
	}
	if p.owner == nil {
		return p.w, true
	}
	return r.answer(p, r.owners[*p.owner]), true
}

// answer returns the workload of pod p whose owner's entry is e (nil when
// not asked about). r.mu is held.
func (r *Resolver) answer(p podRef, e *entry) Workload {
	switch {
	case e == nil || !e.answered:
		return derive(p.owner.kind, p.owner.name, p.hash)
	case e.gone:
		return Workload{Kind: p.owner.kind, Name: p.owner.name, Resolution: Unresolved}
	case r.isStale(e, r.now()):
		w := e.answer
		w.Resolution = Unresolved
		return w
	}
	return e.answer
}

// isStale reports whether e's answer has reached the stale-after bound at
// now. r.mu is held.
func (r *Resolver) isStale(e *entry, now time.Time) bool {
	return !now.Before(e.confirmed.Add(r.staleAfter))
}

// Gets returns how many gets the Resolver has sent, by the owner's kind
// (KindReplicaSet, KindJob).
func (r *Resolver) Gets() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]uint64, len(r.gets))
	for k, v := range r.gets {
		out[k] = v
	}
	return out
}

// Run asks the API server about the owners due, until ctx ends. Without a
// Getter it returns at once.
func (r *Resolver) Run(ctx context.Context) {
	if r.getter == nil {
		return
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := r.Sync(ctx)
		d := time.Hour
		if !next.IsZero() {
			d = max(next.Sub(r.now()), time.Millisecond)
		}
		t.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-t.C:
		}
	}
}

// Sync asks the API server, one get at a time, about every owner due: never
// asked, asked a refresh interval ago, or failed a retry interval ago (the
// retry interval doubles with each failure in a row, up to the refresh
// interval). It
// returns when the next owner is due (zero when none is known).
func (r *Resolver) Sync(ctx context.Context) time.Time {
	if r.getter == nil {
		return time.Time{}
	}
	for ctx.Err() == nil {
		key, ok := r.due()
		if !ok {
			break
		}
		r.ask(ctx, key)
	}
	next, changed := r.settle()
	r.tell(changed)
	r.deliver()
	return next
}

// due picks an owner due and marks it being asked about.
func (r *Resolver) due() (ownerKey, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, e := range r.owners {
		if !e.asking && !r.dueAt(e).After(now) {
			e.asking, e.recheck = true, false
			return k, true
		}
	}
	return ownerKey{}, false
}

// dueAt returns when e is next due. r.mu is held.
func (r *Resolver) dueAt(e *entry) time.Time {
	switch {
	case e.checked.IsZero(), e.recheck:
		return time.Time{}
	case e.failures > 0:
		// The retry interval, doubled after each failure, up to the
		// refresh interval: an API server that refuses every get (RBAC
		// without them) is asked at the refresh rate.
		d := r.retry
		for i := 1; i < e.failures && d < r.refresh; i++ {
			d *= 2
		}
		return e.checked.Add(min(d, r.refresh))
	}
	return e.checked.Add(r.refresh)
}

// settle drops the controllers' entries no child held again since the last
// let go of them (slice.go), marks stale the answers that turned older than
// the stale-after bound since they were last told, and returns the pods
// whose workload that made Unresolved, with when the Resolver must look
// again: the next owner due, or the next answer to turn stale, whichever
// comes first (zero when none).
//
// A workload that turns Unresolved by time changes no answer, so ask, which
// compares its pods' workloads before and after an answer at one instant,
// never sees it: settle is what tells the watches, at the staleness itself,
// since Run wakes then.
func (r *Resolver) settle() (time.Time, []types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropOrphans() {
		r.admitWaiting()
	}
	now := r.now()
	var (
		next    time.Time
		changed []types.UID
	)
	earliest := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for key, e := range r.owners {
		earliest(r.dueAt(e))
		if !e.answered || e.gone || e.stale || !answersWorkload(key.kind) {
			continue
		}
		if !r.isStale(e, now) {
			earliest(e.confirmed.Add(r.staleAfter))
			continue
		}
		e.stale = true
		for uid := range e.pods {
			if p := r.pods[uid]; p.owner != nil && *p.owner == key {
				changed = append(changed, uid)
			}
		}
	}
	return next, changed
}

// tell calls the OnChange function and every function Notify registered
// with the pods whose workload changed, outside r.mu.
func (r *Resolver) tell(changed []types.UID) {
	if len(changed) > 0 {
		r.onChange(changed)
		r.notify(changed)
	}
}

// ask gets the owner key and records the answer.
func (r *Resolver) ask(ctx context.Context, key ownerKey) {
	resource := resources[key.kind]
	getter := r.getter
	if key.kind == KindNamespace && r.slice.namespaces != nil {
		getter = r.slice.namespaces
	}
	r.mu.Lock()
	r.gets[key.kind]++
	r.mu.Unlock()
	gctx, cancel := context.WithTimeout(ctx, r.timeout)
	obj, err := getter.Get(gctx, resource, key.namespace, key.name)
	cancel()

	r.mu.Lock()
	e := r.owners[key]
	if e == nil { // every pod referencing it left meanwhile
		r.mu.Unlock()
		r.countGet(key.kind, getResult(err, obj, key))
		return
	}
	e.asking = false
	before := make(map[types.UID]Workload, len(e.pods))
	for uid := range e.pods {
		if p := r.pods[uid]; p.owner != nil && *p.owner == key {
			before[uid] = r.answer(p, e)
		}
	}
	now := r.now()
	e.checked = now
	wasFailed := e.failures > 0
	result := "found"
	switch {
	case err == nil && sameUID(key, obj):
		e.answer, e.answered, e.gone, e.failures, e.confirmed, e.stale = fromOwner(key.kind, key.name, obj.GetOwnerReferences()), true, false, 0, now, false
		r.keep(key, e, obj)
	case err == nil || apierrors.IsNotFound(err):
		// Deleted, or deleted and created again: the pod's owner is gone.
		e.answered, e.gone, e.failures, e.confirmed, e.stale = true, true, 0, now, false
		r.untell(key, e)
		r.setParent(key, e, nil)
		result = "gone"
	case ctx.Err() != nil:
		e.checked = time.Time{} // ask again at the next Run
		result = "error"
	default:
		e.failures++
		result = "error"
	}
	r.admitWaiting() // an answer may have let go of a controller
	var changed []types.UID
	for uid, w := range before {
		if r.answer(r.pods[uid], e) != w {
			changed = append(changed, uid)
		}
	}
	r.mu.Unlock()
	r.deliver()
	r.countGet(key.kind, result)
	if err != nil && !apierrors.IsNotFound(err) && !wasFailed && ctx.Err() == nil {
		msg := "cannot resolve the workload of pods: the last known answer is kept"
		if !answersWorkload(key.kind) {
			msg = "cannot refresh an object of the node's slice: the last one got is kept"
		}
		r.log.Warn(msg, "kind", key.kind, "namespace", key.namespace, "name", key.name, "error", err)
	}
	r.tell(changed)
}

// sameUID reports whether obj is the object key names: its UID, when key
// names one.
func sameUID(key ownerKey, obj Object) bool {
	return key.uid == "" || obj.GetUID() == key.uid
}

// getResult names the result of a get of key, as podsapi_workload_gets_total
// counts it.
func getResult(err error, obj Object, key ownerKey) string {
	switch {
	case err == nil && sameUID(key, obj):
		return "found"
	case err == nil || apierrors.IsNotFound(err):
		return "gone"
	}
	return "error"
}
