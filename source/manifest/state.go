package manifest

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// fileState is what a Run knows about one manifest file.
type fileState struct {
	// sum is the SHA-256 of the content last decoded, good or bad; decoded
	// reports whether sum is set. Content with the same sum is not decoded
	// (nor logged) again.
	sum     [sha256.Size]byte
	decoded bool
	// readErr is the text of the last read error, so that a lasting read
	// error is logged and counted once.
	readErr string
	// empty reports whether the file was last read with zero bytes.
	empty bool
	// pods are the pods of the last content that decoded, in document order.
	// They stay while the file is unreadable or does not decode. The source
	// never mutates them: the sink gets deep copies.
	pods []*corev1.Pod
}

// placement is a pod and the file that provides it.
type placement struct {
	file string
	pod  *corev1.Pod
}

// duplicateKey identifies a rejected duplicate, so that a lasting one is
// logged and counted once.
type duplicateKey struct {
	file string
	uid  types.UID
	name string // namespace/name
}

// state is the known state of one Run: the manifest files, the pods the
// sink has, and which lasting problems were already reported. It is used by
// the Run goroutine only.
type state struct {
	dir      string
	nodeName string
	maxBytes int64 // The size cap of a file; zero for none.
	log      *slog.Logger
	metrics  *metrics
	sink     Sink

	files      map[string]*fileState
	published  map[types.UID]placement
	duplicates map[duplicateKey]struct{}
	dirGone    bool   // The directory was found missing by the last rescan.
	dirErr     string // The last error listing the directory, if any.
	// changeLevel is the level of the log line of each pod change: debug
	// for the initial read, whose summary is logged once, info after it.
	changeLevel slog.Level
}

func newState(s *Source, sink Sink) *state {
	return &state{
		dir:        s.dir,
		nodeName:   s.nodeName,
		maxBytes:   s.maxBytes,
		log:        s.log,
		metrics:    s.metrics,
		sink:       sink,
		files:      make(map[string]*fileState),
		published:  make(map[types.UID]placement),
		duplicates: make(map[duplicateKey]struct{}),
	}
}

// rescan lists the directory and brings the sink up to date with every
// manifest file in it. A directory that does not exist, or was replaced by
// something that is not a directory, counts as empty; a directory that
// cannot be listed for another reason changes nothing.
func (st *state) rescan() {
	names, err := listManifests(st.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		if !st.dirGone {
			st.log.Warn("manifest directory is gone: serving no pods from it until it is back", "path", st.dir)
		}
		st.dirGone, st.dirErr = true, ""
		names = nil
	case err != nil:
		if msg := err.Error(); msg != st.dirErr {
			st.log.Warn("cannot list manifest directory: keeping its pods", "path", st.dir, "reason", reasonRead, "error", err)
			st.metrics.countError(reasonRead)
			st.dirErr = msg
		}
		return
	default:
		if st.dirGone {
			st.log.Info("manifest directory is back", "path", st.dir)
		}
		st.dirGone, st.dirErr = false, ""
	}
	st.sync(names)
}

// sync brings the sink up to date with the manifest files names, the
// complete sorted listing of the directory.
func (st *state) sync(names []string) {
	changed := false
	for name := range st.files {
		if _, found := slices.BinarySearch(names, name); !found {
			changed = st.forget(name) || changed
		}
	}
	for _, name := range names {
		changed = st.refresh(name) || changed
	}
	if changed {
		st.publish()
	}
}

// update brings the sink up to date with the files names (base names, in
// any order) after file system events on them.
func (st *state) update(names []string) {
	slices.Sort(names)
	changed := false
	for _, name := range names {
		changed = st.refresh(name) || changed
	}
	if changed {
		st.publish()
	}
}

// forget drops the file name and so its pods. It reports whether the file
// was known.
func (st *state) forget(name string) bool {
	if _, ok := st.files[name]; !ok {
		return false
	}
	delete(st.files, name)
	return true
}

// refresh reads the file name again and decodes it if its content changed.
// It reports whether the pods the file provides may have changed.
func (st *state) refresh(name string) bool {
	path := filepath.Join(st.dir, name)
	if !isManifestName(name) {
		return st.forget(name)
	}
	data, err := readManifest(path, st.maxBytes)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errDirectory) {
		return st.forget(name)
	}
	f := st.files[name]
	if f == nil {
		f = &fileState{}
		st.files[name] = f
	}
	if err != nil {
		if msg := err.Error(); msg != f.readErr {
			reason := reasonRead
			if r, ok := errors.AsType[*rejection](err); ok {
				reason = r.reason
			}
			st.log.Warn("cannot read manifest file: keeping its last good pods",
				"path", path, "reason", reason, "error", err, "kept_pods", len(f.pods))
			st.metrics.countError(reason)
			f.readErr = msg
		}
		return false
	}
	f.readErr = ""
	if len(data) == 0 {
		// Most likely truncated by a writer that is about to write the new
		// content: wait for that.
		if !f.empty {
			st.log.Debug("manifest file is empty: keeping its last good pods", "path", path, "kept_pods", len(f.pods))
			f.empty = true
		}
		return false
	}
	f.empty = false
	sum := sha256.Sum256(data)
	if f.decoded && sum == f.sum {
		return false
	}
	f.sum, f.decoded = sum, true
	pods, err := decodeFile(name, data, st.nodeName, st.maxBytes)
	if err != nil {
		reason := reasonOf(err)
		msg := "skipping manifest file"
		if len(f.pods) > 0 {
			msg = "skipping manifest file: keeping its last good pods"
		}
		st.log.Warn(msg, "path", path, "reason", reason, "error", err, "kept_pods", len(f.pods))
		st.metrics.countError(reason)
		return false
	}
	f.pods = pods
	return true
}

// publish sends the sink the difference between the pods the files provide
// and the pods the sink has: first the Deletes, in UID order, then the
// Upserts of new and changed pods, in file and document order.
func (st *state) publish() {
	want, order := st.resolve()
	for _, uid := range slices.Sorted(maps.Keys(st.published)) {
		if _, ok := want[uid]; ok {
			continue
		}
		old := st.published[uid]
		delete(st.published, uid)
		st.sink.Delete(uid)
		st.log.Log(context.Background(), st.changeLevel, "pod removed", "namespace", old.pod.Namespace, "name", old.pod.Name, "uid", uid,
			"path", filepath.Join(st.dir, old.file))
	}
	for _, uid := range order {
		p := want[uid]
		old, had := st.published[uid]
		st.published[uid] = p
		if had && (old.pod == p.pod || equality.Semantic.DeepEqual(old.pod, p.pod)) {
			continue
		}
		st.sink.Upsert(p.pod.DeepCopy())
		msg := "pod added"
		if had {
			msg = "pod updated"
		}
		st.log.Log(context.Background(), st.changeLevel, msg, "namespace", p.pod.Namespace, "name", p.pod.Name, "uid", uid,
			"path", filepath.Join(st.dir, p.file))
	}
}

// resolve returns the pods the files provide, keyed by UID, and their UIDs
// in file name and document order. Of several pods with the same UID, or
// the same namespace and name, the first in that order wins; the others are
// duplicates, reported once for as long as they last.
func (st *state) resolve() (map[types.UID]placement, []types.UID) {
	want := make(map[types.UID]placement)
	var order []types.UID
	byName := make(map[string]placement)
	duplicates := make(map[duplicateKey]struct{})
	for _, name := range slices.Sorted(maps.Keys(st.files)) {
		for _, pod := range st.files[name].pods {
			nsName := pod.Namespace + "/" + pod.Name
			winner, dup := want[pod.UID]
			if !dup {
				winner, dup = byName[nsName]
			}
			if !dup {
				p := placement{file: name, pod: pod}
				want[pod.UID] = p
				byName[nsName] = p
				order = append(order, pod.UID)
				continue
			}
			key := duplicateKey{file: name, uid: pod.UID, name: nsName}
			duplicates[key] = struct{}{}
			if _, reported := st.duplicates[key]; !reported {
				st.log.Warn("skipping duplicate pod: an earlier manifest provides the same UID or namespace and name",
					"path", filepath.Join(st.dir, name), "reason", reasonDuplicate,
					"namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID,
					"winner_path", filepath.Join(st.dir, winner.file), "winner_uid", winner.pod.UID)
				st.metrics.countError(reasonDuplicate)
			}
		}
	}
	st.duplicates = duplicates
	return want, order
}
