package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/client/printer"
	"github.com/podsapi/podsapi/internal/retry"
)

// The bounds of the backoff between two attempts to watch again.
const (
	minWatchBackoff = 200 * time.Millisecond
	maxWatchBackoff = 30 * time.Second
)

// watchOptions are the flags of podsctl watch of its own.
type watchOptions struct {
	// once ends the watch with the first error, as podsctl did before it
	// watched again.
	once bool
}

// runWatch runs podsctl watch until ctx is done, or until the watch fails
// for good: before its first SYNCED (a missing socket, a server not synced,
// a bad selector are reported at once), on an error that watching again
// cannot mend (an invalid argument, a denied peer, another API), or, with
// --once, at the first error. After the first SYNCED it watches again when
// the watch ends (a server restart or shutdown, a dropped watcher), with
// jittered exponential backoff, resuming from the last revision it was sent
// (or that of FELL_BEHIND) so that it prints only the changes made while it
// was away; when the server cannot resume (REVISION_TOO_OLD: a restarted
// server, an exceeded history; or no revisions, as a kubelet), it watches
// from a snapshot and prints the differences from what it showed.
func runWatch(ctx context.Context, o *options, wo watchOptions, stdout, stderr io.Writer) error {
	c, err := o.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	opts := append(o.selectors(), o.mask())
	if o.wideWorkloads() {
		opts = append(opts, client.WithWorkloads())
	}
	s := &watchSession{
		c:      c,
		opts:   opts,
		p:      o.newPrinter(stdout),
		shown:  make(map[types.UID]*corev1.Pod),
		stderr: stderr,
	}
	b := retry.NewBackoff(minWatchBackoff, maxWatchBackoff)
	for {
		err := s.watch(ctx, b)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errPrint):
			return err
		case wo.once || !s.synced || permanent(err):
			return fmt.Errorf("watch: %w", err)
		}
		d := b.Next()
		from := "from a new snapshot"
		if s.revision != "" {
			from = "resuming from revision " + s.revision
		}
		fmt.Fprintf(stderr, "podsctl: watch: %s; watching again in %v, %s\n", describe(err), d.Round(time.Millisecond), from)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		s.reconnected = true
	}
}

// permanent reports whether watching again cannot mend err.
func permanent(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodePermissionDenied, connect.CodeUnauthenticated, connect.CodeUnimplemented:
		return true
	}
	return false
}

// errPrint wraps an error of printing: it ends the watch.
var errPrint = errors.New("print")

// watchSession is the state of podsctl watch across its watches.
type watchSession struct {
	c      *client.Client
	opts   []client.CallOption
	p      *printer.Printer
	stderr io.Writer

	shown       map[types.UID]*corev1.Pod // the last state printed of each pod
	synced      bool                      // whether the first SYNCED was printed
	revision    string                    // the revision to resume from, "" for none
	reconnected bool                      // whether the current watch is a later one
}

// watch runs one watch until it ends and returns the error that ended it.
func (s *watchSession) watch(ctx context.Context, b *retry.Backoff) error {
	resumed := s.revision != ""
	var w *client.Watcher
	var err error
	if resumed {
		w, err = s.c.Watch(ctx, append(s.opts, client.WithResumeFrom(s.revision))...)
		if errors.Is(err, client.ErrRevisionTooOld) {
			fmt.Fprintf(s.stderr, "podsctl: watch: cannot resume from revision %s: %s\n", s.revision, describe(err))
			s.revision, resumed = "", false
		}
	}
	if !resumed {
		w, err = s.c.Watch(ctx, s.opts...)
	}
	if err != nil {
		return err
	}
	defer w.Close()
	if s.reconnected {
		if resumed {
			fmt.Fprintf(s.stderr, "podsctl: watch: resumed from revision %s\n", s.revision)
		} else {
			fmt.Fprintln(s.stderr, "podsctl: watch: resynced: watching from a new snapshot")
		}
		s.reconnected = false
	}
	// A snapshot is printed at its Synced event, sorted whatever the
	// server's order (a kubelet's is not podsapi's), with what changed
	// before the marker folded in (a kubelet may send such changes).
	var snapshot map[types.UID]*corev1.Pod
	if !resumed {
		snapshot = make(map[types.UID]*corev1.Pod)
	}
	for {
		ev, err := w.Next()
		if err != nil {
			if rev := client.ResumeRevision(err); rev != "" {
				s.revision = rev
			}
			return err
		}
		switch {
		case ev.Type == client.Synced:
			b.Reset()
			s.revision = ev.Revision
			if snapshot != nil {
				if err := s.printSnapshot(snapshot); err != nil {
					return err
				}
				snapshot = nil
			}
			resumed = false
		case snapshot != nil && ev.Type == client.Deleted:
			delete(snapshot, ev.Pod.UID)
		case snapshot != nil && ev.Pod != nil:
			snapshot[ev.Pod.UID] = ev.Pod
		default:
			// A live event, or a change since the revision resumed from.
			// Until its Synced, a resumed watch may repeat a change already
			// printed (when an earlier resume was itself cut short): a
			// change that changes nothing printed is skipped.
			if err := s.printChange(ev, resumed); err != nil {
				return err
			}
			if !resumed && ev.Revision != "" {
				s.revision = ev.Revision
			}
		}
	}
}

// printSnapshot prints a watch's snapshot: the first as ADDED events and
// SYNCED; a later one (after a resync) as the differences from what was
// printed: DELETED for the pods gone, then MODIFIED and ADDED for the pods
// changed and new, sorted.
func (s *watchSession) printSnapshot(snapshot map[types.UID]*corev1.Pod) error {
	pods := slices.Collect(maps.Values(snapshot))
	sortPods(pods)
	var events []client.Event
	if s.synced {
		var gone []*corev1.Pod
		for uid, pod := range s.shown {
			if _, ok := snapshot[uid]; !ok {
				gone = append(gone, pod)
			}
		}
		sortPods(gone)
		for _, pod := range gone {
			events = append(events, client.Event{Type: client.Deleted, Pod: pod})
		}
	}
	for _, pod := range pods {
		switch old, ok := s.shown[pod.UID]; {
		case !ok:
			events = append(events, client.Event{Type: client.Added, Pod: pod})
		case changed(old, pod):
			events = append(events, client.Event{Type: client.Modified, Pod: pod})
		}
	}
	if !s.synced {
		events = append(events, client.Event{Type: client.Synced})
		s.synced = true
	}
	s.shown = snapshot
	for _, ev := range events {
		if err := s.p.PrintEvent(ev); err != nil {
			return fmt.Errorf("%w: %w", errPrint, err)
		}
	}
	return nil
}

// printChange prints a live event. A DELETED event that carries only the
// pod's identity, as a kubelet's do, is printed with the last state shown;
// one of a pod never shown is skipped. With replay, an ADDED or MODIFIED
// that changes nothing shown is skipped too.
func (s *watchSession) printChange(ev client.Event, replay bool) error {
	if ev.Pod == nil {
		return nil
	}
	uid := ev.Pod.UID
	last, was := s.shown[uid]
	switch {
	case ev.Type == client.Deleted && !was:
		return nil
	case ev.Type == client.Deleted:
		delete(s.shown, uid)
		if identityOnly(ev.Pod) {
			ev.Pod = last
		}
	case replay && was && !changed(last, ev.Pod):
		return nil
	default:
		s.shown[uid] = ev.Pod
		if replay && !was {
			ev.Type = client.Added
		} else if replay {
			ev.Type = client.Modified
		}
	}
	if err := s.p.PrintEvent(ev); err != nil {
		return fmt.Errorf("%w: %w", errPrint, err)
	}
	return nil
}

// changed reports whether a pod changed from old to new: when both have a
// resourceVersion and they differ, otherwise when they are not
// semantically equal (as client.Cache decides).
func changed(old, new *corev1.Pod) bool {
	if old.ResourceVersion != "" && new.ResourceVersion != "" && old.ResourceVersion != new.ResourceVersion {
		return true
	}
	return !equality.Semantic.DeepEqual(old, new)
}
