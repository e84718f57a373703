package manifest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fullResolve is the resolution the resolver must agree with, as the
// Source did it before the resolver: one greedy pass over all pods in file
// name and document order, where a pod wins if no earlier winner has its
// UID or its namespace and name. It returns the winners by UID and the
// duplicate keys, and how many pods it looked at.
func fullResolve(files map[string][]*corev1.Pod) (map[types.UID]placement, map[duplicateKey]struct{}, int) {
	want := make(map[types.UID]placement)
	byName := make(map[string]bool)
	dups := make(map[duplicateKey]struct{})
	steps := 0
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for _, pod := range files[name] {
			steps++
			nsName := pod.Namespace + "/" + pod.Name
			if _, taken := want[pod.UID]; taken || byName[nsName] {
				dups[duplicateKey{file: name, uid: pod.UID, name: nsName}] = struct{}{}
				continue
			}
			want[pod.UID] = placement{file: name, pod: pod}
			byName[nsName] = true
		}
	}
	return want, dups, steps
}

func testPod(namespace, name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

// TestResolverMatchesFullResolve applies random file changes, rich in
// duplicate UIDs and names, and checks after each that the resolver's
// winners and duplicates are those of a full pass.
func TestResolverMatchesFullResolve(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		r := newResolver()
		files := make(map[string][]*corev1.Pod)
		for step := range 30 {
			name := fmt.Sprintf("f%d.yaml", rng.IntN(6))
			var pods []*corev1.Pod
			for range rng.IntN(4) {
				pods = append(pods, testPod("ns", fmt.Sprintf("p%d", rng.IntN(5)), types.UID(fmt.Sprintf("u%d", rng.IntN(5)))))
			}
			if len(pods) == 0 {
				delete(files, name)
			} else {
				files[name] = pods
			}
			r.setFile(name, pods)
			r.settle()
			want, wantDups, _ := fullResolve(files)
			if len(r.uidWin) != len(want) {
				t.Fatalf("round %d step %d: %d winners, want %d", round, step, len(r.uidWin), len(want))
			}
			for uid, p := range want {
				if w := r.uidWin[uid]; w == nil || w.pod != p.pod {
					t.Fatalf("round %d step %d: winner of %s is %v, want %s doc of %s", round, step, uid, w, p.file, p.pod.Name)
				}
			}
			if got := len(r.dups); got != len(wantDups) {
				t.Fatalf("round %d step %d: %d duplicate keys, want %d", round, step, got, len(wantDups))
			}
			for k := range wantDups {
				if r.dups[k] == 0 {
					t.Fatalf("round %d step %d: duplicate %v missing", round, step, k)
				}
			}
		}
	}
}

// TestBurstWorkIsLinear adds many files one event at a time, the worst
// case of a burst, and counts the pods decided: each pod once, where a full
// pass per event looks at n(n+1)/2.
func TestBurstWorkIsLinear(t *testing.T) {
	t.Parallel()
	const n = 20000
	r := newResolver()
	for i := range n {
		name := fmt.Sprintf("p-%05d.yaml", (i*7919)%n) // Out of name order.
		r.setFile(name, []*corev1.Pod{testPod("default", name, types.UID(name))})
		r.settle()
	}
	if r.steps != n {
		t.Errorf("decided %d pods for %d single-pod files added one by one, want %d", r.steps, n, n)
	}
	if len(r.uidWin) != n {
		t.Errorf("%d winners, want %d", len(r.uidWin), n)
	}
}

// BenchmarkBurst serves a burst of single-pod files added one event at a
// time, with the resolver and with a full pass per event (the old
// behaviour), in the same run:
//
//	go test -run '^$' -bench Burst -benchtime 1x ./source/manifest
func BenchmarkBurst(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			name := fmt.Sprintf("p-%05d", (i*7919)%n)
			pods[i] = testPod("default", name, types.UID(name))
		}
		b.Run(fmt.Sprintf("files=%d/resolver", n), func(b *testing.B) {
			for b.Loop() {
				r := newResolver()
				for _, p := range pods {
					r.setFile(p.Name+".yaml", []*corev1.Pod{p})
					r.settle()
				}
			}
		})
		b.Run(fmt.Sprintf("files=%d/full-pass", n), func(b *testing.B) {
			for b.Loop() {
				files := make(map[string][]*corev1.Pod)
				for _, p := range pods {
					files[p.Name+".yaml"] = []*corev1.Pod{p}
					fullResolve(files)
				}
			}
		})
	}
}
