package fieldmask_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
)

// FuzzParse parses comma-separated path lists. Parse must never panic, its
// errors must stay short, and a mask it accepts must round-trip through
// Paths.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", ".", ",", "metadata", "metadata.name", "metadata.name,metadata", "status..phase", ".status", "status.",
		"status.fooBar", "metadata.labels", "metadata.labels.app", "metadata.name.first",
		"status.containerStatuses.ready", "status.containerStatuses.state.terminated.exitCode,status.containerStatuses",
		"spec.containers.resources.limits.cpu", "spec.volumes.volumeSource.emptyDir.sizeLimit",
		"metadata.name,metadata.namespace,metadata.uid,status.phase,status.podIPs", "status.\xff", " metadata ",
		"spec.volumes.emptyDir", "spec.volumes.configMap.name,spec.volumes.volumeSource", "spec.containers.livenessProbe.httpGet.port",
		"spec.ephemeralContainers.env.valueFrom.secretKeyRef.name", "kind", "spec.nodname", "Status.Container_Statuses.restartcount",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = fieldmask.FromHeader(http.Header{fieldmask.Header: {s}})
		m, err := fieldmask.Parse(strings.Split(s, ",")...)
		if err != nil {
			if m != nil {
				t.Fatalf("Parse(%q) returned a mask with error %v", s, err)
			}
			if len(err.Error()) > 2048 {
				t.Fatalf("Parse(%q) error is %d bytes long", s, len(err.Error()))
			}
			return
		}
		paths := m.Paths()
		if len(paths) == 0 || !slices.IsSorted(paths) {
			t.Fatalf("Parse(%q).Paths() = %q, want sorted and non-empty", s, paths)
		}
		for i := 1; i < len(paths); i++ {
			if paths[i] == paths[i-1] || strings.HasPrefix(paths[i], paths[i-1]+".") {
				t.Fatalf("Parse(%q).Paths() = %q is not normalized", s, paths)
			}
		}
		again, err := fieldmask.Parse(paths...)
		if err != nil {
			t.Fatalf("Parse(Parse(%q).Paths()): %v", s, err)
		}
		if again.Key() != m.Key() || !slices.Equal(again.Paths(), paths) {
			t.Fatalf("Paths() of %q do not round-trip: %q then %q", s, paths, again.Paths())
		}
		if _, err := m.AppendProjection(nil, nil); err != nil {
			t.Fatalf("projecting the empty pod: %v", err)
		}
	})
}

// fuzzMask is the fixed mask of FuzzProject: it descends through singular
// and repeated messages, and selects scalars, messages, maps and lists.
var fuzzMask = []string{
	"metadata.name", "metadata.labels", "metadata.ownerReferences.uid",
	"spec.containers.resources", "spec.containers.name", "spec.securityContext.supplementalGroups",
	"status.phase", "status.podIPs", "status.containerStatuses.state.terminated.exitCode",
}

// FuzzProject projects arbitrary bytes with a fixed mask. AppendProjection
// must never panic, and whenever proto.Unmarshal accepts the input the
// projection must succeed and equal the reference.
func FuzzProject(f *testing.F) {
	rich := marshalPod(f, richPod())
	f.Add(rich)
	f.Add(marshalPod(f, &corev1.Pod{}))
	f.Add([]byte{})
	f.Add(rich[:len(rich)/2])
	f.Add(cat(rich, tagVarint(999, 1), tagBytes(podStatus, tagVarint(statusPhase, 3))))
	for _, src := range podEncodings(f) {
		f.Add(src)
	}
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Add([]byte{0x1a, 0x04, 0x42, 0x02, 0x0a, 0x00})
	f.Add([]byte{0x0b, 0x0c})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3))

	m, err := fieldmask.Parse(fuzzMask...)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := m.AppendProjection(nil, src)
		if err == nil && len(out) > len(src) {
			t.Fatalf("projection is %d bytes, longer than its %d-byte input", len(out), len(src))
		}
		if proto.Unmarshal(src, &corev1pb.Pod{}) != nil {
			return
		}
		if err != nil {
			t.Fatalf("proto.Unmarshal accepts %x, but AppendProjection fails: %v", src, err)
		}
		var got corev1pb.Pod
		if err := proto.Unmarshal(out, &got); err != nil {
			t.Fatalf("projection %x of %x does not decode: %v", out, src, err)
		}
		if want := referenceProject(t, m, src); !proto.Equal(&got, want) {
			t.Fatalf("projection of %x differs from the reference:\n%s", src, protoDiff(&got, want))
		}
	})
}
