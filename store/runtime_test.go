package store_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/store"
)

// runtimeFacts returns the facts of a pod web in ns with one container
// app, as the runtime tells them.
func runtimeFacts(uid, sandbox, container string, ip string) (store.RuntimePod, store.RuntimeContainer) {
	p := store.RuntimePod{SandboxID: sandbox, UID: types.UID("uid-" + uid), Namespace: "ns", Name: "web-" + uid,
		IPs: []netip.Addr{netip.MustParseAddr(ip)}, Cgroup: "/custom/" + sandbox}
	c := store.RuntimeContainer{ID: container, SandboxID: sandbox, Name: "app", PID: 4242, Cgroup: "/custom/" + sandbox + "/" + container}
	return p, c
}

// sourcePod returns the pod source's version of the pod of runtimeFacts,
// its container reported when withContainer.
func sourcePod(uid, container string, withContainer bool) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-" + uid, UID: types.UID("uid-" + uid)}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
	if withContainer {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://" + container}}
	}
	return pod
}

func describe(ms []store.Match) string {
	var b []string
	for _, m := range ms {
		s := ""
		if m.Pod != nil {
			s = "source:" + m.Pod.Name
		} else {
			s = "runtime:" + m.Runtime.Name
		}
		if m.Container != "" {
			s += "/" + m.Container
		}
		if m.Deleted {
			s += "(deleted)"
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

func TestRuntimeFacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var delays []time.Duration
		st := store.New(store.WithDeletedPods(time.Minute, 0, 0))
		st.ObserveReports(func(d time.Duration) { delays = append(delays, d) })
		id := hex64("abc1")
		p, c := runtimeFacts("1", hex64("5a"), id, "10.1.0.7")
		if !st.PutRuntimePod(p) || !st.PutRuntimeContainer(c) {
			t.Fatal("facts refused")
		}
		find := func(name string, deleted bool) map[string]string {
			got := map[string]string{}
			_, ms, err := st.FindContainer(id[:12], deleted)
			if err != nil {
				t.Fatal(err)
			}
			got["container"] = describe(ms)
			_, ms = st.FindIP(netip.MustParseAddr("10.1.0.7"), deleted)
			got["ip"] = describe(ms)
			_, ms = st.FindPod(p.UID, id, deleted)
			got["uid"] = describe(ms)
			_, ms = st.FindCgroup("0::/../custom/"+p.SandboxID+"/"+id, deleted)
			got["cgroup"] = describe(ms)
			_, ms = st.FindPID(4242, deleted)
			got["pid"] = describe(ms)
			return got
		}
		check := func(step string, deleted bool, want string) {
			t.Helper()
			for key, got := range find(step, deleted) {
				w := want
				if key == "ip" || key == "cgroup" && strings.Contains(want, "none") {
					w = strings.TrimSuffix(want, "/app")
				}
				if key == "ip" {
					w = strings.ReplaceAll(w, "/app", "")
				}
				if key == "pid" && strings.HasPrefix(step, "removed") {
					w = "" // a removed container's PID is no longer its own
				}
				if got != w {
					t.Errorf("%s: by %s = %q, want %q", step, key, got, w)
				}
			}
		}
		check("runtime only", false, "runtime:web-1/app")

		time.Sleep(3 * time.Second)
		st.Upsert(sourcePod("1", id, false))
		check("pod reported without the container", false, "source:web-1/app")
		st.Upsert(sourcePod("1", id, true))
		if len(delays) != 1 || delays[0] != 3*time.Second {
			t.Errorf("delays = %v, want [3s]", delays)
		}
		st.Delete("uid-1")
		check("pod deleted by the source", true, "source:web-1/app(deleted)")

		// A pod the source never reported, removed by the runtime: found
		// as deleted for the retention, then forgotten.
		st2 := store.New(store.WithDeletedPods(time.Minute, 0, 0))
		st2.PutRuntimePod(p)
		st2.PutRuntimeContainer(c)
		st2.RemoveRuntimePod(p.SandboxID)
		st = st2
		check("removed", false, "")
		check("removed, deleted", true, "runtime:web-1/app(deleted)")
		time.Sleep(time.Minute)
		check("expired", true, "")
		if pods, containers, bytes := st.RuntimeLen(); pods+containers != 0 || bytes != 0 {
			t.Errorf("after expiry: %d pods, %d containers, %d bytes kept", pods, containers, bytes)
		}
	})
}

func TestSyncRuntimeDropsVanished(t *testing.T) {
	st := store.New()
	p1, c1 := runtimeFacts("1", hex64("51"), hex64("c1"), "10.1.0.1")
	p2, c2 := runtimeFacts("2", hex64("52"), hex64("c2"), "10.1.0.2")
	st.SyncRuntime([]store.RuntimePod{p1, p2}, []store.RuntimeContainer{c1, c2})
	st.SyncRuntime([]store.RuntimePod{p2}, []store.RuntimeContainer{c2})
	if _, ms, _ := st.FindContainer(c1.ID, false); len(ms) != 0 {
		t.Errorf("vanished container found: %s", describe(ms))
	}
	if _, ms, _ := st.FindContainer(c1.ID, true); describe(ms) != "runtime:web-1/app(deleted)" {
		t.Errorf("vanished container with deleted: %q", describe(ms))
	}
	if _, ms, _ := st.FindContainer(c2.ID, false); describe(ms) != "runtime:web-2/app" {
		t.Errorf("listed container: %q", describe(ms))
	}
}

func TestRuntimeFactsBounded(t *testing.T) {
	b := budget.New(1 << 30)
	st := store.New(store.WithRuntimeFacts(64<<10), store.WithBudget(b))
	refused := 0
	for i := range 1000 {
		p, c := runtimeFacts(fmt.Sprint(i), fmt.Sprintf("%064x", i), fmt.Sprintf("c%063x", i), "10.2.0.1")
		if !st.PutRuntimePod(p) {
			refused++
		}
		if !st.PutRuntimeContainer(c) {
			refused++
		}
	}
	_, _, bytes := st.RuntimeLen()
	if bytes > 64<<10 || refused == 0 || uint64(refused) != st.RuntimeRefused() {
		t.Errorf("kept %d bytes (bound %d), refused %d (store says %d)", bytes, 64<<10, refused, st.RuntimeRefused())
	}
	if used := b.Used(budget.Runtime); used != bytes {
		t.Errorf("budget counts %d bytes, the store %d", used, bytes)
	}
}
