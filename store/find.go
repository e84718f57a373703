package store

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ContainerIDPrefix is the fewest characters of a container ID that
// FindContainer takes as a prefix: shorter keys match only an ID equal to
// them. The short IDs crictl and docker print are 12 characters long.
const ContainerIDPrefix = 12

// ErrAmbiguous is returned by FindContainer for a prefix that more than one
// container ID starts with.
var ErrAmbiguous = errors.New("ambiguous container ID prefix")

// Match is one pod a Find call found.
type Match struct {
	// Pod is the pod: its current version, or the last one of a deleted
	// pod; nil for a pod that only the runtime told of (Runtime).
	Pod *Pod
	// Runtime is what the container runtime told of a pod the pod source
	// has not reported, when Pod is nil.
	Runtime *RuntimePod
	// Container is the name of the container the key matched, or "" when
	// the key names no container of the pod's status.
	Container string
	// Deleted says the pod is no longer in the store (a tombstone).
	Deleted bool
	// HostNetwork is the pod's spec.hostNetwork.
	HostNetwork bool

	// deletion is the store version of the deletion of a deleted pod.
	deletion uint64
}

// uid returns the UID of the pod of m.
func (m Match) uid() types.UID {
	if m.Pod == nil {
		return m.Runtime.UID
	}
	return m.Pod.UID
}

// identity returns the namespace, name and UID of the pod of m.
func (m Match) identity() (string, string, types.UID) {
	if m.Pod == nil {
		return m.Runtime.Namespace, m.Runtime.Name, m.Runtime.UID
	}
	return m.Pod.Namespace, m.Pod.Name, m.Pod.UID
}

// podKeys are what Find looks a pod version up by, computed once when the
// store takes the version.
type podKeys struct {
	containers []containerKey
	ips        []netip.Addr
}

// containerKey is one container ID of a pod, without its "<runtime>://", and
// the name of its container.
type containerKey struct{ id, name string }

// newPodKeys returns the container IDs (of init, regular and ephemeral
// containers, and of the previous instance of each container that
// restarted) and the IPs of pod.
func newPodKeys(pod *corev1.Pod) podKeys {
	var k podKeys
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range statuses {
			cs := &statuses[i]
			k.addContainer(cs.ContainerID, cs.Name)
			if t := cs.LastTerminationState.Terminated; t != nil {
				k.addContainer(t.ContainerID, cs.Name)
			}
		}
	}
	for _, ip := range pod.Status.PodIPs {
		k.addIP(ip.IP)
	}
	if len(pod.Status.PodIPs) == 0 {
		k.addIP(pod.Status.PodIP)
	}
	return k
}

func (k *podKeys) addContainer(id, name string) {
	id = TrimRuntime(id)
	if id == "" || slices.Contains(k.containers, containerKey{id, name}) {
		return
	}
	k.containers = append(k.containers, containerKey{id, name})
}

func (k *podKeys) addIP(s string) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return
	}
	if ip = ip.Unmap().WithZone(""); !slices.Contains(k.ips, ip) {
		k.ips = append(k.ips, ip)
	}
}

func (k podKeys) equal(o podKeys) bool {
	return slices.Equal(k.containers, o.containers) && slices.Equal(k.ips, o.ips)
}

// TrimRuntime returns a container ID without its "<runtime>://" prefix, as
// containerStatuses[].containerID carries it.
func TrimRuntime(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
}

// index finds the pods of the store, live and deleted, by container ID and
// by IP. It is updated when the store takes a pod version whose keys
// changed, so that a lookup costs a map access (a binary search for a
// prefix), never a scan of the pods. The store's mu guards it.
type index struct {
	// containers holds the containers by ID, and ids those IDs sorted, for
	// prefixes.
	containers map[string][]ref
	ids        []string
	// ips holds the pods by IP.
	ips map[netip.Addr][]ref
}

// ref is a pod an index key leads to: the live pod of uid, or a tombstone.
type ref struct {
	uid types.UID
	// name is the container name of a container key.
	name string
	tomb *tombstone
}

func newIndex() index {
	return index{containers: make(map[string][]ref), ips: make(map[netip.Addr][]ref)}
}

// add indexes keys for the pod of uid, or for the tombstone t.
func (x *index) add(uid types.UID, keys podKeys, t *tombstone) {
	for _, c := range keys.containers {
		refs, ok := x.containers[c.id]
		if !ok {
			i, _ := slices.BinarySearch(x.ids, c.id)
			x.ids = slices.Insert(x.ids, i, c.id)
		}
		x.containers[c.id] = append(refs, ref{uid: uid, name: c.name, tomb: t})
	}
	for _, ip := range keys.ips {
		x.ips[ip] = append(x.ips[ip], ref{uid: uid, tomb: t})
	}
}

// remove drops what add indexed with the same arguments.
func (x *index) remove(uid types.UID, keys podKeys, t *tombstone) {
	same := func(r ref) bool { return r.uid == uid && r.tomb == t }
	for _, c := range keys.containers {
		if refs := slices.DeleteFunc(x.containers[c.id], same); len(refs) > 0 {
			x.containers[c.id] = refs
			continue
		}
		delete(x.containers, c.id)
		if i, ok := slices.BinarySearch(x.ids, c.id); ok {
			x.ids = slices.Delete(x.ids, i, i+1)
		}
	}
	for _, ip := range keys.ips {
		if refs := slices.DeleteFunc(x.ips[ip], same); len(refs) > 0 {
			x.ips[ip] = refs
		} else {
			delete(x.ips, ip)
		}
	}
}

// put moves the index from prev, the version of the pod the store had (nil
// for a new pod), to p. s.mu is held.
func (s *Store) indexPut(prev, p *Pod) {
	if t := s.tombs.byUID[p.UID]; t != nil {
		// A deleted pod is back (a source listed it again): it is live,
		// not deleted.
		s.dropTombstone(t)
	}
	if prev != nil {
		if prev.keys.equal(p.keys) {
			return
		}
		s.index.remove(prev.UID, prev.keys, nil)
	}
	s.index.add(p.UID, p.keys, nil)
	s.reportContainers(p.keys)
}

// resolve returns the match r leads to, and false when r is a tombstone
// that include deleted leaves out.
func (s *Store) resolve(r ref, deleted bool) (Match, bool) {
	if r.tomb != nil {
		if !deleted {
			return Match{}, false
		}
		return r.tomb.match(r.name), true
	}
	p := s.pods[r.uid]
	return Match{Pod: p, Container: r.name, HostNetwork: p.fields.HostNetwork()}, true
}

// FindContainer returns the pods with a container whose ID, without its
// "<runtime>://", is id, or starts with id when id has at least
// ContainerIDPrefix characters; with deleted, the tombstones too. A prefix
// of more than one ID (and equal to none) returns ErrAmbiguous. It returns
// the store version the matches reflect, and the matches in the order of
// sortMatches.
func (s *Store) FindContainer(id string, deleted bool) (uint64, []Match, error) {
	id = TrimRuntime(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireTombstones()
	s.expireRuntime()
	if id == "" {
		return s.version, nil, nil
	}
	if ms := s.containerMatches(id, deleted); len(ms) > 0 || len(id) < ContainerIDPrefix {
		return s.version, sortMatches(ms), nil
	}
	var ms []Match
	var ids []string
	for _, full := range s.prefixed(id) {
		if found := s.containerMatches(full, deleted); len(found) > 0 {
			ms = append(ms, found...)
			ids = append(ids, full)
		}
	}
	if len(ids) > 1 {
		const shown = 4
		list := strings.Join(ids[:min(len(ids), shown)], ", ")
		if len(ids) > shown {
			list += ", ..."
		}
		return s.version, nil, fmt.Errorf("%w %q: %d containers match (%s)", ErrAmbiguous, id, len(ids), list)
	}
	return s.version, sortMatches(ms), nil
}

// containerMatches returns the pods with the container id: those of the
// pod source, and the pod the runtime runs it in. s.mu is held.
func (s *Store) containerMatches(id string, deleted bool) []Match {
	ms := s.resolveAll(s.index.containers[id], deleted)
	if m, ok := s.runtimeContainerMatch(id, deleted); ok {
		ms = appendMatch(ms, m)
	}
	return ms
}

// prefixed returns the container IDs, of the pod source and the runtime,
// that start with prefix, sorted. s.mu is held.
func (s *Store) prefixed(prefix string) []string {
	var ids []string
	for _, sorted := range [][]string{s.index.ids, s.rt.ids} {
		i, _ := slices.BinarySearch(sorted, prefix)
		for _, full := range sorted[i:] {
			if !strings.HasPrefix(full, prefix) {
				break
			}
			ids = append(ids, full)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// resolveAll returns the matches refs lead to.
func (s *Store) resolveAll(refs []ref, deleted bool) []Match {
	var ms []Match
	for _, r := range refs {
		if m, ok := s.resolve(r, deleted); ok {
			ms = append(ms, m)
		}
	}
	return ms
}

// FindIP returns the pods with ip among their status.podIPs (with deleted,
// the tombstones too), and the store version they reflect, in the order of
// sortMatches. The pods of the host network have the node's IP: all of them
// match it.
func (s *Store) FindIP(ip netip.Addr, deleted bool) (uint64, []Match) {
	ip = ip.Unmap().WithZone("")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireTombstones()
	s.expireRuntime()
	ms := s.resolveAll(s.index.ips[ip], deleted)
	for _, p := range s.rt.ips[ip] {
		if m, ok := s.resolveRuntime(p, nil, deleted); ok {
			ms = appendMatch(ms, m)
		}
	}
	return s.version, sortMatches(ms)
}

// FindPod returns the pod of uid (with deleted, its tombstone too) and the
// store version it reflects; the match names the container whose ID is
// containerID, when the pod's status lists it or the runtime told of it (a
// cgroup names the pod and its container, or the pod's sandbox, which no
// status lists). A pod the pod source has not reported is found from what
// the runtime told of it.
func (s *Store) FindPod(uid types.UID, containerID string, deleted bool) (uint64, []Match) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireTombstones()
	s.expireRuntime()
	var ms []Match
	if p := s.pods[uid]; p != nil {
		ms = append(ms, Match{Pod: p, Container: s.containerNameOf(p, containerID), HostNetwork: p.fields.HostNetwork()})
	}
	if t := s.tombs.byUID[uid]; t != nil && deleted {
		ms = append(ms, t.match(s.containerNameOf(t.pod, containerID)))
	}
	if len(ms) > 0 {
		return s.version, ms
	}
	if m, ok := s.runtimeContainerMatch(containerID, deleted); ok && m.uid() == uid {
		return s.version, []Match{m}
	}
	if p := s.rt.byUID[uid]; p != nil {
		if m, ok := s.resolveRuntime(p, nil, deleted); ok {
			ms = append(ms, m)
		}
	}
	return s.version, ms
}

// containerNameOf returns the name of the container of p whose ID is id,
// from p's status or, when it lists no such ID yet, from the runtime.
// s.mu is held.
func (s *Store) containerNameOf(p *Pod, id string) string {
	if n := containerName(p, id); n != "" || id == "" {
		return n
	}
	if c := s.rt.containers[id]; c != nil {
		if rp := s.rt.pods[c.SandboxID]; rp != nil && rp.UID == p.UID {
			return c.Name
		}
	}
	return ""
}

// containerName returns the name of the container of p whose ID is id, or
// "".
func containerName(p *Pod, id string) string {
	if id == "" {
		return ""
	}
	for _, c := range p.keys.containers {
		if c.id == id {
			return c.name
		}
	}
	return ""
}

// sortMatches orders ms: live pods first, those that own their IP (not of
// the host network) before those of the host network, running ones before
// those that terminated (an IP a terminated pod had may be reused), then
// the pods only the runtime told of, each rank by namespace, name and UID;
// then deleted pods, the most recently deleted first.
func sortMatches(ms []Match) []Match {
	rank := func(m Match) int {
		switch {
		case m.Deleted:
			return 4
		case m.Pod == nil:
			return 3
		case m.HostNetwork:
			return 2
		case m.Pod.fields.Phase() == string(corev1.PodSucceeded) || m.Pod.fields.Phase() == string(corev1.PodFailed):
			return 1
		default:
			return 0
		}
	}
	slices.SortStableFunc(ms, func(a, b Match) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 || a.Deleted {
			if c == 0 {
				// Both deleted: the later deletion first.
				return cmp.Compare(b.deletion, a.deletion)
			}
			return c
		}
		ans, an, au := a.identity()
		bns, bn, bu := b.identity()
		return cmp.Or(cmp.Compare(ans, bns), cmp.Compare(an, bn), cmp.Compare(au, bu), cmp.Compare(a.Container, b.Container))
	})
	return ms
}
