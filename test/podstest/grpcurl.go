package podstest

import (
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// GrpcurlTimeout bounds each run of the real grpcurl: far above what a
// call over a UNIX socket takes on a busy machine, so that only a hung
// grpcurl or server reaches it.
const GrpcurlTimeout = 2 * time.Minute

// RealGrpcurl returns the path of the grpcurl binary in PODSAPI_GRPCURL
// (make grpcurl-bin builds it from tools/grpcurl/go.mod), or skips the test.
func RealGrpcurl(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PODSAPI_GRPCURL")
	if bin == "" {
		t.Skip("PODSAPI_GRPCURL is unset: run make test-grpcurl to build grpcurl from tools/grpcurl/go.mod and run this test with it")
	}
	return bin
}

// Grpcurl calls a method of the socket the way grpcurl does: it learns the
// request and response messages from the server's reflection alone, builds
// the request from JSON, calls over grpc-go, and returns the response as
// JSON (indented like grpcurl's, with default values left out).
type Grpcurl struct {
	conn  *grpc.ClientConn
	files *protoregistry.Files
}

// NewGrpcurl connects to socket and reads the descriptors of
// kubelet.pods.v1alpha1.Pods from its reflection.
func NewGrpcurl(t *testing.T, socket string) *Grpcurl {
	t.Helper()
	conn := GRPCConn(t, socket)
	stream, err := grpc_reflection_v1.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&grpc_reflection_v1.ServerReflectionRequest{
		MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "kubelet.pods.v1alpha1.Pods"},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fd); err != nil {
			t.Fatal(err)
		}
		set.File = append(set.File, fd)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("reflection's descriptors: %v", err)
	}
	return &Grpcurl{conn: conn, files: files}
}

// Call invokes method of kubelet.pods.v1alpha1.Pods with the JSON request
// and the headers (such as "x-kubernetes-fieldmask: status.phase"), and
// returns the response as JSON.
func (g *Grpcurl) Call(t *testing.T, method, request string, headers ...string) (string, error) {
	t.Helper()
	d, err := g.files.FindDescriptorByName(protoreflect.FullName("kubelet.pods.v1alpha1.Pods"))
	if err != nil {
		t.Fatal(err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if md == nil {
		t.Fatalf("reflection has no method %s", method)
	}
	req, resp := dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output())
	if err := (protojson.UnmarshalOptions{Resolver: dynamicpb.NewTypes(g.files)}).Unmarshal([]byte(request), req); err != nil {
		t.Fatalf("request %s: %v", request, err)
	}
	c := t.Context()
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		c = metadata.AppendToOutgoingContext(c, k, v)
	}
	if err := g.conn.Invoke(c, "/kubelet.pods.v1alpha1.Pods/"+method, req, resp); err != nil {
		return "", err
	}
	out, err := (protojson.MarshalOptions{Resolver: dynamicpb.NewTypes(g.files), Multiline: true}).Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), nil
}
