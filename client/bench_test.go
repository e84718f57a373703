package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"github.com/podsapi/podsapi/internal/rigs/podstest"
	"github.com/podsapi/podsapi/internal/rigs/sourcetest"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
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

// BenchmarkList lists 1000 pods over each wire: from podsapi's typed
// service, from its v1alpha1.Pods, and from a kubelet's
// (sourcetest.FakeKubelet), whole and with a field mask, which the client
// applies itself on the kubelet's wire (a kubelet ignores it).
func BenchmarkList(b *testing.B) {
	var pods []*corev1.Pod
	for i := range 1000 {
		pods = append(pods, podstest.Pod("default", fmt.Sprintf("pod-%04d", i), i))
	}
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ours := podstest.Start(b, st, server.Config{Logger: logger, Limits: server.LimitsConfig{QPS: -1}}).SocketPath()
	servers := []struct {
		name   string
		socket string
		wire   client.Wire
	}{
		{"podsapi", ours, client.WirePodsAPI},
		{"podsapi-kubelet-wire", ours, client.WireKubelet},
		{"kubelet", sourcetest.NewFakeKubelet(b, podstest.SocketPath(b), pods...).Path(), client.WireKubelet},
	}
	masks := []struct {
		name string
		opt  client.FieldsOption
	}{
		{"whole", client.WithFields()},
		{"masked", client.WithFields("metadata.name", "status.phase")},
	}
	for _, srv := range servers {
		for _, mask := range masks {
			b.Run(srv.name+"/"+mask.name, func(b *testing.B) {
				c, err := client.New(srv.socket, client.WithWire(srv.wire))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					got, err := c.List(ctx, mask.opt)
					if err != nil || len(got) != len(pods) {
						b.Fatalf("List = %d pods, %v", len(got), err)
					}
				}
			})
		}
	}
}
