package fieldmask

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkDeriveShapes is the one-time cost of deriving the JSON shape of a
// pod from the k8s.io/api types, paid by the first path that needs it.
func BenchmarkDeriveShapes(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if len(deriveShapes(podDescriptor, reflect.TypeFor[corev1.Pod]())) == 0 {
			b.Fatal("no shapes")
		}
	}
}
