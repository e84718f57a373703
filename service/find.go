package service

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/store"
)

// Finder is what FindPods looks pods up in: an index of the store, kept as
// pod versions are written. *store.Store implements it.
type Finder interface {
	// FindContainer returns the pods with a container whose ID is id or
	// starts with it (at least store.ContainerIDPrefix characters), or
	// store.ErrAmbiguous.
	FindContainer(id string, deleted bool) (uint64, []store.Match, error)
	// FindIP returns the pods with the IP.
	FindIP(ip netip.Addr, deleted bool) (uint64, []store.Match)
	// FindPod returns the pod of uid, naming its container of containerID.
	FindPod(uid types.UID, containerID string, deleted bool) (uint64, []store.Match)
	// FindCgroup returns the pods of the cgroup of a path or of
	// /proc/PID/cgroup as the container runtime told it (NRI): cgroups
	// outside the kubelet's naming. None without runtime facts.
	FindCgroup(cgroup string, deleted bool) (uint64, []store.Match)
	// FindPID returns the pod of the container whose first process the
	// runtime said is pid. None without runtime facts.
	FindPID(pid uint32, deleted bool) (uint64, []store.Match)
	// Changed returns a channel closed at the next change the calls above
	// can see, for FindPods that waits.
	Changed() <-chan struct{}
}

// Processes tells which pod a process runs in. *podcgroup.Reader
// implements it.
type Processes interface {
	// Read returns the pod of the process pid, or podcgroup.ErrNoProcess,
	// podcgroup.ErrNotPod, podcgroup.ErrBusy or another error.
	Read(ctx context.Context, pid int) (podcgroup.Pod, error)
	// ReadFile returns the cgroup file of the process pid, as it reads it
	// for Read, for the cgroups the kubelet does not name.
	ReadFile(ctx context.Context, pid int) (string, error)
}

// The numbers of the fields of PodFindResponse and PodMatch.
const (
	findMatchesField      protowire.Number = 1
	matchPodField         protowire.Number = 1
	matchContainerField   protowire.Number = 2
	matchDeletedField     protowire.Number = 3
	matchHostNetworkField protowire.Number = 4
	matchSourceField      protowire.Number = 5
)

// maxContainerIDLen bounds a container_id key: runtimes' IDs are 64 hex
// digits, after a "<runtime>://" prefix.
const maxContainerIDLen = 256

// FindPods returns the pods a container ID, IP, process, cgroup or the
// caller itself belongs to, from the store's index; with a wait, the
// moment the key becomes known (findwait.go).
func (h podsHandler) FindPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodFindRequest]) (*connect.Response[podsv1alpha1.PodFindResponse], error) {
	d, err := h.findWait(req.Msg.GetWait())
	if err != nil {
		return nil, err
	}
	lookup, err := h.findLookup(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	version, ms, err := h.find(ctx, d, lookup)
	if err != nil {
		return nil, err
	}
	raw, err := h.findResponse(ctx, ms)
	if err != nil {
		return nil, err
	}
	if err := h.responses.reserve(ctx, h.clientOf(ctx), int64(len(raw))); err != nil {
		return nil, err
	}
	return connect.NewResponse(withRaw(&podsv1alpha1.PodFindResponse{Revision: h.store.Revision(version)}, raw)), nil
}

// findLookup checks the key of req and returns its lookup in the store's
// index, or the error of a malformed key. A process's cgroups are read
// once, here: its lookups read the index only.
func (h *handler) findLookup(ctx context.Context, req *podsv1alpha1.PodFindRequest) (findLookup, error) {
	f := h.store
	deleted := req.GetIncludeDeleted()
	switch key := req.GetKey().(type) {
	case *podsv1alpha1.PodFindRequest_ContainerId:
		id := store.TrimRuntime(key.ContainerId)
		if err := validContainerID(id, len(key.ContainerId)); err != nil {
			return nil, err
		}
		return func() (uint64, []store.Match, error, error) {
			version, ms, err := f.FindContainer(id, deleted)
			if errors.Is(err, store.ErrAmbiguous) {
				return 0, nil, nil, errAmbiguous(key.ContainerId, err)
			}
			if len(ms) == 0 {
				return 0, nil, errNoMatch("container_id", key.ContainerId, "no container with this ID, or whose ID starts with it, on this node"), nil
			}
			return version, ms, nil, nil
		}, nil
	case *podsv1alpha1.PodFindRequest_Ip:
		ip, perr := netip.ParseAddr(key.Ip)
		if perr != nil {
			return nil, errFindKey("ip", "not an IPv4 or IPv6 address")
		}
		return func() (uint64, []store.Match, error, error) {
			version, ms := f.FindIP(ip, deleted)
			if len(ms) == 0 {
				return 0, nil, errNoMatch("ip", ip.String(), "no pod with this IP on this node"), nil
			}
			return version, ms, nil, nil
		}, nil
	case *podsv1alpha1.PodFindRequest_Pid:
		if key.Pid <= 0 {
			return nil, errFindKey("pid", "a process ID is positive")
		}
		return h.processLookup(ctx, "pid", key.Pid, deleted), nil
	case *podsv1alpha1.PodFindRequest_CgroupPath:
		if !strings.Contains(key.CgroupPath, "/") {
			return nil, errFindKey("cgroup_path", `not a cgroup path ("/kubepods/...") or a line of /proc/PID/cgroup ("0::/kubepods/...")`)
		}
		p, ok := podcgroup.Parse(key.CgroupPath)
		return func() (uint64, []store.Match, error, error) {
			var (
				version uint64
				ms      []store.Match
			)
			if ok {
				version, ms = f.FindPod(types.UID(p.UID), p.ContainerID, deleted)
			}
			if len(ms) == 0 {
				version, ms = f.FindCgroup(key.CgroupPath, deleted)
			}
			switch {
			case len(ms) > 0:
				return version, ms, nil, nil
			case !ok:
				return 0, nil, errNoMatch("cgroup_path", "", "the cgroup is no pod's (the kubelet names pod cgroups pod<UID> or kubepods-...-pod<UID>.slice)"), nil
			default:
				return 0, nil, errNoMatch("cgroup_path", p.UID, "the cgroup is of pod "+p.UID+", which is not on this node"), nil
			}
		}, nil
	case *podsv1alpha1.PodFindRequest_Caller:
		if !key.Caller {
			return nil, errFindKey("caller", "caller must be true when set")
		}
		pid, known := int32(0), false
		if h.caller != nil {
			pid, known = h.caller(ctx)
		}
		if !known || pid <= 0 {
			return nil, errCallerUnknown
		}
		return h.processLookup(ctx, "caller", pid, deleted), nil
	default:
		return nil, errFindKey("key", "set one of container_id, ip, pid, cgroup_path or caller")
	}
}

// processLookup returns the lookup of the pod of the process pid, for key
// (pid or caller), from its cgroups, read once: the pod and container
// they name, or, in no pod's cgroup, what the runtime told of its cgroup or
// its PID. A process that cannot be read fails every lookup.
func (h *handler) processLookup(ctx context.Context, key string, pid int32, deleted bool) findLookup {
	f := h.store
	failed := func(err error) findLookup {
		return func() (uint64, []store.Match, error, error) { return 0, nil, nil, err }
	}
	p, err := h.processes.Read(ctx, int(pid))
	switch {
	case errors.Is(err, podcgroup.ErrNoProcess):
		return failed(errNoProcess(key, pid))
	case errors.Is(err, podcgroup.ErrNotPod):
		file, ferr := h.processes.ReadFile(ctx, int(pid))
		return func() (uint64, []store.Match, error, error) {
			// The cgroup the runtime told, else the PID of a container's
			// first process.
			if ferr == nil {
				if version, ms := f.FindCgroup(file, deleted); len(ms) > 0 {
					return version, ms, nil, nil
				}
			}
			if version, ms := f.FindPID(uint32(pid), deleted); len(ms) > 0 {
				return version, ms, nil, nil
			}
			return 0, nil, errNoMatch(key, strconv.Itoa(int(pid)), "the process runs in no pod's cgroup"), nil
		}
	case errors.Is(err, podcgroup.ErrBusy):
		return failed(errProcessBusy(pid))
	case err != nil:
		h.logger.Error("cannot read the cgroups of a process", "pid", pid, "error", err)
		return failed(errProcessUnreadable(pid))
	}
	return func() (uint64, []store.Match, error, error) {
		version, ms := f.FindPod(types.UID(p.UID), p.ContainerID, deleted)
		if len(ms) == 0 {
			return 0, nil, errNoMatch(key, strconv.Itoa(int(pid)), "the process runs in pod "+p.UID+", which is not on this node"), nil
		}
		return version, ms, nil, nil
	}
}

// validContainerID checks a container_id key, n bytes long before its
// "<runtime>://" was trimmed to id.
func validContainerID(id string, n int) error {
	if id == "" || n > maxContainerIDLen {
		return errFindKey("container_id", "a container ID has 1 to "+strconv.Itoa(maxContainerIDLen)+" characters")
	}
	for _, c := range []byte(id) {
		if c <= ' ' || c >= 0x7f {
			return errFindKey("container_id", "a container ID has no spaces or control characters")
		}
	}
	return nil
}

// findResponse returns the encoded matches of a PodFindResponse, each pod
// the shared view of its version trimmed by the request's mask widened to
// the pod's identity.
func (h *handler) findResponse(ctx context.Context, ms []store.Match) ([]byte, error) {
	pr, err := h.watchProjection(maskFrom(ctx))
	if err != nil {
		return nil, errFieldMask(err)
	}
	var raw []byte
	for _, m := range ms {
		var v []byte
		source := podsv1alpha1.MatchSource_MATCH_SOURCE_POD_SOURCE
		if m.Pod == nil {
			// What the runtime told of a pod the pod source has not
			// reported: its identity, which every mask keeps.
			source = podsv1alpha1.MatchSource_MATCH_SOURCE_RUNTIME
			v, err = runtimePod(m.Runtime)
		} else {
			v, err = h.view(m.Pod, pr)
		}
		if err != nil {
			return nil, err
		}
		var wl []byte
		if m.Pod != nil {
			wl = h.workloadOf(m.Pod.UID)
		}
		// The match is written in place, its length first: the pod's
		// view is copied once, as by GetPod.
		size := protowire.SizeTag(matchPodField) + protowire.SizeBytes(len(v))
		if m.Container != "" {
			size += protowire.SizeTag(matchContainerField) + protowire.SizeBytes(len(m.Container))
		}
		if m.Deleted {
			size += protowire.SizeTag(matchDeletedField) + 1
		}
		if m.HostNetwork {
			size += protowire.SizeTag(matchHostNetworkField) + 1
		}
		size += protowire.SizeTag(matchSourceField) + protowire.SizeVarint(uint64(source))
		if wl != nil {
			size += protowire.SizeTag(matchWorkloadField) + protowire.SizeBytes(len(wl))
		}
		raw = protowire.AppendTag(raw, findMatchesField, protowire.BytesType)
		raw = protowire.AppendVarint(raw, uint64(size))
		raw = appendPod(raw, v)
		if m.Container != "" {
			raw = protowire.AppendTag(raw, matchContainerField, protowire.BytesType)
			raw = protowire.AppendString(raw, m.Container)
		}
		if m.Deleted {
			raw = protowire.AppendTag(raw, matchDeletedField, protowire.VarintType)
			raw = protowire.AppendVarint(raw, 1)
		}
		if m.HostNetwork {
			raw = protowire.AppendTag(raw, matchHostNetworkField, protowire.VarintType)
			raw = protowire.AppendVarint(raw, 1)
		}
		raw = protowire.AppendTag(raw, matchSourceField, protowire.VarintType)
		raw = protowire.AppendVarint(raw, uint64(source))
		if wl != nil {
			raw = protowire.AppendTag(raw, matchWorkloadField, protowire.BytesType)
			raw = protowire.AppendBytes(raw, wl)
		}
	}
	return raw, nil
}

// runtimePod returns the encoding of a pod with the identity the runtime
// told of, and nothing else.
func runtimePod(p *store.RuntimePod) ([]byte, error) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
	return pod.Marshal()
}
