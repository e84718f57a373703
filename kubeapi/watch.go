package kubeapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/podsapi/podsapi/store"
)

// historyBatch is how many changes a resumed watch reads from the store's
// history at a time.
const historyBatch = 64

// serveWatch answers a watch of the objects of q's resource (the node's
// pods, the namespaces, the node), as the API server's watch cache does:
//
//   - with sendInitialEvents (the default of a watch from resourceVersion ""
//     or "0"), an ADDED event for every object selected now, then, when
//     bookmarks are allowed, a BOOKMARK annotated
//     k8s.io/initial-events-end: "true" at the revision of that state;
//   - from any other resourceVersion, the changes after it, read from the
//     store's history, or a single ERROR event 410 Expired when the store no
//     longer holds them (or the revision is another podsapi's, or the API
//     server's), so that client-go lists again;
//   - then every change, an object that starts or stops matching the selectors
//     being ADDED or DELETED (with its last matching state), and a BOOKMARK
//     at the last revision seen every bookmark interval when allowed.
//
// It ends at timeoutSeconds (capped by WithWatchTimeout), when the client
// goes, when a write does not complete within WithWriteTimeout (a client
// that stopped reading: the deadline is set only while a write is pending,
// never while the watch is idle), or when the watch falls behind the store
// by more than its queue: the client then resumes from the last
// resourceVersion it received. WithWatchEnded is told which.
//
// Its events carry the objects, PartialObjectMetadata or (table not nil) Tables of
// one row as fm asks; the first Table carries the column definitions, the
// others none, as the API server sends them.
func (h *Handler) serveWatch(w http.ResponseWriter, r *http.Request, fm form, q *query, table *metav1.TableOptions) {
	f := fm.format
	rc := http.NewResponseController(w)
	timeout := h.watchTimeout
	if ts := q.opts.TimeoutSeconds; ts != nil && *ts > 0 {
		timeout = min(timeout, time.Duration(*ts)*time.Second)
	}
	rv := q.opts.ResourceVersion
	initial := q.opts.SendInitialEvents != nil && *q.opts.SendInitialEvents
	s := &watchStream{h: h, fm: fm, table: table, q: q, rc: rc, ctx: r.Context()}
	end := WatchFailed
	defer func() {
		if h.watchEnded != nil {
			h.watchEnded(r, end)
		}
	}()

	var snapshot []*store.Pod
	var replay store.Replay
	var wt *store.Watcher
	var startErr error
	if !initial && rv != "" && rv != "0" {
		replay, wt, startErr = q.res.reader.WatchFrom(rv, h.queue, nil)
	} else {
		snapshot, wt = q.res.reader.Watch(h.queue, nil)
		replay = store.Replay{After: wt.Since(), Until: wt.Since()}
	}
	if wt != nil {
		defer wt.Stop()
	}

	w.Header().Set("Content-Type", f.streamType)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	s.out = f.framer.NewFrameWriter(w)
	// The end of the response, written after the return, is bounded too:
	// an HTTP/2 stream's deadline goes with the stream, and net/http clears
	// an HTTP/1.1 connection's once the response is written.
	defer s.deadline()
	s.deadline()
	if startErr != nil {
		s.fail(errExpired(rv))
		if end = s.flush(); end == "" {
			end = WatchExpired
		}
		return
	}
	s.seen = replay.After
	if initial {
		for _, p := range snapshot {
			if q.matches(p) && !s.send(watch.Added, p, p.Version) {
				end = s.ended()
				return
			}
		}
		if q.opts.AllowWatchBookmarks && !s.bookmark(true) {
			end = s.ended()
			return
		}
	}
	if !s.replay(replay) {
		end = s.ended()
		return
	}
	if end = s.flush(); end != "" {
		return
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var tick <-chan time.Time
	if q.opts.AllowWatchBookmarks && h.bookmarkEvery > 0 {
		t := time.NewTicker(h.bookmarkEvery)
		defer t.Stop()
		tick = t.C
	}
	var buf []store.Event
	for {
		select {
		case <-r.Context().Done():
			end = WatchCancelled
			return
		case <-timer.C:
			end = WatchTimedOut
			return
		case <-wt.Dropped():
			end = WatchFellBehind
			return
		case <-tick:
			s.deadline()
			if !s.bookmark(false) {
				end = s.ended()
				return
			}
		case <-wt.Ready():
			s.deadline()
			buf = wt.Take(buf)
			for _, ev := range buf {
				if !s.change(ev) {
					end = s.ended()
					return
				}
			}
		}
		if end = s.flush(); end != "" {
			return
		}
	}
}

// watchStream writes the events of one watch.
type watchStream struct {
	h  *Handler
	fm form
	// table is the options of a watch of Tables, or nil.
	table *metav1.TableOptions
	// headed is whether a Table with the column definitions was sent.
	headed bool
	q      *query
	rc     *http.ResponseController
	ctx    context.Context
	out    io.Writer
	// seen is the store version of the last change the stream has
	// accounted for (sent, or skipped as not selected).
	seen uint64
	// due is the write deadline set, zero when none is.
	due time.Time
	// failed is set when an event could not be encoded, expired when the
	// store no longer holds the changes to replay.
	failed, expired bool
}

// deadline gives the writes that follow, up to the next flush, the
// handler's write timeout, so that a client that stops reading frees the
// watch (a writer that cannot set deadlines is written without).
//
// The deadline must not outlive the writes: Go's HTTP/2 server resets a
// stream whose write deadline passes even when nothing is being written,
// which would end every idle watch one write timeout after its last event.
// flush clears it.
func (s *watchStream) deadline() {
	if s.h.writeTimeout > 0 {
		s.due = time.Now().Add(s.h.writeTimeout)
		_ = s.rc.SetWriteDeadline(s.due)
	}
}

// flush sends what is buffered under the deadline set, then clears the
// deadline, so that the watch may stay idle as long as it lasts. It
// returns why the watch must end, or "" when it may go on.
func (s *watchStream) flush() WatchEnd {
	if s.rc.Flush() != nil {
		return s.ended()
	}
	if !s.due.IsZero() {
		s.due = time.Time{}
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
	return ""
}

// ended tells why a write of the stream failed: an event that could not be
// encoded, a write still pending at its deadline (a client that stopped
// reading), or the client gone (or the server shutting down).
func (s *watchStream) ended() WatchEnd {
	switch {
	case s.expired:
		return WatchExpired
	case s.failed:
		return WatchFailed
	case !s.due.IsZero() && !time.Now().Before(s.due):
		return WatchStalled
	case s.ctx.Err() != nil:
		return WatchCancelled
	}
	return WatchFailed
}

// replay sends the changes of the range from the store's history, and
// reports whether the stream may go on.
func (s *watchStream) replay(r store.Replay) bool {
	buf := make([]store.Event, 0, historyBatch)
	for s.seen < r.Until {
		s.deadline()
		evs, err := s.q.res.reader.ReadHistory(s.seen, r.Until, buf)
		if err != nil || len(evs) == 0 {
			s.expired = true
			s.fail(errExpired(s.q.res.reader.Revision(s.seen)))
			return false
		}
		for _, ev := range evs {
			if !s.change(ev) {
				return false
			}
		}
		buf = evs
	}
	return true
}

// change sends what the store's change ev is to this watch's selectors,
// and reports whether the stream may go on.
func (s *watchStream) change(ev store.Event) bool {
	if ev.Version <= s.seen {
		return true
	}
	s.seen = ev.Version
	cur := s.q.matches(ev.Pod)
	switch ev.Type {
	case store.Added:
		if cur {
			return s.send(watch.Added, ev.Pod, ev.Version)
		}
	case store.Modified:
		old := ev.Prev != nil && s.q.matches(ev.Prev)
		switch {
		case cur && old:
			return s.send(watch.Modified, ev.Pod, ev.Version)
		case cur:
			return s.send(watch.Added, ev.Pod, ev.Version)
		case old:
			return s.send(watch.Deleted, ev.Prev, ev.Version)
		}
	case store.Deleted:
		if cur {
			return s.send(watch.Deleted, ev.Pod, ev.Version)
		}
	}
	return true
}

// send writes an event of type t whose object is p at the store version
// version.
func (s *watchStream) send(t watch.EventType, p *store.Pod, version uint64) bool {
	var b []byte
	var err error
	if s.table != nil {
		var tr tableRow
		if tr, err = s.h.tableRowOf(s.q.res, s.fm, s.table, p, version); err == nil {
			b, err = s.tableEvent(t, s.q.res.reader.Revision(version), tr)
		}
	} else {
		b, err = s.h.event(s.q.res, s.fm, t, p, version)
	}
	if err != nil {
		s.failed = true
		s.fail(errInternal())
		return false
	}
	_, err = s.out.Write(b)
	return err == nil
}

// bookmark writes a BOOKMARK at the last revision seen.
func (s *watchStream) bookmark(end bool) bool {
	res := s.q.res
	rv := res.reader.Revision(s.seen)
	var b []byte
	var err error
	if s.table != nil {
		var tr tableRow
		if tr, err = bookmarkRow(res, s.fm, s.table, bookmarkObject(res, rv, end)); err == nil {
			b, err = s.tableEvent(watch.Bookmark, rv, tr)
		}
	} else {
		b, err = bookmark(res, s.fm, rv, end)
	}
	if err != nil {
		s.failed = true
		return false
	}
	_, err = s.out.Write(b)
	return err == nil
}

// tableEvent returns the encoding of an event of type t whose object is a
// Table of the row tr at revision rv: with the column definitions in the
// first such event of the watch, without in the others.
func (s *watchStream) tableEvent(t watch.EventType, rv string, tr tableRow) ([]byte, error) {
	noHeaders := s.table.NoHeaders || s.headed
	obj, err := encodeTable(s.q.res, s.fm, metav1.ListMeta{ResourceVersion: rv}, []tableRow{tr}, noHeaders, time.Now())
	if err != nil {
		return nil, err
	}
	s.headed = true
	return encodeEvent(s.fm.format, s.q.res, t, obj)
}

// fail writes an ERROR event carrying the Status of err, as the API server
// ends a watch it cannot serve.
func (s *watchStream) fail(err error) {
	status := statusOf(err)
	var obj bytes.Buffer
	if s.fm.object.Encode(status, &obj) != nil {
		return
	}
	b, e := encodeEvent(s.fm.format, s.q.res, watch.Error, obj.Bytes())
	if e != nil {
		return
	}
	_, _ = s.out.Write(b)
}

// statusOf returns the Status an error of the handler carries.
func statusOf(err error) *metav1.Status {
	st := apiStatus(err)
	st.Kind, st.APIVersion = "Status", "v1"
	return &st
}
