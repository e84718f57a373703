package bench

import (
	"runtime"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/podsapi/podsapi/fieldmask"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// microResult is one in-process micro-benchmark.
type microResult struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"nsPerOp"`
	AllocsPerOp float64 `json:"allocsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	Ops         int     `json:"ops"`
}

// timeIt runs f for about d (at least 3 times) and reports its cost.
func timeIt(name string, d time.Duration, f func()) microResult {
	f() // warm up
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	n := 0
	for n < 3 || (time.Since(start) < d && n < 1_000_000) {
		f()
		n++
	}
	el := time.Since(start)
	runtime.ReadMemStats(&m1)
	return microResult{Name: name, Ops: n, NsPerOp: float64(el.Nanoseconds()) / float64(n),
		AllocsPerOp: float64(m1.Mallocs-m0.Mallocs) / float64(n), BytesPerOp: float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n)}
}

// listBytes returns the PodListResponse encoding of pods, trimmed by mask.
func listBytes(pods []*corev1.Pod, mask *fieldmask.Mask) []byte {
	var out []byte
	for _, p := range pods {
		out, _ = marshalA(out, p, mask)
	}
	return out
}

var sink any

// runMicro measures client decoding of our responses, and the cost of
// building a ListPods response the way we do (from bytes encoded once) and
// the way baseline A does (Marshal per request), in this process.
func runMicro(d time.Duration) []microResult {
	pods := benchPods(110)
	mask, _ := fieldmask.Parse(splitPaths(ListMask)...)
	full := listBytes(pods, nil)
	masked := listBytes(pods, mask)
	var out []microResult

	out = append(out, timeIt("decode list 110 full: protobuf-go gen", d, func() {
		var m podsv1alpha1.PodListResponse
		if err := proto.Unmarshal(full, &m); err != nil {
			panic(err)
		}
		sink = &m
	}))
	out = append(out, timeIt("decode list 110 full: k8s.io/api Unmarshal", d, func() {
		sink = decodeK8s(full)
	}))
	out = append(out, timeIt("decode list 110 masked: protobuf-go gen", d, func() {
		var m podsv1alpha1.PodListResponse
		if err := proto.Unmarshal(masked, &m); err != nil {
			panic(err)
		}
		sink = &m
	}))
	out = append(out, timeIt("decode list 110 masked: k8s.io/api Unmarshal", d, func() {
		sink = decodeK8s(masked)
	}))
	// Baseline B's client: JSON into a v1.PodList.
	scheme := k8sruntime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	list := &corev1.PodList{}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	js, _ := k8sruntime.Encode(codecs.LegacyCodec(schema.GroupVersion{Version: "v1"}), list)
	dec := codecs.UniversalDeserializer()
	out = append(out, timeIt("decode /pods 110 JSON: k8s.io/api PodList", d, func() {
		obj, _, err := dec.Decode(js, nil, nil)
		if err != nil {
			panic(err)
		}
		sink = obj
	}))

	// Server side: building the response body.
	raws := make([][]byte, len(pods))
	for i, p := range pods {
		raws[i], _ = p.Marshal()
	}
	out = append(out, timeIt("build list 110 full: ours (cached bytes)", d, func() {
		size := 0
		for _, r := range raws {
			size += protowire.SizeTag(1) + protowire.SizeBytes(len(r))
		}
		b := make([]byte, 0, size)
		for _, r := range raws {
			b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), r)
		}
		sink = b
	}))
	out = append(out, timeIt("build list 110 full: baselineA (Marshal)", d, func() {
		sink = listBytes(pods, nil)
	}))
	out = append(out, timeIt("build list 110 masked: baselineA (Marshal+mask)", d, func() {
		sink = listBytes(pods, mask)
	}))
	sink = nil
	return out
}

func decodeK8s(b []byte) []*corev1.Pod {
	var pods []*corev1.Pod
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			panic("bad tag")
		}
		b = b[l:]
		if n != 1 || t != protowire.BytesType {
			l = protowire.ConsumeFieldValue(n, t, b)
			b = b[l:]
			continue
		}
		v, l := protowire.ConsumeBytes(b)
		b = b[l:]
		p := new(corev1.Pod)
		if err := p.Unmarshal(v); err != nil {
			panic(err)
		}
		pods = append(pods, p)
	}
	return pods
}

func splitPaths(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
