package client

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/internal/retry"
)

// Cache is a local copy of the node's pods kept up to date by a watch, like
// a client-go informer: agents read it without calling the server, and
// register handlers told about every change.
//
// Run watches until its context is done. When the watch ends (the server
// restarts, is not synced yet, or drops the watcher) the cache keeps
// serving what it knows and watches again after a jittered exponential
// backoff. A server with revisions (podsapi's typed wire) is asked to resume
// from the last revision the cache saw: it sends only the changes made
// since, which the cache applies as live events. When it cannot resume
// (ErrRevisionTooOld: its history no longer holds them, or it restarted),
// or has no revisions (WireKubelet, an older podsapi), the cache watches
// again from a snapshot, then reconciles: pods gone in between are reported
// to OnDelete, changed ones to OnUpdate, new ones to OnAdd, unchanged ones
// to nobody. Either way the handlers see the same calls.
//
// With WithNamespace, WithLabelSelector or WithFieldSelector the cache
// holds only the selected pods: a pod that stops matching is reported to
// OnDelete, one that starts to OnAdd.
//
// Pods returned by the cache, and given to handlers, are shared: they must
// not be modified.
type Cache struct {
	client *Client
	opts   cacheOptions

	// revision is the last revision of the server the cache reflects, ""
	// when unknown; read and written by Run only.
	revision string

	mu      sync.RWMutex
	idx     *index
	synced  chan struct{}
	started atomic.Bool

	// failed is closed when Run stops for an error retrying cannot fix,
	// which err then holds.
	failed chan struct{}
	err    error

	onAdd    []func(pod *corev1.Pod)
	onUpdate []func(old, new *corev1.Pod)
	onDelete []func(pod *corev1.Pod)
}

// NewCache returns a cache of the pods c serves. Register handlers, then
// call Run.
func NewCache(c *Client, opts ...CacheOption) *Cache {
	o := cacheOptions{minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff, onError: func(error) {}}
	for _, opt := range opts {
		opt.applyCache(&o)
	}
	return &Cache{client: c, opts: o, idx: newIndex(), synced: make(chan struct{}), failed: make(chan struct{})}
}

// OnAdd registers f to be called with every pod added to the cache. Handlers
// are called from the goroutine of Run, one at a time, in the order of the
// changes, after the cache reflects the change. It panics if called after
// Run.
func (c *Cache) OnAdd(f func(pod *corev1.Pod)) {
	c.mustNotBeStarted()
	c.onAdd = append(c.onAdd, f)
}

// OnUpdate registers f to be called with the previous and the new state of
// every changed pod, like OnAdd.
func (c *Cache) OnUpdate(f func(old, new *corev1.Pod)) {
	c.mustNotBeStarted()
	c.onUpdate = append(c.onUpdate, f)
}

// OnDelete registers f to be called with the last known state of every pod
// removed from the cache, like OnAdd. On WireKubelet, whose Deleted events
// carry only the pod's identity, that is the state the cache held.
func (c *Cache) OnDelete(f func(pod *corev1.Pod)) {
	c.mustNotBeStarted()
	c.onDelete = append(c.onDelete, f)
}

// mustNotBeStarted panics when Run was called.
func (c *Cache) mustNotBeStarted() {
	if c.started.Load() {
		panic("client: Cache handlers must be registered before Run")
	}
}

// HasSynced reports whether the cache has received a complete snapshot of
// the node's pods. It stays true while the cache reconnects.
func (c *Cache) HasSynced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

// WaitForSync waits until the cache has synced, its handlers having been
// called for the initial state, and returns nil. It returns the error with
// which Run stopped when Run stops before (an error retrying cannot fix:
// see Run), and ctx's error when ctx ends first.
func (c *Cache) WaitForSync(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-c.failed:
		return c.err
	case <-ctx.Done():
		// A failure and ctx's end at once: the failure says more.
		select {
		case <-c.failed:
			return c.err
		default:
			return ctx.Err()
		}
	}
}

// Err returns the error with which Run stopped, nil while it runs, when it
// stopped because its context ended, or before it is called.
func (c *Cache) Err() error {
	select {
	case <-c.failed:
		return c.err
	default:
		return nil
	}
}

// Get returns the pod with the given UID.
func (c *Cache) Get(uid types.UID) (*corev1.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	pod, ok := c.idx.pods[uid]
	return pod, ok
}

// GetByName returns the pod named name in namespace.
func (c *Cache) GetByName(namespace, name string) (*corev1.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	uid, ok := c.idx.byName[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, false
	}
	return c.idx.pods[uid], true
}

// List returns every pod of the cache, sorted by namespace, name and UID.
func (c *Cache) List() []*corev1.Pod {
	c.mu.RLock()
	pods := make([]*corev1.Pod, 0, len(c.idx.pods))
	for _, p := range c.idx.pods {
		pods = append(pods, p)
	}
	c.mu.RUnlock()
	sortPods(pods)
	return pods
}

// ByPodIP returns the pods that have ip among their status.podIPs (or as
// status.podIP), sorted by namespace, name and UID. Several pods share an
// IP when they use the host's network.
func (c *Cache) ByPodIP(ip string) []*corev1.Pod {
	c.mu.RLock()
	var pods []*corev1.Pod
	for uid := range c.idx.byIP[ip] {
		pods = append(pods, c.idx.pods[uid])
	}
	c.mu.RUnlock()
	sortPods(pods)
	return pods
}

// Run keeps the cache up to date until ctx is done, then returns nil. It
// stops early and returns an error only for one that retrying cannot fix
// (see Terminal): an invalid field mask or selector (INVALID_ARGUMENT;
// a selector's wraps ErrInvalidSelector), a peer the server
// does not allow (PERMISSION_DENIED, ErrPermissionDenied), an
// UNAUTHENTICATED one, or a socket whose permissions refuse this user. WaitForSync and Err then return that error too, so
// that a caller who runs Run in its own goroutine sees it. Every other
// error (the server not running, not synced yet, restarting, rate
// limiting, dropping the watcher) is retried after a backoff and given to
// WithErrorHandler's function. Run may be called once.
func (c *Cache) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("client: Cache.Run called twice")
	}
	b := retry.NewBackoff(c.opts.minBackoff, c.opts.maxBackoff)
	for {
		err := c.watchOnce(ctx, b)
		if ctx.Err() != nil {
			return nil
		}
		if Terminal(err) {
			c.err = err
			close(c.failed)
			return err
		}
		c.opts.onError(err)
		t := time.NewTimer(b.Next())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Terminal reports whether err is one that retrying the same call cannot
// fix: INVALID_ARGUMENT (a bad field mask, selector or revision),
// PERMISSION_DENIED (the server does not allow this peer: --allowed-uids,
// --allowed-gids), UNAUTHENTICATED, or a socket this user may not connect
// to (its file permissions, or its directory's: EACCES, EPERM, which
// errors.Is reports as fs.ErrPermission). A Cache stops on such an error;
// every other one (a socket that does not exist yet included) it retries.
func Terminal(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodePermissionDenied, connect.CodeUnauthenticated:
		return err != nil
	}
	return errors.Is(err, fs.ErrPermission)
}

// watchOnce watches until the watch fails, reconciling the cache with the
// watch's snapshot, and returns the error that ended it.
// When the cache knows a revision it resumes from it instead, and watches
// from a snapshot when the server cannot resume.
func (c *Cache) watchOnce(ctx context.Context, b *retry.Backoff) error {
	opts := []CallOption{WithFields(c.opts.fields...), WithNamespace(c.opts.namespace),
		WithLabelSelector(c.opts.labelSel), WithFieldSelector(c.opts.fieldSel)}
	if c.revision != "" {
		w, err := c.client.Watch(ctx, append(opts, WithResumeFrom(c.revision))...)
		if errors.Is(err, ErrRevisionTooOld) {
			c.revision = ""
			return c.watchOnce(ctx, b)
		}
		if err != nil {
			return err
		}
		defer w.Close()
		return c.follow(w, b, true)
	}
	w, err := c.client.Watch(ctx, opts...)
	if err != nil {
		return err
	}
	defer w.Close()
	snapshot := make(map[types.UID]*corev1.Pod)
	var order []*corev1.Pod
	for {
		ev, err := w.Next()
		if err != nil {
			return err
		}
		if ev.Type == Synced {
			c.revision = ev.Revision
			break
		}
		// Before Synced the server sends only Added; be lenient anyway.
		if ev.Type == Deleted {
			delete(snapshot, ev.Pod.UID)
			continue
		}
		if _, seen := snapshot[ev.Pod.UID]; !seen {
			order = append(order, ev.Pod)
		}
		snapshot[ev.Pod.UID] = ev.Pod
	}
	c.reconcile(snapshot, order)
	b.Reset()
	return c.follow(w, b, false)
}

// follow applies the events of w to the cache until w fails, and returns
// its error, keeping the revision to resume from (that of FELL_BEHIND
// when the server tells it). resumed says w resumes
// from c.revision: until its Synced event, it sends the changes made since
// then, which may repeat changes already applied (when a resume was itself
// cut short), so the cache's revision moves only at Synced.
func (c *Cache) follow(w *Watcher, b *retry.Backoff, resumed bool) error {
	for {
		ev, err := w.Next()
		if err != nil {
			if rev := ResumeRevision(err); rev != "" {
				c.revision = rev
			}
			return err
		}
		if ev.Type == Synced {
			resumed = false
			c.revision = ev.Revision
			b.Reset()
			continue
		}
		c.apply(ev, resumed)
		if !resumed && ev.Revision != "" {
			c.revision = ev.Revision
		}
	}
}

// reconcile replaces the cache's pods with snapshot, whose pods are also in
// order (maybe with stale duplicates), and calls the handlers for the
// differences: deletions first, then additions and updates in snapshot
// order.
func (c *Cache) reconcile(snapshot map[types.UID]*corev1.Pod, order []*corev1.Pod) {
	c.mu.Lock()
	var deleted []*corev1.Pod
	for uid, old := range c.idx.pods {
		if _, ok := snapshot[uid]; !ok {
			deleted = append(deleted, old)
		}
	}
	type change struct{ old, new *corev1.Pod }
	var changes []change
	for _, p := range order {
		cur := snapshot[p.UID]
		if cur != p {
			continue // a stale duplicate
		}
		old, ok := c.idx.pods[p.UID]
		if ok && !changed(old, cur) {
			continue
		}
		changes = append(changes, change{old, cur})
	}
	for _, p := range deleted {
		c.idx.remove(p.UID)
	}
	for _, ch := range changes {
		c.idx.set(ch.new)
	}
	c.mu.Unlock()

	sortPods(deleted)
	for _, p := range deleted {
		c.notifyDelete(p)
	}
	for _, ch := range changes {
		if ch.old == nil {
			c.notifyAdd(ch.new)
		} else {
			c.notifyUpdate(ch.old, ch.new)
		}
	}
	// Synced once the handlers have seen the initial state: WaitForSync
	// then returns after them.
	c.mu.Lock()
	select {
	case <-c.synced:
	default:
		close(c.synced)
	}
	c.mu.Unlock()
}

// changed reports whether the pod changed from old to new: when both have
// a resourceVersion and they differ; otherwise (same or unknown versions,
// which a field mask or a source without versions gives) when the pods are
// not semantically equal.
func changed(old, new *corev1.Pod) bool {
	if old.ResourceVersion != "" && new.ResourceVersion != "" && old.ResourceVersion != new.ResourceVersion {
		return true
	}
	return !equality.Semantic.DeepEqual(old, new)
}

// apply applies a live event to the cache and calls the handlers. replay
// says the event may repeat one already applied: an update that changes
// nothing is then not reported.
func (c *Cache) apply(ev Event, replay bool) {
	if ev.Pod == nil {
		return
	}
	c.mu.Lock()
	old, had := c.idx.pods[ev.Pod.UID]
	if replay && had && ev.Type != Deleted && !changed(old, ev.Pod) {
		c.mu.Unlock()
		return
	}
	switch ev.Type {
	case Added, Modified:
		c.idx.set(ev.Pod)
	case Deleted:
		c.idx.remove(ev.Pod.UID)
	}
	c.mu.Unlock()
	switch {
	case ev.Type == Deleted && had:
		c.notifyDelete(lastKnown(old, ev.Pod))
	case ev.Type == Deleted:
	case had:
		c.notifyUpdate(old, ev.Pod)
	default:
		c.notifyAdd(ev.Pod)
	}
}

// lastKnown returns the last known state of a deleted pod: the one its
// Deleted event carries, unless the event carries only the pod's identity,
// as a kubelet's do; then the cached one.
func lastKnown(cached, deleted *corev1.Pod) *corev1.Pod {
	identity := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: deleted.Namespace, Name: deleted.Name, UID: deleted.UID}}
	if equality.Semantic.DeepEqual(deleted, identity) {
		return cached
	}
	return deleted
}

func (c *Cache) notifyAdd(pod *corev1.Pod) {
	for _, f := range c.onAdd {
		f(pod)
	}
}

func (c *Cache) notifyUpdate(old, new *corev1.Pod) {
	for _, f := range c.onUpdate {
		f(old, new)
	}
}

func (c *Cache) notifyDelete(pod *corev1.Pod) {
	for _, f := range c.onDelete {
		f(pod)
	}
}
