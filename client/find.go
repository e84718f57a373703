package client

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
)

// FindKey is what FindPods finds pods by: ByContainerID, ByIP, ByPID,
// ByCgroup or ByCaller.
type FindKey struct {
	field protowire.Number
	str   string
	num   uint64
}

// ByContainerID finds the pod of a container (init, regular or ephemeral)
// by its ID, as containerStatuses[].containerID gives it, with or without
// "<runtime>://", or by a prefix of at least 12 characters that no other
// container's ID starts with (a prefix of several fails with an error that
// wraps ErrAmbiguous).
func ByContainerID(id string) FindKey { return FindKey{field: 1, str: id} }

// ByIP finds the pods with ip among their status.podIPs. The pods of the
// host network share the node's IPs: a node IP finds all of them, each
// with HostNetwork set.
func ByIP(ip netip.Addr) FindKey { return FindKey{field: 2, str: ip.String()} }

// ByPID finds the pod and container of the process pid, in the PID
// namespace of the server's --host-proc, from its cgroups.
func ByPID(pid int32) FindKey { return FindKey{field: 3, num: uint64(uint32(pid))} }

// ByCgroup finds the pod and container of a cgroup: a line of
// /proc/PID/cgroup, or its path, of either cgroup version and driver.
func ByCgroup(cgroup string) FindKey { return FindKey{field: 4, str: cgroup} }

// ByCaller finds the pod and container of the calling process itself, from
// the PID the server reads from the socket's peer credentials: an agent
// learns its own pod without the downward API.
func ByCaller() FindKey { return FindKey{field: 5, num: 1} }

// DeletedOption is the option WithDeleted returns.
type DeletedOption struct{}

func (DeletedOption) applyCall(o *callOptions) { o.includeDeleted = true }

// WithDeleted makes FindPods also match the pods deleted within the
// server's --deleted-pod-retention, with their last known state and
// Deleted set. By default only the node's current pods match.
func WithDeleted() DeletedOption { return DeletedOption{} }

// WaitOption is the option WithWait returns.
type WaitOption struct{ d time.Duration }

func (w WaitOption) applyCall(o *callOptions) { o.wait = w.d }

// WithWait makes FindPods wait, when the key matches no pod yet, at most d
// for it to match: the server answers the moment its pod source, or the
// container runtime's events (its --nri-socket), make the key known, and
// the call fails with an error that wraps ErrNotFound, as without a wait,
// when d runs out. The server cuts d to its --max-find-wait (5 s by
// default), and the call's context ends the wait too: give it a deadline
// beyond d. A server older than the wait answers at once. Beyond the
// server's bounds of calls waiting at once, the call fails with
// RESOURCE_EXHAUSTED, reason TOO_MANY_FIND_WAITERS. By default, and for a
// d of 0 or less, FindPods answers at once. Waiting replaces polling: one
// call answers as soon as the key is known, where a loop of calls answers
// up to its interval late and costs a call per interval.
func WithWait(d time.Duration) WaitOption { return WaitOption{d: d} }

// Match is one pod FindPods found.
type Match struct {
	// Pod is the pod, trimmed by WithFields; its namespace, name and UID
	// are always there.
	Pod *corev1.Pod
	// Container is the name of the container the key matched, or "" (an
	// IP, or a process of the pod's sandbox).
	Container string
	// Deleted says the pod is no longer on the node (WithDeleted): Pod is
	// its last known state.
	Deleted bool
	// HostNetwork says the pod is of the host network: its IPs are the
	// node's.
	HostNetwork bool
	// Source says where Pod comes from: MATCH_SOURCE_POD_SOURCE for the
	// pod as ListPods serves it, MATCH_SOURCE_RUNTIME for a pod only the
	// container runtime told of (the server's --nri-socket), of which Pod
	// holds only the namespace, name and UID. MATCH_SOURCE_UNSPECIFIED
	// from a server older than the field.
	Source podsv1alpha1.MatchSource
	// Workload is the workload the pod is part of, as the server resolved
	// it (docs/api.md, "Workloads"): its kind ("Deployment",
	// "StatefulSet", "DaemonSet", "CronJob", "Job", "ReplicaSet", "Node"
	// for a static pod, another controller's kind, or "" for a pod without
	// a controller), name and resolution (resolved, derived from names, or
	// unresolved). Nil when the server resolves none (--workloads=off, a
	// server older than the field) or for a pod only the runtime told of.
	Workload *podsv1alpha1.PodWorkload
}

// FindPods returns the pods key finds, live ones first (those that own
// their IP, then those of the host network), then, with WithDeleted, the
// deleted ones, the most recently deleted first; and the revision of the
// server's store they reflect. WithFields trims the pods. No match fails
// with an error that wraps ErrNotFound; a malformed key with one that wraps
// ErrInvalidFindKey. FindPods is an addition of podsapi's typed wire: on
// WireKubelet it fails with UNIMPLEMENTED.
func (c *Client) FindPods(ctx context.Context, key FindKey, opts ...CallOption) ([]Match, string, error) {
	wire, err := c.Wire(ctx)
	if err != nil {
		return nil, "", wrapError(err, false)
	}
	if wire == WireKubelet {
		return nil, "", connect.NewError(connect.CodeUnimplemented, errors.New("FindPods is served by podsapi's typed wire, not by the kubelet's"))
	}
	o := newCallOptions(opts)
	res, err := c.find.CallUnary(ctx, newRequest(&findRequest{key: key, includeDeleted: o.includeDeleted, wait: o.wait}, o))
	if err != nil {
		c.forget(wire, err)
		return nil, "", wrapError(err, false)
	}
	return res.Msg.matches, res.Msg.revision, nil
}

// findProcedure is the procedure of FindPods.
const findProcedure = podsv1alpha1connect.PodsFindPodsProcedure

// findRequest is PodFindRequest: the oneof key (1 to 5),
// include_deleted = 6 and wait = 7 (a google.protobuf.Duration: seconds =
// 1, nanos = 2).
type findRequest struct {
	key            FindKey
	includeDeleted bool
	wait           time.Duration
}

func (r findRequest) marshalWire() []byte {
	var b []byte
	switch r.key.field {
	case 1, 2, 4:
		b = protowire.AppendTag(b, r.key.field, protowire.BytesType)
		b = protowire.AppendString(b, r.key.str)
	case 3, 5:
		b = protowire.AppendTag(b, r.key.field, protowire.VarintType)
		b = protowire.AppendVarint(b, r.key.num)
	}
	if r.includeDeleted {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if r.wait > 0 {
		var d []byte
		if secs := int64(r.wait / time.Second); secs != 0 {
			d = protowire.AppendTag(d, 1, protowire.VarintType)
			d = protowire.AppendVarint(d, uint64(secs))
		}
		if nanos := int32(r.wait % time.Second); nanos != 0 {
			d = protowire.AppendTag(d, 2, protowire.VarintType)
			d = protowire.AppendVarint(d, uint64(nanos))
		}
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		b = protowire.AppendBytes(b, d)
	}
	return b
}
func (*findRequest) unmarshalWire(b []byte) error {
	return errors.New("client codec: requests are not decoded")
}

// findResponse is PodFindResponse: matches = 1, revision = 2.
type findResponse struct {
	matches  []Match
	revision string
}

func (*findResponse) marshalWire() []byte { return nil }
func (r *findResponse) unmarshalWire(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			m, err := decodeMatch(v)
			if err != nil {
				return err
			}
			r.matches = append(r.matches, m)
		case num == 2 && typ == protowire.BytesType:
			r.revision = string(v)
		}
		return nil
	})
}

// decodeMatch decodes a PodMatch: pod = 1, container_name = 2, deleted =
// 3, host_network = 4, source = 5, workload = 6.
func decodeMatch(b []byte) (Match, error) {
	var m Match
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			pod, err := mergePod(m.Pod, v)
			m.Pod = pod
			return err
		case num == 2 && typ == protowire.BytesType:
			m.Container = string(v)
		case num == 6 && typ == protowire.BytesType:
			if m.Workload == nil {
				m.Workload = &podsv1alpha1.PodWorkload{}
			}
			return proto.UnmarshalOptions{Merge: true}.Unmarshal(v, m.Workload)
		case (num == 3 || num == 4 || num == 5) && typ == protowire.VarintType:
			n, l := protowire.ConsumeVarint(v)
			if l < 0 {
				return protowire.ParseError(l)
			}
			switch num {
			case 3:
				m.Deleted = n != 0
			case 4:
				m.HostNetwork = n != 0
			default:
				m.Source = podsv1alpha1.MatchSource(int32(n))
			}
		}
		return nil
	})
	if m.Pod == nil {
		m.Pod = &corev1.Pod{}
	}
	return m, err
}
