package manifest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Source reads the static pod manifests of one directory and follows their
// changes. Make one with New and start it with Run.
type Source struct {
	dir      string
	nodeName string
	resync   time.Duration
	maxBytes int64
	log      *slog.Logger
	metrics  *metrics
}

// New returns a Source for the manifest directory dir (cleaned with
// filepath.Clean) on the node nodeName, configured by opts. It registers
// the Source's metrics if WithRegisterer is given, and panics if that
// registerer holds a different metric of the same name.
func New(dir, nodeName string, opts ...Option) *Source {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	s := &Source{
		dir:      filepath.Clean(dir),
		nodeName: nodeName,
		resync:   o.resync,
		maxBytes: o.maxBytes,
		metrics:  newMetrics(o.Registerer),
	}
	s.log = o.Logger.With("source", s.Name())
	return s
}

// Name returns "manifest:" followed by the cleaned directory, to tell the
// Source apart in logs.
func (s *Source) Name() string {
	return "manifest:" + s.dir
}

// Run reads every manifest in the directory, Upserts their pods into sink,
// calls sink.MarkSynced, and then follows the directory's changes, sending
// sink the differences, until ctx is cancelled. It calls sink from its own
// goroutine only and assumes sink starts without any of this Source's pods.
//
// Run returns nil when ctx is cancelled. It returns an error, before
// MarkSynced, if the node name is empty or the directory is missing, not a
// directory, unreadable or cannot be watched; after MarkSynced it returns an
// error only if the file system watcher stops by itself. Problems with
// single files are logged and counted, never returned.
//
// Each call of Run has its own state, so Run may be called again after it
// returned, or for several sinks at once, as long as each sink starts
// without this Source's pods.
func (s *Source) Run(ctx context.Context, sink Sink) error {
	if s.nodeName == "" {
		return errors.New("manifest: node name is empty")
	}
	info, err := os.Stat(s.dir)
	if err != nil {
		return fmt.Errorf("manifest: manifest directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("manifest: manifest directory %q is not a directory", s.dir)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("manifest: start watching %q: %w", s.dir, err)
	}
	defer func() { _ = w.Close() }()
	// Watch before the first read, so that no change after it is missed.
	if err := w.Add(s.dir); err != nil {
		return fmt.Errorf("manifest: watch %q: %w", s.dir, err)
	}
	// Watch the parent too, to see the directory itself removed, renamed or
	// created again: the kernel drops the watch of a removed directory, and
	// the parent's events are the only news of its return.
	s.watchParent(w, false)
	names, err := listManifests(s.dir)
	if err != nil {
		return fmt.Errorf("manifest: read manifest directory: %w", err)
	}

	st := newState(s, sink)
	st.changeLevel = slog.LevelDebug
	st.sync(names)
	st.changeLevel = slog.LevelInfo
	sink.MarkSynced()
	s.log.Info("manifest directory synced", "path", s.dir, "files", len(st.files), "pods", len(st.published),
		"resync_interval", s.resync)

	var tick <-chan time.Time
	if s.resync > 0 {
		t := time.NewTicker(s.resync)
		defer t.Stop()
		tick = t.C
	}
	watching := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("manifest: watcher of %q stopped", s.dir)
			}
			b := s.collect(w, ev)
			if !b.dir {
				st.update(b.names)
				break
			}
			if b.dirReplaced {
				// The kernel dropped the watch with the old directory;
				// watch the new one, if it is there yet.
				watching = s.rewatch(w, watching)
			}
			st.rescan()
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("manifest: watcher of %q stopped", s.dir)
			}
			s.log.Warn("file system watch error: rescanning", "path", s.dir, "error", err)
			st.rescan()
		case <-tick:
			if !watching {
				s.watchParent(w, true)
				watching = s.rewatch(w, false)
			}
			st.rescan()
		}
	}
}

// rewatch watches the directory again after it was removed, renamed or
// created, or could not be watched, and reports whether that worked.
// watching says whether it was watched until now: a failure is logged
// only when it was, a success only when it was not.
func (s *Source) rewatch(w *fsnotify.Watcher, watching bool) bool {
	_ = w.Remove(s.dir) // Drop any stale watch; it usually is gone already.
	if err := w.Add(s.dir); err != nil {
		if watching {
			s.log.Warn("cannot watch manifest directory: watching for its return", "path", s.dir, "error", err,
				"resync_interval", s.resync)
		}
		return false
	}
	if !watching {
		s.log.Info("watching manifest directory again", "path", s.dir)
	}
	return true
}

// watchParent watches the parent of the directory, for the events of the
// directory itself. Without it a recreated directory is noticed at the next
// resync only; that is logged, unless retry says this is a periodic retry.
func (s *Source) watchParent(w *fsnotify.Watcher, retry bool) {
	parent := filepath.Dir(s.dir)
	if parent == s.dir {
		return // The root has no parent.
	}
	if err := w.Add(parent); err != nil && !retry {
		s.log.Warn("cannot watch the parent of the manifest directory: a recreated directory is noticed at the next resync only",
			"path", parent, "error", err, "resync_interval", s.resync)
	}
}

// batch is the file system events that arrived together, coalesced.
type batch struct {
	names       []string // Manifest files that changed, each once.
	dir         bool     // The directory itself changed: rescan all of it.
	dirReplaced bool     // The directory was removed, renamed or created: watch it again.
}

// collect coalesces ev and the events already waiting behind it.
func (s *Source) collect(w *fsnotify.Watcher, ev fsnotify.Event) batch {
	var b batch
	seen := make(map[string]bool)
	add := func(ev fsnotify.Event) {
		switch {
		case filepath.Clean(ev.Name) == s.dir:
			b.dir = true
			b.dirReplaced = b.dirReplaced || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Create)
		case filepath.Dir(ev.Name) == s.dir:
			name := filepath.Base(ev.Name)
			if isManifestName(name) && !seen[name] {
				seen[name] = true
				b.names = append(b.names, name)
			}
		}
	}
	add(ev)
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return b
			}
			add(ev)
		default:
			return b
		}
	}
}
