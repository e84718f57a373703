package store_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// withContainers returns pod with its containers' IDs replaced by ids
// (by name), as a runtime gives random ones.
func withContainers(pod *corev1.Pod, ids map[string]string) *corev1.Pod {
	pod = pod.DeepCopy()
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			if id, ok := ids[statuses[i].Name]; ok {
				statuses[i].ContainerID = id
				if t := statuses[i].State.Terminated; t != nil {
					t.ContainerID = id
				}
			}
		}
	}
	return pod
}

// hex64 returns a 64-digit container ID starting with prefix.
func hex64(prefix string) string { return prefix + strings.Repeat("0", 64-len(prefix)) }

func matchNames(ms []store.Match) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m.Pod.Name)
		if m.Container != "" {
			b.WriteString("/" + m.Container)
		}
		if m.Deleted {
			b.WriteString("(deleted)")
		}
		if m.HostNetwork {
			b.WriteString("(host)")
		}
	}
	return b.String()
}

func TestFindContainer(t *testing.T) {
	st := store.New()
	web := withContainers(podstest.Pod("ns", "web", 1), map[string]string{
		"init-config": "containerd://" + hex64("1111aaaa2222"),
		"app":         "containerd://" + hex64("abcdef012345aa"),
		"log-shipper": "containerd://" + hex64("abcdef012345bb"),
	})
	// The sidecar restarted: its previous container stays findable.
	web.Status.ContainerStatuses[1].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ContainerID: "containerd://" + hex64("dead0000beef")}
	web.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "debugger", ContainerID: "cri-o://" + hex64("eeee00001111")}}
	st.Upsert(web)
	st.Upsert(withContainers(podstest.Pod("ns", "db", 2), map[string]string{"app": "docker://short"}))

	for _, tc := range []struct {
		name, id string
		want     string
		err      error
	}{
		{"full ID with its runtime", "containerd://" + hex64("abcdef012345aa"), "web/app", nil},
		{"full ID without its runtime", hex64("abcdef012345aa"), "web/app", nil},
		{"another runtime's prefix", "docker://" + hex64("abcdef012345aa"), "web/app", nil},
		{"a unique prefix", "abcdef012345a", "web/app", nil},
		{"a 12-digit prefix", "1111aaaa2222", "web/init-config", nil},
		{"an ambiguous prefix", "abcdef012345", "", store.ErrAmbiguous},
		{"a prefix under 12 digits", "1111aaaa", "", nil},
		{"a short ID, whole", "short", "db/app", nil},
		{"a restarted container's previous ID", hex64("dead0000beef"), "web/log-shipper", nil},
		{"an ephemeral container", "eeee00001111", "web/debugger", nil},
		{"unknown", hex64("9999"), "", nil},
		{"empty", "containerd://", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ms, err := st.FindContainer(tc.id, false)
			if !errors.Is(err, tc.err) {
				t.Fatalf("FindContainer(%q) error %v, want %v", tc.id, err, tc.err)
			}
			if got := matchNames(ms); got != tc.want {
				t.Errorf("FindContainer(%q) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}

	// A new version whose container restarted moves the index.
	restarted := web.DeepCopy()
	restarted.Status.ContainerStatuses[0].ContainerID = "containerd://" + hex64("0123cafe4567")
	st.Upsert(restarted)
	if _, ms, _ := st.FindContainer("0123cafe4567", false); matchNames(ms) != "web/app" {
		t.Errorf("the new container of app: %q", matchNames(ms))
	}
	if _, ms, _ := st.FindContainer(hex64("abcdef012345aa"), false); len(ms) != 0 {
		t.Errorf("the replaced container of app is still found: %q", matchNames(ms))
	}
	// With one of the two left, the prefix is no longer ambiguous.
	if _, ms, err := st.FindContainer("abcdef012345", false); err != nil || matchNames(ms) != "web/log-shipper" {
		t.Errorf("FindContainer(abcdef012345) = %q, %v", matchNames(ms), err)
	}
}

func TestFindIP(t *testing.T) {
	st := store.New()
	node := "192.168.10.21"
	host := func(name string) *corev1.Pod {
		p := podstest.Pod("kube-system", name, 0)
		p.Spec.HostNetwork = true
		p.Status.PodIP, p.Status.PodIPs = node, []corev1.PodIP{{IP: node}}
		return p
	}
	st.Upsert(host("kube-proxy"))
	st.Upsert(host("cilium"))
	dual := podstest.Pod("ns", "dual", 7)
	dual.Status.PodIPs = append(dual.Status.PodIPs, corev1.PodIP{IP: "fd00::7"})
	st.Upsert(dual)
	old := podstest.Pod("ns", "old", 3)
	st.Upsert(old)

	for _, tc := range []struct{ name, ip, want string }{
		{"the node's IP: every pod of the host network", node, "cilium(host) kube-proxy(host)"},
		{"IPv4", "10.244.0.9", "dual"},
		{"IPv6, another form", "fd00:0:0::7", "dual"},
		{"IPv4-mapped IPv6", "::ffff:10.244.0.9", "dual"},
		{"unknown", "10.0.0.1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ms := st.FindIP(netip.MustParseAddr(tc.ip), true)
			if got := matchNames(ms); got != tc.want {
				t.Errorf("FindIP(%s) = %q, want %q", tc.ip, got, tc.want)
			}
		})
	}

	// The IP of a deleted pod reused by a new pod: the live one first.
	st.Delete(old.UID)
	reuse := podstest.Pod("ns", "new", 3)
	st.Upsert(reuse)
	if _, ms := st.FindIP(netip.MustParseAddr(old.Status.PodIP), true); matchNames(ms) != "new old(deleted)" {
		t.Errorf("a reused IP: %q, want the live pod, then the deleted one", matchNames(ms))
	}
	if _, ms := st.FindIP(netip.MustParseAddr(old.Status.PodIP), false); matchNames(ms) != "new" {
		t.Errorf("a reused IP without deleted pods: %q", matchNames(ms))
	}
	// A pod that terminated keeps its IP in its status; a running pod that
	// got the IP comes first.
	done := podstest.Pod("ns", "a-done", 3)
	done.Status.Phase = corev1.PodSucceeded
	st.Upsert(done)
	if _, ms := st.FindIP(netip.MustParseAddr(old.Status.PodIP), false); matchNames(ms) != "new a-done" {
		t.Errorf("a running and a terminated pod: %q", matchNames(ms))
	}
}

func TestFindPod(t *testing.T) {
	st := store.New()
	pod := podstest.Pod("ns", "web", 1)
	st.Upsert(pod)
	id := store.TrimRuntime(pod.Status.ContainerStatuses[0].ContainerID)
	if _, ms := st.FindPod(pod.UID, id, false); matchNames(ms) != "web/app" {
		t.Errorf("FindPod with a container: %q", matchNames(ms))
	}
	if _, ms := st.FindPod(pod.UID, hex64("5a4d"), false); matchNames(ms) != "web" {
		t.Errorf("FindPod with the sandbox's ID: %q, want the pod and no container", matchNames(ms))
	}
	if _, ms := st.FindPod("other", "", true); len(ms) != 0 {
		t.Errorf("FindPod of an unknown UID: %q", matchNames(ms))
	}
}

// TestDeletedRetention checks that a deleted pod stays findable with
// deleted for the retention and no longer, on synctest's clock.
func TestDeletedRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := store.New(store.WithDeletedPods(time.Minute, 0, 0))
		pod := podstest.Pod("ns", "web", 1)
		id := store.TrimRuntime(pod.Status.ContainerStatuses[0].ContainerID)
		ip := netip.MustParseAddr(pod.Status.PodIP)
		st.Upsert(pod)
		st.Delete(pod.UID)
		for _, tc := range []struct {
			name    string
			deleted bool
			want    string
		}{{"without deleted", false, ""}, {"with deleted", true, "web/app(deleted)"}} {
			if _, ms, _ := st.FindContainer(id, tc.deleted); matchNames(ms) != tc.want {
				t.Errorf("FindContainer %s: %q, want %q", tc.name, matchNames(ms), tc.want)
			}
		}
		if _, ms := st.FindIP(ip, true); matchNames(ms) != "web(deleted)" {
			t.Errorf("FindIP: %q", matchNames(ms))
		}
		if _, ms := st.FindPod(pod.UID, "", true); matchNames(ms) != "web(deleted)" {
			t.Errorf("FindPod: %q", matchNames(ms))
		}
		if n, b := st.DeletedLen(); n != 1 || b <= int64(len(mustMarshal(t, pod))) {
			t.Errorf("DeletedLen = %d, %d", n, b)
		}
		time.Sleep(59 * time.Second)
		if _, ms, _ := st.FindContainer(id, true); len(ms) != 1 {
			t.Errorf("within the retention: %q", matchNames(ms))
		}
		time.Sleep(time.Second)
		if _, ms, _ := st.FindContainer(id, true); len(ms) != 0 {
			t.Errorf("after the retention: %q", matchNames(ms))
		}
		if n, b := st.DeletedLen(); n != 0 || b != 0 {
			t.Errorf("DeletedLen after the retention = %d, %d", n, b)
		}
	})
}

func mustMarshal(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	b, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeletedBounds(t *testing.T) {
	size := int64(len(mustMarshal(t, podstest.Pod("ns", "p0", 0)))) + 512
	for _, tc := range []struct {
		name      string
		retention time.Duration
		count     int
		bytes     int64
		want      string // the deleted pods found, newest first
	}{
		{"the default keeps all", 0, 0, 0, "p4 p3 p2 p1 p0"},
		{"by count", 0, 3, 0, "p4 p3 p2"},
		{"by bytes", 0, 0, 2*size + size/2, "p4 p3"},
		{"negative retention keeps none", -1, 0, 0, ""},
		{"negative count keeps none", 0, -1, 0, ""},
		{"a pod over the bytes is not kept", 0, 0, size / 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.New(store.WithDeletedPods(tc.retention, tc.count, tc.bytes))
			for i := range 5 {
				p := podstest.Pod("ns", fmt.Sprintf("p%d", i), 0) // one IP for all
				st.Upsert(p)
				st.Delete(p.UID)
			}
			_, ms := st.FindIP(netip.MustParseAddr("10.244.0.2"), true)
			got := strings.ReplaceAll(matchNames(ms), "(deleted)", "")
			if got != tc.want {
				t.Errorf("deleted pods found: %q, want %q", got, tc.want)
			}
			if n, b := st.DeletedLen(); n != len(ms) || b != int64(n)*size {
				t.Errorf("DeletedLen = %d, %d; want %d, %d", n, b, len(ms), int64(len(ms))*size)
			}
		})
	}
}

// TestDeletedPodBack checks that a pod listed again after its deletion is
// live, not deleted too.
func TestDeletedPodBack(t *testing.T) {
	st := store.New()
	pod := podstest.Pod("ns", "web", 1)
	st.Upsert(pod)
	st.Delete(pod.UID)
	st.Upsert(pod)
	if _, ms := st.FindPod(pod.UID, "", true); matchNames(ms) != "web" {
		t.Errorf("FindPod = %q, want the live pod only", matchNames(ms))
	}
	if n, _ := st.DeletedLen(); n != 0 {
		t.Errorf("DeletedLen = %d", n)
	}
}
