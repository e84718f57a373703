package fieldmask_test

import (
	"strings"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// refTree is the selection of a mask, rebuilt from its public Paths for the
// reference implementation. A nil *refTree selects a field entirely.
type refTree map[protoreflect.Name]refTree

func newRefTree(m *fieldmask.Mask) refTree {
	t := refTree{}
	for _, p := range m.Paths() {
		cur := t
		elems := strings.Split(p, ".")
		for i, e := range elems {
			name := protoreflect.Name(e)
			if i == len(elems)-1 {
				cur[name] = nil
				break
			}
			next, ok := cur[name]
			if !ok {
				next = refTree{}
				cur[name] = next
			}
			cur = next
		}
	}
	return t
}

// referenceFilter is the reflective reference implementation of a mask: it
// clears every field of msg that the tree does not select, recursively, per
// element for repeated messages, and drops unknown fields of the messages it
// descends into.
func referenceFilter(msg protoreflect.Message, t refTree) {
	msg.SetUnknown(nil)
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		sub, selected := t[fd.Name()]
		switch {
		case !selected:
			msg.Clear(fd)
		case sub == nil:
			// selected entirely
		case fd.IsList():
			list := v.List()
			for i := range list.Len() {
				referenceFilter(list.Get(i).Message(), sub)
			}
		default:
			referenceFilter(v.Message(), sub)
		}
		return true
	})
}

// referenceProject decodes a pod, clones it and filters the clone: the slow,
// obviously correct projection that AppendProjection must agree with.
func referenceProject(tb testing.TB, m *fieldmask.Mask, src []byte) *corev1pb.Pod {
	tb.Helper()
	var pod corev1pb.Pod
	if err := proto.Unmarshal(src, &pod); err != nil {
		tb.Fatalf("reference: unmarshal: %v", err)
	}
	if m == nil {
		return &pod
	}
	clone := proto.CloneOf(&pod)
	referenceFilter(clone.ProtoReflect(), newRefTree(m))
	return clone
}

// project runs AppendProjection and decodes its result.
func project(tb testing.TB, m *fieldmask.Mask, src []byte) *corev1pb.Pod {
	tb.Helper()
	out, err := m.AppendProjection(nil, src)
	if err != nil {
		tb.Fatalf("AppendProjection(%v): %v", m, err)
	}
	var pod corev1pb.Pod
	if err := proto.Unmarshal(out, &pod); err != nil {
		tb.Fatalf("AppendProjection(%v) produced undecodable bytes: %v", m, err)
	}
	return &pod
}
