package client_test

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// matchNames returns "namespace/name[/container][ (deleted)][ (host)]" for
// each match.
func matchNames(ms []client.Match) string {
	var s []string
	for _, m := range ms {
		v := m.Pod.Namespace + "/" + m.Pod.Name
		if m.Container != "" {
			v += "/" + m.Container
		}
		if m.Deleted {
			v += " (deleted)"
		}
		if m.HostNetwork {
			v += " (host)"
		}
		s = append(s, v)
	}
	return strings.Join(s, ", ")
}

func TestFindPods(t *testing.T) {
	const cid = "4f1e9b0c2d3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"
	web := podstest.Pod("default", "web", 1)
	web.Status.ContainerStatuses[1].ContainerID = "containerd://" + cid
	gone := podstest.Pod("default", "gone", 2)
	proxy := podstest.Pod("kube-system", "kube-proxy", 0)
	proxy.Spec.HostNetwork = true
	proxy.Status.PodIPs = []corev1.PodIP{{IP: proxy.Status.HostIP}}
	cgroup := podstest.SystemdCgroup(web.UID, cid)
	proc, err := podstest.WriteHostProc(t.TempDir(), map[int]string{42: cgroup + "\n", os.Getpid(): cgroup + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(false, web, gone, proxy)
	st.Delete(gone.UID)
	c := startClient(t, st, server.Config{HostProc: proc, Limits: server.LimitsConfig{QPS: -1}})

	for _, tc := range []struct {
		name string
		key  client.FindKey
		opts []client.CallOption
		want string
		err  error
	}{
		{"ByContainerID", client.ByContainerID("containerd://" + cid), nil, "default/web/log-shipper", nil},
		{"ByContainerID, a prefix", client.ByContainerID(cid[:12]), nil, "default/web/log-shipper", nil},
		{"ByContainerID, ambiguous", client.ByContainerID("000000000000"), nil, "", client.ErrAmbiguous},
		{"ByIP", client.ByIP(netip.MustParseAddr(web.Status.PodIP)), nil, "default/web", nil},
		{"ByIP, the node's", client.ByIP(netip.MustParseAddr(proxy.Status.HostIP)), nil, "kube-system/kube-proxy (host)", nil},
		{"ByPID", client.ByPID(42), nil, "default/web/log-shipper", nil},
		{"ByPID, no such process", client.ByPID(43), nil, "", client.ErrNotFound},
		{"ByPID, invalid", client.ByPID(-3), nil, "", client.ErrInvalidFindKey},
		{"ByCgroup", client.ByCgroup(cgroup), nil, "default/web/log-shipper", nil},
		{"ByCaller", client.ByCaller(), nil, "default/web/log-shipper", nil},
		{"a deleted pod", client.ByIP(netip.MustParseAddr(gone.Status.PodIP)), nil, "", client.ErrNotFound},
		{"a deleted pod WithDeleted", client.ByIP(netip.MustParseAddr(gone.Status.PodIP)), []client.CallOption{client.WithDeleted()}, "default/gone (deleted)", nil},
		{"the zero key", client.FindKey{}, nil, "", client.ErrInvalidFindKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, rev, err := c.FindPods(testCtx(t), tc.key, tc.opts...)
			if !errors.Is(err, tc.err) {
				t.Fatalf("FindPods: %v, want %v", err, tc.err)
			}
			if got := matchNames(ms); got != tc.want {
				t.Errorf("FindPods = %q, want %q", got, tc.want)
			}
			if err == nil && rev == "" {
				t.Error("no revision")
			}
			for _, m := range ms {
				// Without --nri-socket every match is the pod source's.
				if m.Source != podsv1alpha1.MatchSource_MATCH_SOURCE_POD_SOURCE {
					t.Errorf("match %s/%s: source %v, want MATCH_SOURCE_POD_SOURCE", m.Pod.Namespace, m.Pod.Name, m.Source)
				}
			}
		})
	}

	ms, _, err := c.FindPods(testCtx(t), client.ByPID(42), client.WithFields("status.phase"))
	if err != nil || len(ms) != 1 || ms[0].Pod.UID != web.UID || ms[0].Pod.Status.Phase != corev1.PodRunning || ms[0].Pod.Spec.Containers != nil {
		t.Fatalf("FindPods WithFields = %+v, %v", ms, err)
	}
}

// TestFindPodsKubeletWire checks that FindPods on the kubelet's wire fails
// with UNIMPLEMENTED, without a call.
func TestFindPodsKubeletWire(t *testing.T) {
	srv := podstest.Start(t, newStore(false, podstest.Pod("default", "web", 1)), server.Config{})
	c, err := client.New(srv.SocketPath(), client.WithWire(client.WireKubelet))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.FindPods(testCtx(t), client.ByCaller()); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("FindPods on the kubelet's wire: %v", err)
	}
}
