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
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/test/sourcetest"
	"github.com/podsapi/podsapi/workload"
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

// BenchmarkListWorkloads lists a node of 110 pods, each of a Deployment
// (workloads derived from names), without and with their workloads: the
// list without them is assembled once per store version and shared, the
// one with them for each call. The ratio of the two is the cost of asking.
func BenchmarkListWorkloads(b *testing.B) {
	r := workload.NewResolver()
	st := store.New()
	sink := r.Sink(st)
	for i := range 110 {
		p := podstest.Pod("default", fmt.Sprintf("web%03d-7d9f8b6c5d-x2k4q", i), i)
		p.OwnerReferences[0].Name = fmt.Sprintf("web%03d-7d9f8b6c5d", i)
		sink.Upsert(p)
	}
	sink.MarkSynced()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := client.New(podstest.Start(b, st, server.Config{Logger: logger, Workloads: r, Limits: server.LimitsConfig{QPS: -1}}).SocketPath())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.Run("List", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, err := c.List(ctx); err != nil || len(got) != 110 {
				b.Fatalf("List = %d pods, %v", len(got), err)
			}
		}
	})
	b.Run("ListWorkloads", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, ws, err := c.ListWorkloads(ctx); err != nil || len(got) != 110 || len(ws) != 110 {
				b.Fatalf("ListWorkloads = %d pods, %d workloads, %v", len(got), len(ws), err)
			}
		}
	})
}
