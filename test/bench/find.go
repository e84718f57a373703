package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// methodFind is the procedure of FindPods.
const methodFind = "/kubelet.pods.v1alpha1.Pods/FindPods"

// findPID is the process of the fake --host-proc the find measurements
// look up: a process of the app container of the middle pod.
const findPID = 4242

// findResults are the measurements of issue 22.
type findResults struct {
	// IndexBytesPerPod is the heap the container-ID and IP index holds per
	// pod, at Pods pods.
	IndexBytesPerPod float64 `json:"indexBytesPerPod"`
	Pods             int     `json:"pods"`
	// Costs are in-process costs of /proc lookups.
	Costs []microResult `json:"costs"`
}

// findRequest returns the encoded PodFindRequest with field set to v (a
// string, or an int32 for pid, or true for caller).
func findRequest(field protowire.Number, v any) []byte {
	var b []byte
	switch v := v.(type) {
	case string:
		b = protowire.AppendString(protowire.AppendTag(b, field, protowire.BytesType), v)
	case int32:
		b = protowire.AppendVarint(protowire.AppendTag(b, field, protowire.VarintType), uint64(v))
	case bool:
		b = protowire.AppendVarint(protowire.AppendTag(b, field, protowire.VarintType), 1)
	}
	return b
}

// findProc writes a fake --host-proc under dir whose processes findPID and
// self (the harness, the peer of its calls) run in the app container of
// pod, with the systemd driver's cgroup v2 line, and returns it.
func findProc(dir string, pod *corev1.Pod, self int) (string, error) {
	line := podstest.SystemdCgroup(pod.UID, store.TrimRuntime(pod.Status.ContainerStatuses[0].ContainerID)) + "\n"
	return podstest.WriteHostProc(filepath.Join(dir, "hostproc"), map[int]string{findPID: line, self: line})
}

// runFind measures FindPods by each key against GetPod of the same pod on
// one server child of n pods, paced, and returns the rows ("find:<key>",
// "find:get"); then, in this process, the memory of the index and the cost
// of a /proc lookup.
func runFind(ctx context.Context, co childOptions, n int, pace, d time.Duration, minCount int) ([]Row, *findResults, error) {
	pods := benchPods(n)
	pod := pods[n/2]
	proc, err := findProc(co.dir, pod, os.Getpid())
	if err != nil {
		return nil, nil, err
	}
	c, err := startChild(ctx, co, ImplOurs, n, "--host-proc", proc)
	if err != nil {
		return nil, nil, err
	}
	defer c.stop()
	id := store.TrimRuntime(pod.Status.ContainerStatuses[0].ContainerID)
	cgroup, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(findPID), "cgroup"))
	if err != nil {
		return nil, nil, err
	}
	var rows []Row
	for _, m := range []struct {
		op     string
		method string
		req    []byte
	}{
		{"find:get", methodGet, getRequest(n)},
		{"find:container-id", methodFind, findRequest(1, "containerd://"+id)},
		{"find:container-prefix", methodFind, findRequest(1, id[:60])},
		{"find:ip", methodFind, findRequest(2, pod.Status.PodIP)},
		{"find:cgroup", methodFind, findRequest(4, strings.TrimSpace(string(cgroup)))},
		{"find:pid", methodFind, findRequest(3, int32(findPID))},
		{"find:caller", methodFind, findRequest(5, true)},
	} {
		r, err := load(ctx, c, grpcUnary(c.socket, m.method, "", m.req), 1, d, minCount, 1_000_000, pace)
		if err != nil {
			return rows, nil, fmt.Errorf("%s: %w", m.op, err)
		}
		rows = append(rows, Row{Op: m.op, Impl: ImplOurs, Pods: n, K: 1, loadResult: r})
	}
	fr := &findResults{Pods: n, IndexBytesPerPod: indexBytesPerPod(n)}
	fr.Costs = procCosts(proc, d)
	return rows, fr, nil
}

// indexBytesPerPod returns the heap the index holds per pod at n pods: the
// heap of a store of n pods, less that of a store of the same pods without
// container IDs and IPs, less the difference of their encodings (which the
// store keeps either way), per pod.
func indexBytesPerPod(n int) float64 {
	heap := func(keys bool) (uint64, int) {
		st := store.New()
		raw := 0
		for _, p := range benchPods(n) {
			if !keys {
				p.Status.PodIP, p.Status.PodIPs = "", nil
				for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
					for i := range statuses {
						statuses[i].ContainerID = ""
						if t := statuses[i].State.Terminated; t != nil {
							t.ContainerID = ""
						}
					}
				}
			}
			raw += p.Size()
			st.Upsert(p)
		}
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		runtime.KeepAlive(st)
		return m.HeapAlloc, raw
	}
	// Either order twice, the smaller of each: the GC's noise is tens of
	// KiB.
	var with, without uint64 = ^uint64(0), ^uint64(0)
	var rawWith, rawWithout int
	for range 2 {
		h, r := heap(false)
		without, rawWithout = min(without, h), r
		h, r = heap(true)
		with, rawWith = min(with, h), r
	}
	return (float64(with) - float64(without) - float64(rawWith-rawWithout)) / float64(n)
}

// procCosts times the lookups of a process's pod from its cgroups: a read
// of the fake tree under proc (a file on the harness's file system), of
// this process's own /proc/self/cgroup (the kernel's), and Parse alone.
func procCosts(proc string, d time.Duration) []microResult {
	ctx := context.Background()
	fake, real := podcgroup.NewReader(proc), podcgroup.NewReader("")
	line, _ := os.ReadFile(filepath.Join(proc, strconv.Itoa(findPID), "cgroup"))
	self := os.Getpid()
	return []microResult{
		timeIt("podcgroup.Reader.Read, fake --host-proc", d, func() { sink, _ = fake.Read(ctx, findPID) }),
		timeIt("podcgroup.Reader.Read, /proc (this process)", d, func() { sink, _ = real.Read(ctx, self) }),
		timeIt("podcgroup.Parse, a systemd cgroup v2 line", d, func() { sink, _ = podcgroup.Parse(string(line)) }),
	}
}

// findTable shows the FindPods measurements against GetPod.
func findTable(r *Results) string {
	var sb strings.Builder
	sb.WriteString("| key | pods | median | p99 | bytes/resp | server CPU/req | allocs/req | median ÷ GetPod | CPU ÷ GetPod |\n")
	sb.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Rows {
		if !strings.HasPrefix(x.Op, "find:") {
			continue
		}
		get := r.row("find:get", ImplOurs, x.Pods, 1)
		fmt.Fprintf(&sb, "| %s | %d | %s | %s | %s | %s | %.0f | %s | %s |\n", strings.TrimPrefix(x.Op, "find:"), x.Pods,
			fmtUs(x.MedianUs), fmtUs(x.P99Us), fmtBytes(x.Bytes), fmtUs(x.CPUUs), x.Allocs, ratio(x.MedianUs, get, med), ratio(x.CPUUs, get, cpu))
	}
	if f := r.Find; f != nil {
		fmt.Fprintf(&sb, "\nIndex of container IDs and IPs: %.0f B per pod at %d pods (heap of the store less that of the same pods without IDs and IPs, less the difference of their encodings).\n\n", f.IndexBytesPerPod, f.Pods)
		sb.WriteString("| /proc lookup | time/op | allocs/op | B/op |\n|---|---:|---:|---:|\n")
		for _, m := range f.Costs {
			fmt.Fprintf(&sb, "| %s | %.1f µs | %.0f | %.0f |\n", m.Name, m.NsPerOp/1e3, m.AllocsPerOp, m.BytesPerOp)
		}
	}
	return sb.String()
}
