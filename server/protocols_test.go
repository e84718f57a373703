package server_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestReflection lists the services over gRPC reflection and resolves the
// Kubernetes Pod message, as grpcurl does.
func TestReflection(t *testing.T) {
	f := start(t, server.Config{}, false, podstest.SamplePods()...)
	client := grpc_reflection_v1.NewServerReflectionClient(podstest.GRPCConn(t, f.socket))
	stream, err := client.ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *grpc_reflection_v1.ServerReflectionRequest) *grpc_reflection_v1.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := ask(&grpc_reflection_v1.ServerReflectionRequest{
		MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{},
	})
	var services []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"kubelet.pods.v1alpha1.Pods", "v1alpha1.Pods", "grpc.health.v1.Health"} {
		if !slices.Contains(services, want) {
			t.Errorf("reflection lists %v, missing %s", services, want)
		}
	}
	resp = ask(&grpc_reflection_v1.ServerReflectionRequest{
		MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "k8s.io.api.core.v1.Pod"},
	})
	if len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("reflection cannot resolve k8s.io.api.core.v1.Pod: %v", resp)
	}
}

// TestConnectJSON calls ListPods with the Connect protocol and JSON over
// HTTP/1.1, as curl does, and gets the same pods as gRPC clients.
func TestConnectJSON(t *testing.T) {
	pods := podstest.SamplePods()
	f := start(t, server.Config{}, false, pods...)
	client := &http.Client{Transport: &http.Transport{DialContext: podstest.HTTPClient(t, f.socket).Transport.(*http.Transport).DialContext}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, "http://localhost/kubelet.pods.v1alpha1.Pods/ListPods", bytes.NewReader([]byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, body)
	}
	got := &podsv1alpha1.PodListResponse{}
	if err := protojson.Unmarshal(body, got); err != nil {
		t.Fatalf("decode JSON: %v", err)
	}
	if len(got.GetPods()) != len(pods) {
		t.Fatalf("got %d pods, want %d", len(got.GetPods()), len(pods))
	}
	for i, p := range pods {
		if !proto.Equal(got.GetPods()[i], podstest.Message(t, p)) {
			t.Errorf("pod %d differs from the stored pod", i)
		}
	}
}

// TestNoCompression asks for gzip, as connect-go clients do by default, and
// gets uncompressed messages: compression only costs CPU on a UNIX socket.
func TestNoCompression(t *testing.T) {
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, podstest.SamplePods()...)
	body := []byte{0, 0, 0, 0, 0} // one empty, uncompressed gRPC message
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, "http://localhost/kubelet.pods.v1alpha1.Pods/ListPods", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Grpc-Accept-Encoding", "gzip")
	req.Header.Set("Te", "trailers")
	resp, err := podstest.HTTPClient(t, f.socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// The compressed flag of each message says whether it is compressed,
	// whatever grpc-encoding the response names.
	if len(msg) < 5 || msg[0] != 0 {
		t.Fatalf("response message flags = %v, want an uncompressed message", msg[:min(len(msg), 5)])
	}
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Fatalf("grpc-status = %q, want 0", got)
	}
}

// TestReflectionStreamsBounded: a client may have 8 reflection streams
// open at once; the 9th is refused RESOURCE_EXHAUSTED
// TOO_MANY_REFLECTION_STREAMS, and once one ends another may open. Each
// answer stays in memory until read: 2,000 streams that asked and never
// read took a server under 256 MiB to 243 MiB.
func TestReflectionStreamsBounded(t *testing.T) {
	const procedure = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	f := start(t, server.Config{}, false, podstest.SamplePods()...)
	client := grpc_reflection_v1.NewServerReflectionClient(podstest.GRPCConn(t, f.socket))
	open := func() (grpc_reflection_v1.ServerReflection_ServerReflectionInfoClient, error) {
		stream, err := client.ServerReflectionInfo(ctx(t))
		if err != nil {
			return nil, err
		}
		// A Send that fails with io.EOF (the server ended the stream
		// already) leaves the stream's status to Recv, as grpc-go says.
		if err := stream.Send(&grpc_reflection_v1.ServerReflectionRequest{MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
			return nil, err
		}
		_, err = stream.Recv()
		return stream, err
	}
	var streams []grpc_reflection_v1.ServerReflection_ServerReflectionInfoClient
	for range 8 {
		s, err := open()
		if err != nil {
			t.Fatalf("reflection stream %d: %v", len(streams)+1, err)
		}
		streams = append(streams, s)
	}
	_, err := open()
	if podstest.ErrorCode(err) != connect.CodeResourceExhausted || podstest.ErrorReason(err) != errinfo.TooManyReflectionStreams {
		t.Fatalf("a 9th reflection stream: %v (reason %q), want RESOURCE_EXHAUSTED %s", err, podstest.ErrorReason(err), errinfo.TooManyReflectionStreams)
	}
	f.WaitServed(t, procedure, 1)
	if err := streams[0].CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := streams[0].Recv(); err != io.EOF {
		t.Fatalf("the closed stream: %v, want its end", err)
	}
	f.WaitServed(t, procedure, 2)
	if _, err := open(); err != nil {
		t.Fatalf("a reflection stream once one ended: %v", err)
	}
}
