package client_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"github.com/podsapi/podsapi/internal/podstest"
)

// BenchmarkDecodePod compares the decoders of a whole pod: k8s.io/api's
// generated Unmarshal, which the client uses, and protobuf-go's
// proto.Unmarshal into the generated message.
func BenchmarkDecodePod(b *testing.B) {
	raw, err := podstest.Pod("default", "web-1", 1).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("k8s.io-api", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			var p corev1.Pod
			if err := p.Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf-go", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			var p corev1pb.Pod
			if err := proto.Unmarshal(raw, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
