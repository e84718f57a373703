package podstest

import (
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
)

// Message converts a k8s.io/api pod to the generated message clients of
// the typed wire receive, failing the test if it cannot.
func Message(t testing.TB, pod *corev1.Pod) *corev1pb.Pod {
	t.Helper()
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1pb.Pod{}
	if err := proto.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}
