package store

import (
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/budget"
)

// DefaultRuntimeBytes is the default bound of the runtime facts the store
// keeps (WithRuntimeFacts): about 40,000 containers and their pods.
const DefaultRuntimeBytes = 16 << 20

// runtimeOverhead is what one pod or container of the runtime costs beside
// its strings: the entry, its index entries and map slots, rounded up.
const runtimeOverhead = 384

// RuntimePod is what the container runtime tells of a pod's sandbox: who
// the pod is, and its IPs, before the pod source reports it.
type RuntimePod struct {
	// SandboxID is the runtime's ID of the pod's sandbox.
	SandboxID string
	// UID, Namespace and Name are the pod's metadata.uid, namespace and
	// name, as the kubelet gave them to the runtime.
	UID       types.UID
	Namespace string
	Name      string
	// IPs are the IPs of the pod's network, none for a pod of the host
	// network.
	IPs []netip.Addr
	// Cgroup is the cgroup of the sandbox's own process as
	// /proc/PID/cgroup shows it, or "".
	Cgroup string
}

// RuntimeContainer is what the container runtime tells of a container.
type RuntimeContainer struct {
	// ID is the runtime's ID of the container, without "<runtime>://".
	ID string
	// SandboxID is the ID of the sandbox of the container's pod.
	SandboxID string
	// Name is the container's name in the pod's spec.
	Name string
	// PID is the PID of the container's first process in the runtime's PID
	// namespace, 0 before it starts.
	PID uint32
	// Cgroup is the container's cgroup as /proc/PID/cgroup shows it (the
	// runtime's notation translated), or "".
	Cgroup string
}

// WithRuntimeFacts sets the bound of the bytes of the runtime facts
// (PutRuntimePod, PutRuntimeContainer) the store keeps, those of removed
// containers and pods included, as counted by their strings plus 384
// bytes each. The store refuses facts beyond it (RuntimeRefused), dropping
// the oldest removed ones first. The default is DefaultRuntimeBytes, which
// 0 keeps; a negative value keeps none. The facts are also counted against
// the store's memory budget (WithBudget), kind budget.Runtime.
func WithRuntimeFacts(bytes int64) Option {
	return func(s *Store) { s.rt.maxBytes = pick(bytes, DefaultRuntimeBytes) }
}

// runtimeFacts are the pods and containers the runtime told of, live and
// removed (kept for the retention of the deleted pods), and their indexes.
// The store's mu guards them.
type runtimeFacts struct {
	maxBytes int64
	bytes    int64
	refused  uint64

	pods       map[string]*rtPod // by sandbox ID
	byUID      map[types.UID]*rtPod
	containers map[string]*rtContainer // by container ID
	ids        []string                // the container IDs, sorted
	ips        map[netip.Addr][]*rtPod
	cgroups    map[string][]cgroupRef // by the last component of the path
	pids       map[uint32]*rtContainer

	// gone are the removed pods and containers, oldest removal first.
	gone []goneRef
	// reported is told, for each container the runtime told of first,
	// how long after the pod source reported it (ObserveReports).
	reported func(time.Duration)
}

// rtPod is a pod of the runtime.
type rtPod struct {
	RuntimePod
	size    int64
	removal removal
}

// rtContainer is a container of the runtime.
type rtContainer struct {
	RuntimeContainer
	size int64
	// seen is when the store learnt of the container; reported says the
	// pod source has reported it since.
	seen     time.Time
	reported bool
	removal  removal
}

// removal says whether and when a runtime fact was removed.
type removal struct {
	removed bool
	at      time.Time
	// version is the store version at the removal, to order deletions.
	version uint64
}

// goneRef is a removed pod or container in the queue of removals.
type goneRef struct {
	pod *rtPod
	c   *rtContainer
	at  time.Time
}

// cgroupRef is the entry of a cgroup path.
type cgroupRef struct {
	path string
	pod  *rtPod
	c    *rtContainer
}

func newRuntimeFacts() runtimeFacts {
	return runtimeFacts{
		maxBytes:   DefaultRuntimeBytes,
		pods:       make(map[string]*rtPod),
		byUID:      make(map[types.UID]*rtPod),
		containers: make(map[string]*rtContainer),
		ips:        make(map[netip.Addr][]*rtPod),
		cgroups:    make(map[string][]cgroupRef),
		pids:       make(map[uint32]*rtContainer),
	}
}

func (p *RuntimePod) size() int64 {
	return runtimeOverhead + int64(len(p.SandboxID)+len(p.UID)+len(p.Namespace)+len(p.Name)+2*len(p.Cgroup)+32*len(p.IPs))
}

func (c *RuntimeContainer) size() int64 {
	return runtimeOverhead + int64(2*len(c.ID)+len(c.SandboxID)+len(c.Name)+2*len(c.Cgroup))
}

// ObserveReports has f told, for each container the runtime told of before
// the pod source reported its ID, the time between the two. f is called
// with the store locked: it must be quick (a histogram's Observe). Call it
// before the store is used.
func (s *Store) ObserveReports(f func(time.Duration)) { s.rt.reported = f }

// RuntimeLen returns the number of pods and containers of the runtime the
// store keeps (removed ones included) and the bytes they count.
func (s *Store) RuntimeLen() (pods, containers int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireRuntime()
	return len(s.rt.pods), len(s.rt.containers), s.rt.bytes
}

// RuntimeRefused returns how many runtime facts the store refused for
// being over its bound or the memory budget.
func (s *Store) RuntimeRefused() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rt.refused
}

// PutRuntimePod keeps or updates what the runtime tells of a pod, and
// reports false when the facts do not fit in their bound.
func (s *Store) PutRuntimePod(p RuntimePod) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putRuntimePod(p)
}

// PutRuntimeContainer keeps or updates what the runtime tells of a
// container, and reports false when the facts do not fit in their bound.
func (s *Store) PutRuntimeContainer(c RuntimeContainer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putRuntimeContainer(c)
}

// RemoveRuntimeContainer marks the container of id removed: it stays
// findable as deleted for the retention of the deleted pods.
func (s *Store) RemoveRuntimeContainer(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.rt.containers[id]; c != nil {
		s.removeRuntime(nil, c)
	}
}

// RemoveRuntimePod marks the pod of the sandbox id and its containers
// removed.
func (s *Store) RemoveRuntimePod(sandboxID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.rt.pods[sandboxID]
	if p == nil {
		return
	}
	for _, c := range s.rt.containers {
		if c.SandboxID == sandboxID {
			s.removeRuntime(nil, c)
		}
	}
	s.removeRuntime(p, nil)
}

// SyncRuntime replaces what the runtime told with its full state, after a
// (re)connection: pods and containers it no longer lists are removed. It
// returns the number of facts refused for their bound.
func (s *Store) SyncRuntime(pods []RuntimePod, containers []RuntimeContainer) (refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	listed := make(map[string]bool, len(pods)+len(containers))
	for _, p := range pods {
		listed[p.SandboxID] = true
	}
	for _, c := range containers {
		listed[c.ID] = true
	}
	for id, c := range s.rt.containers {
		if !listed[id] && !c.removal.removed {
			s.removeRuntime(nil, c)
		}
	}
	for id, p := range s.rt.pods {
		if !listed[id] && !p.removal.removed {
			s.removeRuntime(p, nil)
		}
	}
	for _, p := range pods {
		if !s.putRuntimePod(p) {
			refused++
		}
	}
	for _, c := range containers {
		if !s.putRuntimeContainer(c) {
			refused++
		}
	}
	return refused
}

// putRuntimePod is PutRuntimePod. s.mu is held.
func (s *Store) putRuntimePod(p RuntimePod) bool {
	rt := &s.rt
	prev := rt.pods[p.SandboxID]
	if prev != nil && !prev.removal.removed && prev.UID == p.UID && slices.Equal(prev.IPs, p.IPs) &&
		prev.Cgroup == p.Cgroup && prev.Name == p.Name && prev.Namespace == p.Namespace {
		return true
	}
	if !s.reserveRuntime(p.size(), prev.sizeOrZero()) {
		return false
	}
	if prev != nil {
		s.unindexRuntimePod(prev)
	}
	e := &rtPod{RuntimePod: p, size: p.size()}
	rt.pods[p.SandboxID] = e
	rt.byUID[p.UID] = e
	for _, ip := range p.IPs {
		rt.ips[ip] = append(rt.ips[ip], e)
	}
	if p.Cgroup != "" {
		leaf := path.Base(p.Cgroup)
		rt.cgroups[leaf] = append(rt.cgroups[leaf], cgroupRef{path: p.Cgroup, pod: e})
	}
	s.signalChange()
	return true
}

// putRuntimeContainer is PutRuntimeContainer. s.mu is held.
func (s *Store) putRuntimeContainer(c RuntimeContainer) bool {
	rt := &s.rt
	prev := rt.containers[c.ID]
	if prev != nil && !prev.removal.removed && prev.RuntimeContainer == c {
		return true
	}
	if !s.reserveRuntime(c.size(), prev.sizeOrZero()) {
		return false
	}
	e := &rtContainer{RuntimeContainer: c, size: c.size(), seen: time.Now()}
	if prev != nil {
		e.seen, e.reported = prev.seen, prev.reported
		s.unindexRuntimeContainer(prev)
	} else {
		i, _ := slices.BinarySearch(rt.ids, c.ID)
		rt.ids = slices.Insert(rt.ids, i, c.ID)
		// A container the pod source reported first has no delay to
		// tell.
		e.reported = len(s.index.containers[c.ID]) > 0
	}
	rt.containers[c.ID] = e
	if c.PID > 0 {
		rt.pids[c.PID] = e
	}
	if c.Cgroup != "" {
		leaf := path.Base(c.Cgroup)
		rt.cgroups[leaf] = append(rt.cgroups[leaf], cgroupRef{path: c.Cgroup, c: e})
	}
	s.signalChange()
	return true
}

func (p *rtPod) sizeOrZero() int64 {
	if p == nil {
		return 0
	}
	return p.size
}

func (c *rtContainer) sizeOrZero() int64 {
	if c == nil {
		return 0
	}
	return c.size
}

// reserveRuntime counts size bytes in place of prev's, dropping the oldest
// removed facts when they do not fit, and reports false (counting the
// refusal) when they still do not. s.mu is held.
func (s *Store) reserveRuntime(size, prev int64) bool {
	rt := &s.rt
	s.expireRuntime()
	for rt.bytes-prev+size > rt.maxBytes && s.dropOldestGone() {
	}
	if rt.bytes-prev+size > rt.maxBytes || !s.budget.Reserve(budget.Runtime, size) {
		rt.refused++
		return false
	}
	s.budget.Release(budget.Runtime, prev)
	rt.bytes += size - prev
	return true
}

// removeRuntime marks the pod p or the container c removed. s.mu is held.
func (s *Store) removeRuntime(p *rtPod, c *rtContainer) {
	r := removal{removed: true, at: time.Now(), version: s.version}
	switch {
	case c != nil && !c.removal.removed:
		c.removal = r
		if s.rt.pids[c.PID] == c {
			// The PID is the container's no more: the kernel may give it
			// to another process.
			delete(s.rt.pids, c.PID)
		}
	case p != nil && !p.removal.removed:
		p.removal = r
	default:
		return
	}
	s.signalChange()
	if s.tombs.retention == 0 {
		s.forgetRuntime(p, c)
		return
	}
	s.rt.gone = append(s.rt.gone, goneRef{pod: p, c: c, at: r.at})
}

// expireRuntime forgets the facts removed longer than the retention of
// the deleted pods ago. s.mu is held.
func (s *Store) expireRuntime() {
	now := time.Now()
	for len(s.rt.gone) > 0 && now.Sub(s.rt.gone[0].at) >= s.tombs.retention {
		s.dropOldestGone()
	}
}

// dropOldestGone forgets the oldest removed fact still kept, and reports
// false when there is none. s.mu is held.
func (s *Store) dropOldestGone() bool {
	rt := &s.rt
	for len(rt.gone) > 0 {
		g := rt.gone[0]
		rt.gone[0] = goneRef{}
		rt.gone = rt.gone[1:]
		// An entry put again, or replaced, since is not gone.
		if g.c != nil && rt.containers[g.c.ID] == g.c && g.c.removal.removed && g.c.removal.at.Equal(g.at) ||
			g.pod != nil && rt.pods[g.pod.SandboxID] == g.pod && g.pod.removal.removed && g.pod.removal.at.Equal(g.at) {
			s.forgetRuntime(g.pod, g.c)
			return true
		}
	}
	return false
}

// forgetRuntime drops the pod p or the container c. s.mu is held.
func (s *Store) forgetRuntime(p *rtPod, c *rtContainer) {
	rt := &s.rt
	var size int64
	if c != nil {
		size = c.size
		s.unindexRuntimeContainer(c)
		delete(rt.containers, c.ID)
		if i, ok := slices.BinarySearch(rt.ids, c.ID); ok {
			rt.ids = slices.Delete(rt.ids, i, i+1)
		}
	} else {
		size = p.size
		s.unindexRuntimePod(p)
		delete(rt.pods, p.SandboxID)
	}
	rt.bytes -= size
	s.budget.Release(budget.Runtime, size)
}

func (s *Store) unindexRuntimePod(p *rtPod) {
	rt := &s.rt
	if rt.byUID[p.UID] == p {
		delete(rt.byUID, p.UID)
	}
	for _, ip := range p.IPs {
		if l := slices.DeleteFunc(rt.ips[ip], func(e *rtPod) bool { return e == p }); len(l) > 0 {
			rt.ips[ip] = l
		} else {
			delete(rt.ips, ip)
		}
	}
	s.unindexCgroup(p.Cgroup, func(r cgroupRef) bool { return r.pod == p })
}

func (s *Store) unindexRuntimeContainer(c *rtContainer) {
	rt := &s.rt
	if rt.pids[c.PID] == c {
		delete(rt.pids, c.PID)
	}
	s.unindexCgroup(c.Cgroup, func(r cgroupRef) bool { return r.c == c })
}

func (s *Store) unindexCgroup(cgroup string, same func(cgroupRef) bool) {
	if cgroup == "" {
		return
	}
	leaf := path.Base(cgroup)
	if l := slices.DeleteFunc(s.rt.cgroups[leaf], same); len(l) > 0 {
		s.rt.cgroups[leaf] = l
	} else {
		delete(s.rt.cgroups, leaf)
	}
}

// reportContainers tells the delay of the containers of keys the runtime
// told of before the pod source. s.mu is held.
func (s *Store) reportContainers(keys podKeys) {
	for _, k := range keys.containers {
		c := s.rt.containers[k.id]
		if c == nil || c.reported {
			continue
		}
		c.reported = true
		if s.rt.reported != nil {
			s.rt.reported(time.Since(c.seen))
		}
	}
}

// resolveRuntime returns the match of the runtime's pod p and container
// name (the container c, or nil for the sandbox): the pod source's pod of
// the same UID when it has one, live or deleted, else what the runtime
// knows. It reports false for a deleted one that deleted leaves out.
// s.mu is held.
func (s *Store) resolveRuntime(p *rtPod, c *rtContainer, deleted bool) (Match, bool) {
	name := ""
	gone := p.removal
	if c != nil {
		name = c.Name
		if c.removal.removed {
			gone = c.removal
		}
	}
	if live := s.pods[p.UID]; live != nil {
		if c != nil {
			if n := containerName(live, c.ID); n != "" {
				name = n
			}
		}
		return Match{Pod: live, Container: name, HostNetwork: live.fields.HostNetwork()}, true
	}
	if t := s.tombs.byUID[p.UID]; t != nil {
		if !deleted {
			return Match{}, false
		}
		return t.match(name), true
	}
	if gone.removed && !deleted {
		return Match{}, false
	}
	rp := p.RuntimePod
	return Match{Runtime: &rp, Container: name, Deleted: gone.removed, deletion: gone.version}, true
}

// appendMatch appends m to ms unless ms has a match of the same pod.
func appendMatch(ms []Match, m Match) []Match {
	for i, o := range ms {
		if o.uid() == m.uid() && o.Deleted == m.Deleted {
			if o.Container == "" {
				ms[i].Container = m.Container
			}
			return ms
		}
	}
	return append(ms, m)
}

// runtimeContainerMatch returns the match of the runtime's container id.
// s.mu is held.
func (s *Store) runtimeContainerMatch(id string, deleted bool) (Match, bool) {
	c := s.rt.containers[id]
	if c == nil {
		return Match{}, false
	}
	p := s.rt.pods[c.SandboxID]
	if p == nil {
		return Match{}, false
	}
	return s.resolveRuntime(p, c, deleted)
}

// FindCgroup returns the pods whose container or sandbox the runtime runs
// in the cgroup of a path ("/kubepods/...", also relative to another
// cgroup namespace: "/../../x") or of a line or whole file of
// /proc/PID/cgroup, as the runtime told it, with deleted the removed ones
// too; and the store version they reflect. It finds what podcgroup.Parse
// cannot name: cgroups outside the kubelet's naming.
func (s *Store) FindCgroup(cgroup string, deleted bool) (uint64, []Match) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireTombstones()
	s.expireRuntime()
	var ms []Match
	for _, line := range strings.Split(strings.TrimRight(cgroup, "\n"), "\n") {
		p := line
		if !strings.HasPrefix(line, "/") {
			// hierarchy-ID:controller-list:path
			if i := strings.Index(line, ":/"); i >= 0 {
				p = line[i+1:]
			}
		}
		if !strings.HasPrefix(p, "/") {
			continue
		}
		for _, r := range s.rt.cgroups[path.Base(p)] {
			if !cgroupSuffix(r.path, p) {
				continue
			}
			pod := r.pod
			if r.c != nil {
				pod = s.rt.pods[r.c.SandboxID]
			}
			if pod == nil {
				continue
			}
			if m, ok := s.resolveRuntime(pod, r.c, deleted); ok {
				ms = appendMatch(ms, m)
			}
		}
		if len(ms) > 0 {
			break
		}
	}
	return s.version, sortMatches(ms)
}

// cgroupSuffix reports whether key, a cgroup path maybe relative to
// another cgroup namespace ("/../../x/y"), names full.
func cgroupSuffix(full, key string) bool {
	for strings.HasPrefix(key, "/..") {
		key = key[len("/.."):]
	}
	return full == key || strings.HasSuffix(full, key) && strings.HasPrefix(key, "/")
}

// FindPID returns the pod of the container whose first process the
// runtime said is pid, and the store version it reflects.
func (s *Store) FindPID(pid uint32, deleted bool) (uint64, []Match) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireTombstones()
	s.expireRuntime()
	var ms []Match
	if c := s.rt.pids[pid]; c != nil {
		if m, ok := s.runtimeContainerMatch(c.ID, deleted); ok {
			ms = append(ms, m)
		}
	}
	return s.version, ms
}
