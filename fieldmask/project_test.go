package fieldmask_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	metav1pb "github.com/podsapi/podsapi/gen/k8s.io/apimachinery/pkg/apis/meta/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
)

// num returns the number of the field of msg called name.
func num(msg proto.Message, name string) protowire.Number {
	fd := msg.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name)
	}
	return fd.Number()
}

// Field numbers used to craft encodings by hand.
var (
	podMetadata        = num(&corev1pb.Pod{}, "metadata")
	podSpec            = num(&corev1pb.Pod{}, "spec")
	podStatus          = num(&corev1pb.Pod{}, "status")
	metaName           = num(&metav1pb.ObjectMeta{}, "name")
	metaLabels         = num(&metav1pb.ObjectMeta{}, "labels")
	specSecurity       = num(&corev1pb.PodSpec{}, "securityContext")
	securityGroups     = num(&corev1pb.PodSecurityContext{}, "supplementalGroups")
	statusPhase        = num(&corev1pb.PodStatus{}, "phase")
	statusPodIPs       = num(&corev1pb.PodStatus{}, "podIPs")
	statusContainerSts = num(&corev1pb.PodStatus{}, "containerStatuses")
)

// wire helpers, to build encodings by hand.
func tagBytes(n protowire.Number, v ...[]byte) []byte {
	b := protowire.AppendTag(nil, n, protowire.BytesType)
	return protowire.AppendBytes(b, bytes.Join(v, nil))
}

func tagVarint(n protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// podEncodings returns differently encoded pods that every mask must project
// like the reference does.
func podEncodings(t testing.TB) map[string][]byte {
	rich := marshalPod(t, richPod())
	var decoded corev1pb.Pod
	if err := proto.Unmarshal(rich, &decoded); err != nil {
		t.Fatal(err)
	}
	protoGo, err := proto.MarshalOptions{Deterministic: true}.Marshal(&decoded)
	if err != nil {
		t.Fatal(err)
	}
	label := func(k, v string) []byte {
		return tagBytes(metaLabels, tagBytes(1, []byte(k)), tagBytes(2, []byte(v)))
	}
	return map[string][]byte{
		"rich pod":          rich,
		"empty k8s pod":     marshalPod(t, &corev1.Pod{}),
		"no bytes at all":   {},
		"protobuf-go bytes": protoGo,
		"metadata only":     marshalPod(t, &corev1.Pod{ObjectMeta: richPod().ObjectMeta}),
		"unknown fields": cat(rich,
			tagVarint(999, 7),
			tagBytes(podStatus, tagBytes(9999, []byte("x")), tagBytes(statusPhase, []byte("Failed"))),
			tagBytes(podMetadata, protowire.AppendFixed32(protowire.AppendTag(nil, 77777, protowire.Fixed32Type), 42),
				tagBytes(metaName, []byte("renamed"))),
			protowire.AppendTag(nil, 4242, protowire.StartGroupType), tagVarint(1, 1), protowire.AppendTag(nil, 4242, protowire.EndGroupType),
		),
		"wire type mismatches": cat(rich,
			tagVarint(podMetadata, 5),
			tagBytes(podStatus,
				tagVarint(statusPhase, 3),
				protowire.AppendFixed64(protowire.AppendTag(nil, statusPodIPs, protowire.Fixed64Type), 1),
				tagVarint(statusContainerSts, 1)),
		),
		"packed repeated scalar": cat(rich,
			tagBytes(podSpec, tagBytes(specSecurity, tagBytes(securityGroups, protowire.AppendVarint([]byte{5}, 300)))),
		),
		"non-minimal varints": cat(rich,
			[]byte{byte(podStatus<<3 | 2 | 0x80), 0x00, 0x89, 0x00}, // status tag and length 9, both in two bytes
			tagBytes(statusPhase, []byte("Pending")),
		),
		"repeated singular messages merge": cat(rich,
			tagBytes(podMetadata, tagBytes(metaName, []byte("second")), label("extra", "yes")),
			tagBytes(podStatus),
		),
	}
}

// projectionMasks are the masks checked against the reference.
var projectionMasks = []string{
	"metadata.name,metadata.namespace,metadata.uid,status.phase,status.podIPs",
	"status.containerStatuses.ready",
	"metadata.labels",
	"metadata.labels,metadata.annotations",
	"spec.containers.resources",
	"status.containerStatuses.state.terminated.exitCode",
	"status.containerStatuses.state.terminated.exitCode,status.containerStatuses.name,status.initContainerStatuses.state",
	"status.containerStatuses.lastState.terminated.reason",
	"metadata",
	"spec",
	"status",
	"metadata,spec,status",
	"status.conditions.type,status.conditions.status",
	"spec.containers.name,spec.containers.image,spec.initContainers.name",
	"spec.containers.env.valueFrom.fieldRef.fieldPath",
	"spec.containers.livenessProbe.handler.httpGet.port",
	"spec.containers.readinessProbe.handler.httpGet.port.strVal",
	"spec.volumes.volumeSource.emptyDir.sizeLimit",
	"spec.volumes.volumeSource.configMap.localObjectReference.name",
	"spec.volumes.name,spec.volumes.volumeSource.projected.sources.serviceAccountToken.path",
	"spec.securityContext.supplementalGroups",
	"spec.nodeName,spec.nodeSelector,spec.tolerations",
	"metadata.ownerReferences.controller,metadata.ownerReferences.uid",
	"metadata.creationTimestamp.seconds",
	"status.hostIPs.ip,status.startTime",
	"spec.affinity.nodeAffinity",
	"spec.ephemeralContainers.ephemeralContainerCommon.name,status.resize",
}

func TestProjectMatchesReference(t *testing.T) {
	for podName, src := range podEncodings(t) {
		for _, paths := range projectionMasks {
			t.Run(podName+"/"+paths, func(t *testing.T) {
				m, err := fieldmask.Parse(strings.Split(paths, ",")...)
				if err != nil {
					t.Fatal(err)
				}
				out, err := m.AppendProjection(nil, src)
				if err != nil {
					t.Fatalf("AppendProjection: %v", err)
				}
				if len(out) > len(src) {
					t.Errorf("projection is %d bytes, longer than its %d-byte input", len(out), len(src))
				}
				got := project(t, m, src)
				want := referenceProject(t, m, src)
				if !proto.Equal(got, want) {
					t.Errorf("projection differs from the reference:\n got %v\nwant %v", got, want)
				}
			})
		}
	}
}

func TestProjectSemantics(t *testing.T) {
	pod := richPod()
	src := marshalPod(t, pod)
	parse := func(t *testing.T, paths ...string) *fieldmask.Mask {
		t.Helper()
		m, err := fieldmask.Parse(paths...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	t.Run("selected repeated message leaf keeps every element", func(t *testing.T) {
		got := project(t, parse(t, "status.containerStatuses.ready"), src)
		sts := got.GetStatus().GetContainerStatuses()
		if len(sts) != len(pod.Status.ContainerStatuses) {
			t.Fatalf("got %d container statuses, want %d", len(sts), len(pod.Status.ContainerStatuses))
		}
		for i, st := range sts {
			want := &corev1pb.ContainerStatus{Ready: proto.Bool(pod.Status.ContainerStatuses[i].Ready)}
			if !proto.Equal(st, want) {
				t.Errorf("containerStatuses[%d] = %v, want %v", i, st, want)
			}
		}
		if got.GetMetadata() != nil || got.GetSpec() != nil || got.GetStatus().Phase != nil {
			t.Errorf("unselected fields kept: %v", got)
		}
	})

	t.Run("empty submessages keep their presence", func(t *testing.T) {
		got := project(t, parse(t, "status.containerStatuses.state.terminated.exitCode"), src)
		sts := got.GetStatus().GetContainerStatuses()
		if len(sts) != 4 {
			t.Fatalf("got %d container statuses, want 4", len(sts))
		}
		for i, st := range sts {
			if st.State == nil {
				t.Errorf("containerStatuses[%d].state is absent, want present", i)
			}
			if term := st.GetState().GetTerminated(); (term != nil) != (i == 2) {
				t.Errorf("containerStatuses[%d].state.terminated = %v", i, term)
			}
		}
		want := &corev1pb.ContainerStateTerminated{ExitCode: proto.Int32(137)}
		if term := sts[2].GetState().GetTerminated(); !proto.Equal(term, want) {
			t.Errorf("terminated = %v, want %v", term, want)
		}
	})

	t.Run("absent selected message stays absent", func(t *testing.T) {
		got := project(t, parse(t, "spec.affinity.nodeAffinity"), src)
		if got.Spec == nil {
			t.Errorf("spec is absent, want present and empty")
		}
		if diff := protoDiff(got, &corev1pb.Pod{Spec: &corev1pb.PodSpec{}}); diff != "" {
			t.Errorf("projection (-got +want):\n%s", diff)
		}
	})

	t.Run("whole map", func(t *testing.T) {
		got := project(t, parse(t, "metadata.labels"), src)
		want := &corev1pb.Pod{Metadata: &metav1pb.ObjectMeta{Labels: pod.Labels}}
		if diff := protoDiff(got, want); diff != "" {
			t.Errorf("projection (-got +want):\n%s", diff)
		}
	})

	t.Run("every field is the identity", func(t *testing.T) {
		out, err := parse(t, "metadata", "spec", "status").AppendProjection(nil, src)
		if err != nil || !bytes.Equal(out, src) {
			t.Errorf("AppendProjection = %d bytes, %v; want the %d input bytes", len(out), err, len(src))
		}
	})

	t.Run("unknown fields are dropped", func(t *testing.T) {
		m := parse(t, "metadata.name", "status")
		want, err := m.AppendProjection(nil, src)
		if err != nil {
			t.Fatal(err)
		}
		withUnknown := cat(tagVarint(999, 1), src, tagBytes(12345, []byte("junk")))
		got, err := m.AppendProjection(nil, withUnknown)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendProjection with unknown fields = %x, %v; want %x", got, err, want)
		}
	})

	t.Run("appends to dst", func(t *testing.T) {
		m := parse(t, "status.phase")
		out, err := m.AppendProjection([]byte("prefix"), src)
		if err != nil {
			t.Fatal(err)
		}
		want := cat([]byte("prefix"), tagBytes(podStatus, tagBytes(statusPhase, []byte("Running"))))
		if !bytes.Equal(out, want) {
			t.Errorf("AppendProjection = %q, want %q", out, want)
		}
	})

	t.Run("no allocation with a large enough dst", func(t *testing.T) {
		m := parse(t, "metadata.name", "metadata.labels", "status.containerStatuses.state", "spec.containers.resources")
		dst := make([]byte, 0, len(src))
		allocs := testing.AllocsPerRun(100, func() {
			out, err := m.AppendProjection(dst, src)
			if err != nil || &out[:1][0] != &dst[:1][0] {
				t.Fatalf("AppendProjection reallocated or failed: %v", err)
			}
		})
		if allocs != 0 {
			t.Errorf("AppendProjection allocated %v times, want 0", allocs)
		}
	})
}

// protoPrefix is how protobuf-go's error texts start, spelled with a plain space.
const protoPrefix = "proto: "

func TestProjectMalformed(t *testing.T) {
	rich := marshalPod(t, richPod())
	maskPaths := []string{"metadata.name", "status.containerStatuses.state.terminated.exitCode"}
	m, err := fieldmask.Parse(maskPaths...)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		src     []byte
		wantErr string
	}{
		{"truncated tag", []byte{0x80}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 0: unexpected EOF"},
		{"field number zero", []byte{0x00, 0x00}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 0: invalid field number 0"},
		{"field number too large", protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3),
			"fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 0: invalid field number 536870912"},
		{"varint overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
			"fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 0: " + protoPrefix + "variable length integer overflow"},
		{"length past the end", []byte{0x1a, 0x05, 0x0a}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 1: unexpected EOF"},
		{"dropped field past the end", []byte{0x12, 0x05, 0x0a}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 1: unexpected EOF"},
		{"truncated fixed64", []byte{0x79, 0x01, 0x02}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 1: unexpected EOF"},
		{"stray end group", []byte{0x0c}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 1: " + protoPrefix + "mismatching end group marker"},
		{"unterminated group", []byte{0x0b, 0x08, 0x01}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 1: unexpected EOF"},
		{"reserved wire type", []byte{0x0e}, "fieldmask: malformed k8s.io.api.core.v1.Pod encoding at byte 1: " + protoPrefix + "cannot parse reserved wire type"},
		{"malformed inside a projected message", cat(tagBytes(podStatus, tagBytes(statusPhase, []byte("Running"))), tagBytes(podMetadata, []byte{0x0a, 0x09, 'x'})),
			"fieldmask: malformed k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta encoding at byte 14: unexpected EOF"},
		{"malformed deep inside", tagBytes(podStatus, tagBytes(statusContainerSts, tagBytes(num(&corev1pb.ContainerStatus{}, "state"), []byte{0xff}))),
			"fieldmask: malformed k8s.io.api.core.v1.ContainerState encoding at byte 6: unexpected EOF"},
		{"rich pod cut short", rich[:len(rich)-1], "fieldmask: malformed k8s.io.api.core.v1."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := m.AppendProjection(dst, tt.src)
			// protobuf-go's own error texts vary their spacing on purpose.
			if err == nil || !strings.HasPrefix(strings.ReplaceAll(err.Error(), "proto:\u00a0", protoPrefix), tt.wantErr) {
				t.Fatalf("AppendProjection(%x) = %x, %v; want error starting with %q", tt.src, out, err, tt.wantErr)
			}
			if string(out) != "keep" {
				t.Errorf("AppendProjection returned dst %q with its error, want %q", out, "keep")
			}
			if uerr := proto.Unmarshal(tt.src, &corev1pb.Pod{}); uerr == nil && tt.name != "field number too large" {
				t.Errorf("proto.Unmarshal accepts this input that AppendProjection rejects")
			}
		})
	}

	t.Run("truncation errors wrap io.ErrUnexpectedEOF", func(t *testing.T) {
		_, err := m.AppendProjection(nil, []byte{0x1a, 0x05})
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("error %v does not wrap io.ErrUnexpectedEOF", err)
		}
	})

	t.Run("bytes inside verbatim copies are not validated", func(t *testing.T) {
		whole, err := fieldmask.Parse("metadata")
		if err != nil {
			t.Fatal(err)
		}
		src := tagBytes(podMetadata, []byte{0x0a, 0x09, 'x'})
		out, err := whole.AppendProjection(nil, src)
		if err != nil || !bytes.Equal(out, src) {
			t.Errorf("AppendProjection = %x, %v; want %x", out, err, src)
		}
	})

	t.Run("every prefix of a pod", func(t *testing.T) {
		// Each prefix is either rejected or projected like the reference.
		for i := range len(rich) {
			prefix := rich[:i]
			out, err := m.AppendProjection(nil, prefix)
			if proto.Unmarshal(prefix, &corev1pb.Pod{}) != nil {
				continue
			}
			if err != nil {
				t.Fatalf("prefix %d: proto.Unmarshal accepts it but AppendProjection fails: %v", i, err)
			}
			var got corev1pb.Pod
			if err := proto.Unmarshal(out, &got); err != nil {
				t.Fatalf("prefix %d: undecodable projection: %v", i, err)
			}
			if want := referenceProject(t, m, prefix); !proto.Equal(&got, want) {
				t.Fatalf("prefix %d: projection differs from the reference", i)
			}
		}
	})
}

func TestConcurrentProjection(t *testing.T) {
	src := marshalPod(t, richPod())
	m, err := fieldmask.Parse("metadata.name", "status.containerStatuses.ready", "spec.containers.resources")
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.AppendProjection(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var buf []byte
			for range 200 {
				out, err := m.AppendProjection(buf[:0], src)
				if err != nil || !bytes.Equal(out, want) {
					t.Errorf("concurrent AppendProjection = %x, %v", out, err)
					return
				}
				buf = out
				_ = m.Key()
				_ = m.Paths()
			}
		})
	}
	wg.Wait()
}

// protoDiff shows two messages that differ, or returns "" if they are equal.
func protoDiff(got, want proto.Message) string {
	if proto.Equal(got, want) {
		return ""
	}
	return "-" + prototext.Format(got) + "\n+" + prototext.Format(want)
}
