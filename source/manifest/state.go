package manifest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/source/internal/sourcelog"
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
	// warn writes the warnings about the files' faults, at most one line
	// per reason and message every sourcelog.Interval: a directory of
	// 20,000 bad files, or a file rewritten in a loop, writes a few lines.
	warn    *sourcelog.Warner
	metrics *metrics
	sink    Sink

	files      map[string]*fileState
	res        *resolver // Which of the files' pods win.
	published  map[types.UID]placement
	duplicates map[duplicateKey]struct{} // The duplicates reported.
	dirGone    bool                      // The directory was found missing by the last rescan.
	dirErr     string                    // The last error listing the directory, if any.
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
		warn:       sourcelog.New(s.log),
		metrics:    s.metrics,
		sink:       sink,
		files:      make(map[string]*fileState),
		res:        newResolver(),
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
			st.warn.Warn(reasonRead, "cannot list manifest directory: keeping its pods", "path", st.dir, "error", err)
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
	st.res.setFile(name, nil)
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
			st.warn.Warn(reason, "cannot read manifest file: keeping its last good pods",
				"path", path, "error", err, "kept_pods", len(f.pods))
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
		st.warn.Warn(reason, msg, "path", path, "error", err, "kept_pods", len(f.pods))
		st.metrics.countError(reason)
		return false
	}
	f.pods = pods
	st.res.setFile(name, pods)
	return true
}

// publish settles the resolver and sends the sink what changed: first the
// Deletes, in UID order, then the Upserts of new and changed pods, in file
// and document order. Duplicates that appeared are reported.
func (st *state) publish() {
	touched, dupSeen := st.res.settle()
	var deletes, upserts []types.UID
	for uid := range touched {
		if _, ok := st.res.uidWin[uid]; ok {
			upserts = append(upserts, uid)
		} else if _, ok := st.published[uid]; ok {
			deletes = append(deletes, uid)
		}
	}
	for _, uid := range slices.Sorted(slices.Values(deletes)) {
		old := st.published[uid]
		delete(st.published, uid)
		st.sink.Delete(uid)
		st.log.Log(context.Background(), st.changeLevel, "pod removed", "namespace", old.pod.Namespace, "name", old.pod.Name, "uid", uid,
			"path", filepath.Join(st.dir, old.file))
	}
	for _, uid := range st.res.order(upserts) {
		w := st.res.uidWin[uid]
		p := placement{file: w.file, pod: w.pod}
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
	st.reportDuplicates(dupSeen)
}

// reportDuplicates logs and counts each duplicate that appeared, once for
// as long as it lasts.
func (st *state) reportDuplicates(keys map[duplicateKey]struct{}) {
	for _, key := range slices.SortedFunc(maps.Keys(keys), compareDuplicateKeys) {
		dup, winner, ok := st.res.duplicate(key)
		if !ok {
			delete(st.duplicates, key)
			continue
		}
		if _, reported := st.duplicates[key]; reported {
			continue
		}
		st.duplicates[key] = struct{}{}
		pod := dup.pod
		st.warn.Warn(reasonDuplicate, "skipping duplicate pod: an earlier manifest provides the same UID or namespace and name",
			"path", filepath.Join(st.dir, key.file),
			"namespace", pod.Namespace, "name", pod.Name, "uid", pod.UID,
			"winner_path", filepath.Join(st.dir, winner.file), "winner_uid", winner.pod.UID)
		st.metrics.countError(reasonDuplicate)
	}
}

func compareDuplicateKeys(a, b duplicateKey) int {
	return cmp.Or(strings.Compare(a.file, b.file), strings.Compare(string(a.uid), string(b.uid)), strings.Compare(a.name, b.name))
}
