package fieldmask_test

import (
	"strings"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"google.golang.org/protobuf/proto"
)

// benchPaths is the typical list-and-watch mask of a node agent.
var benchPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "status.phase", "status.podIPs"}

func benchSetup(b *testing.B) (*fieldmask.Mask, []byte) {
	b.Helper()
	m, err := fieldmask.Parse(benchPaths...)
	if err != nil {
		b.Fatal(err)
	}
	return m, marshalPod(b, richPod())
}

// BenchmarkProject projects the encoded pod into a reused buffer, as the
// server does for each watcher.
func BenchmarkProject(b *testing.B) {
	m, src := benchSetup(b)
	dst := make([]byte, 0, len(src))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = m.AppendProjection(dst[:0], src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(dst)), "out-bytes")
}

// BenchmarkCloneAndFilter is the reflective reference on a pod the server
// would keep decoded: clone it, clear the unselected fields, encode.
func BenchmarkCloneAndFilter(b *testing.B) {
	m, src := benchSetup(b)
	var pod corev1pb.Pod
	if err := proto.Unmarshal(src, &pod); err != nil {
		b.Fatal(err)
	}
	tree := newRefTree(m)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		clone := proto.CloneOf(&pod)
		referenceFilter(clone.ProtoReflect(), tree)
		if _, err := proto.Marshal(clone); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFilterEncode is the reflective reference from the stored
// bytes to the masked bytes, the job that AppendProjection does.
func BenchmarkDecodeFilterEncode(b *testing.B) {
	m, src := benchSetup(b)
	tree := newRefTree(m)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		var pod corev1pb.Pod
		if err := proto.Unmarshal(src, &pod); err != nil {
			b.Fatal(err)
		}
		referenceFilter(pod.ProtoReflect(), tree)
		if _, err := proto.Marshal(&pod); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse validates, normalizes and compiles the typical mask.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fieldmask.Parse(benchPaths...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProjectNested projects through repeated messages at three levels.
func BenchmarkProjectNested(b *testing.B) {
	m, err := fieldmask.Parse("metadata.labels", "spec.containers.resources", "status.containerStatuses.state.terminated.exitCode")
	if err != nil {
		b.Fatal(err)
	}
	src := marshalPod(b, richPod())
	dst := make([]byte, 0, len(src))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if dst, err = m.AppendProjection(dst[:0], src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(dst)), "out-bytes")
}

// shapeBenchPaths are the same four fields in the JSON shape and the proto
// shape of a pod.
var shapeBenchPaths = map[string][]string{
	"json":  {"metadata.name", "spec.volumes.emptyDir", "spec.containers.livenessProbe.httpGet", "spec.ephemeralContainers.name"},
	"proto": {"metadata.name", "spec.volumes.volumeSource.emptyDir", "spec.containers.livenessProbe.handler.httpGet", "spec.ephemeralContainers.ephemeralContainerCommon.name"},
}

// BenchmarkParseShape parses paths through embedded structs, spelled in each
// shape.
func BenchmarkParseShape(b *testing.B) {
	for _, shape := range []string{"json", "proto"} {
		b.Run(shape, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fieldmask.Parse(shapeBenchPaths[shape]...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseUnknown is the cost of rejecting a path with a suggestion:
// a typo, and a 1 KB path of unknown elements.
func BenchmarkParseUnknown(b *testing.B) {
	for name, path := range map[string]string{
		"typo": "spec.contaners.livenessProbe.probeHandler.httpGet",
		"1KB":  strings.Repeat("spec.", fieldmask.MaxPathLength/5),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fieldmask.Parse(path); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
