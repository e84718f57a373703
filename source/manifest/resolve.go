package manifest

import (
	"container/heap"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// resolver decides, incrementally, which pods the files provide. Of
// several pods with the same UID, or the same namespace and name, the
// first in file name (byte-wise) and document order wins; the others are
// duplicates.
//
// That rule is a greedy pass over all pods in order: a pod wins if no
// earlier winner has its UID or its namespace and name. A change of one
// file changes only the pods that share a UID or a name with a pod whose
// outcome changed, and only those after it, so the resolver keeps each
// UID's and each name's pods in order and re-decides only the pods a
// change can reach, in order, from a heap. Replacing one file of n pods
// in all costs O(log n) for pods without duplicates: a burst of N file
// events is O(N log N), where a full pass per event was O(N²).
type resolver struct {
	files  map[string][]*entry    // Each file's pods, in document order.
	byUID  map[types.UID][]*entry // Each UID's pods, in order.
	byName map[string][]*entry    // Each namespace/name's pods, in order.
	uidWin map[types.UID]*entry   // The winner of each UID.
	nsWin  map[string]*entry      // The winner of each namespace/name.
	dups   map[duplicateKey]int   // The number of duplicates of each file, UID and name.

	dirty   entryHeap                 // The pods to decide again.
	touched map[types.UID]struct{}    // The UIDs whose winner may have changed.
	dupSeen map[duplicateKey]struct{} // The duplicate keys that changed.
	steps   int                       // Pods decided so far, for tests.
}

// entry is one pod of one file.
type entry struct {
	file    string
	doc     int
	pod     *corev1.Pod
	nsName  string
	won     bool
	dup     bool // A decided loser (won is false then).
	removed bool
	queued  bool // In the dirty heap.
}

// before reports whether e comes before o in file name and document order.
func (e *entry) before(o *entry) bool {
	if c := strings.Compare(e.file, o.file); c != 0 {
		return c < 0
	}
	return e.doc < o.doc
}

func (e *entry) dupKey() duplicateKey {
	return duplicateKey{file: e.file, uid: e.pod.UID, name: e.nsName}
}

func newResolver() *resolver {
	return &resolver{
		files:   make(map[string][]*entry),
		byUID:   make(map[types.UID][]*entry),
		byName:  make(map[string][]*entry),
		uidWin:  make(map[types.UID]*entry),
		nsWin:   make(map[string]*entry),
		dups:    make(map[duplicateKey]int),
		touched: make(map[types.UID]struct{}),
		dupSeen: make(map[duplicateKey]struct{}),
	}
}

// setFile replaces the pods of the file name (none removes it). The change
// takes effect at the next settle.
func (r *resolver) setFile(name string, pods []*corev1.Pod) {
	for _, e := range r.files[name] {
		e.removed = true
		r.touched[e.pod.UID] = struct{}{}
		r.byUID[e.pod.UID] = removeEntry(r.byUID[e.pod.UID], e)
		if len(r.byUID[e.pod.UID]) == 0 {
			delete(r.byUID, e.pod.UID)
		}
		r.byName[e.nsName] = removeEntry(r.byName[e.nsName], e)
		if len(r.byName[e.nsName]) == 0 {
			delete(r.byName, e.nsName)
		}
		if e.won {
			r.release(e)
		}
		if e.dup {
			r.undup(e)
		}
	}
	delete(r.files, name)
	if len(pods) == 0 {
		return
	}
	entries := make([]*entry, len(pods))
	for i, pod := range pods {
		e := &entry{file: name, doc: i, pod: pod, nsName: pod.Namespace + "/" + pod.Name}
		entries[i] = e
		r.byUID[pod.UID] = insertEntry(r.byUID[pod.UID], e)
		r.byName[e.nsName] = insertEntry(r.byName[e.nsName], e)
		r.touched[pod.UID] = struct{}{}
		r.queue(e)
	}
	r.files[name] = entries
}

// settle decides every queued pod again, in order, and with it every pod
// whose outcome that changes. It returns the UIDs whose winner may have
// changed since the last settle and the duplicate keys that appeared or
// went away, and forgets both.
func (r *resolver) settle() (map[types.UID]struct{}, map[duplicateKey]struct{}) {
	for r.dirty.Len() > 0 {
		e := heap.Pop(&r.dirty).(*entry)
		e.queued = false
		if e.removed {
			continue
		}
		r.steps++
		r.decide(e)
	}
	touched, dupSeen := r.touched, r.dupSeen
	r.touched, r.dupSeen = make(map[types.UID]struct{}), make(map[duplicateKey]struct{})
	return touched, dupSeen
}

// decide decides e, every pod before it being decided already.
func (r *resolver) decide(e *entry) {
	uid := e.pod.UID
	blocked := func(w *entry) bool { return w != nil && w != e && w.before(e) }
	if blocked(r.uidWin[uid]) || blocked(r.nsWin[e.nsName]) {
		if e.won {
			r.release(e)
		}
		if !e.dup {
			e.dup = true
			k := e.dupKey()
			r.dups[k]++
			r.dupSeen[k] = struct{}{}
		}
		return
	}
	if e.dup {
		r.undup(e)
	}
	if e.won {
		return
	}
	e.won = true
	r.touched[uid] = struct{}{}
	// A later winner of the same UID or name loses now.
	if w := r.uidWin[uid]; w != nil && w != e {
		r.queue(w)
	}
	if w := r.nsWin[e.nsName]; w != nil && w != e {
		r.queue(w)
	}
	r.uidWin[uid] = e
	r.nsWin[e.nsName] = e
}

// release takes back what the winner e holds: the later pods of its UID and
// name may win now.
func (r *resolver) release(e *entry) {
	e.won = false
	r.touched[e.pod.UID] = struct{}{}
	if r.uidWin[e.pod.UID] == e {
		delete(r.uidWin, e.pod.UID)
	}
	if r.nsWin[e.nsName] == e {
		delete(r.nsWin, e.nsName)
	}
	for _, o := range r.byUID[e.pod.UID] {
		if e.before(o) {
			r.queue(o)
		}
	}
	for _, o := range r.byName[e.nsName] {
		if e.before(o) {
			r.queue(o)
		}
	}
}

// undup forgets that e is a duplicate.
func (r *resolver) undup(e *entry) {
	e.dup = false
	k := e.dupKey()
	if r.dups[k]--; r.dups[k] <= 0 {
		delete(r.dups, k)
	}
	r.dupSeen[k] = struct{}{}
}

func (r *resolver) queue(e *entry) {
	if !e.queued && !e.removed {
		e.queued = true
		heap.Push(&r.dirty, e)
	}
}

// duplicate returns a pod that is a duplicate of the key, and the winner
// that makes it lose, if the key has duplicates.
func (r *resolver) duplicate(k duplicateKey) (dup, winner *entry, ok bool) {
	if r.dups[k] == 0 {
		return nil, nil, false
	}
	for _, e := range r.byUID[k.uid] {
		if e.dup && e.file == k.file && e.nsName == k.name {
			if w := r.uidWin[e.pod.UID]; w != nil && w.before(e) {
				return e, w, true
			}
			return e, r.nsWin[e.nsName], true
		}
	}
	return nil, nil, false
}

// order returns the UIDs in the order of their winners.
func (r *resolver) order(uids []types.UID) []types.UID {
	return slices.SortedFunc(slices.Values(uids), func(a, b types.UID) int {
		ea, eb := r.uidWin[a], r.uidWin[b]
		if ea.before(eb) {
			return -1
		}
		if eb.before(ea) {
			return 1
		}
		return 0
	})
}

// insertEntry inserts e into the ordered list.
func insertEntry(list []*entry, e *entry) []*entry {
	i, _ := slices.BinarySearchFunc(list, e, compareEntries)
	return slices.Insert(list, i, e)
}

// removeEntry removes e from the ordered list.
func removeEntry(list []*entry, e *entry) []*entry {
	i, found := slices.BinarySearchFunc(list, e, compareEntries)
	if !found || list[i] != e {
		return list
	}
	return slices.Delete(list, i, i+1)
}

func compareEntries(a, b *entry) int {
	if c := strings.Compare(a.file, b.file); c != 0 {
		return c
	}
	return a.doc - b.doc
}

// entryHeap orders entries by file name and document.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
