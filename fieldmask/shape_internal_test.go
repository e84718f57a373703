package fieldmask

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	corev1 "k8s.io/api/core/v1"
)

// Go types that exercise the encoding/json rules which the pod's own types
// do not: names hidden by shallower ones, ties, renamed fields, inlined
// structs without a proto field, and types with their own JSON encoding.
type (
	tOuter struct {
		tMeta   `json:",inline"` // no proto field: JSON only
		Name    string           `json:"name" protobuf:"bytes,1,opt,name=name"`
		TInner  `json:",inline" protobuf:"bytes,2,opt,name=inner"`
		*TA     `protobuf:"bytes,4,opt,name=a"`
		TB      `protobuf:"bytes,5,opt,name=b"`
		Renamed string `json:"renamedJSON" protobuf:"bytes,6,opt,name=renamedProto"`
		Stamp   tStamp `json:"stamp" protobuf:"bytes,7,opt,name=stamp"`
		Skipped string `json:"-" protobuf:"bytes,8,opt,name=skipped"`
		Wrong   string `json:"wrong" protobuf:"bytes,9,opt,name=notTheProtoName"`
		Ignored string `json:"ignored"` // no proto field either
		TList   `json:"list" protobuf:"bytes,10,opt,name=list"`
	}
	tMeta struct {
		Kind string `json:"kind"`
	}
	TInner struct {
		Name  string `json:"name" protobuf:"bytes,1,opt,name=name"` // hidden by tOuter.Name
		URL   string `json:"url" protobuf:"bytes,2,opt,name=url"`
		TDeep `json:",inline" protobuf:"bytes,3,opt,name=deep"`
	}
	TDeep struct {
		Port int32 `json:"port" protobuf:"varint,1,opt,name=port"`
	}
	TA struct { // fields without a json tag get their Go names in JSON
		X     string `protobuf:"bytes,1,opt,name=X"`
		OnlyA string `protobuf:"bytes,2,opt,name=OnlyA"`
	}
	TB struct {
		X string `protobuf:"bytes,1,opt,name=X"`
	}
	tStamp struct {
		TDeep `json:",inline" protobuf:"bytes,1,opt,name=deep"`
	}
	TList []TDeep // embedded but not a struct: a named field for encoding/json
)

func (tStamp) MarshalJSON() ([]byte, error) { return []byte(`"now"`), nil }

// testDescriptor builds the proto messages of the Go types above.
func testDescriptor(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	field := func(name string, num int32, typ *descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ, Label: opt}
		if typeName != "" {
			f.TypeName = proto.String(".t." + typeName)
		}
		return f
	}
	message := func(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("t.proto"),
		Package: proto.String("t"),
		MessageType: []*descriptorpb.DescriptorProto{
			message("Outer",
				field("name", 1, str, ""), field("inner", 2, msg, "Inner"), field("a", 4, msg, "A"), field("b", 5, msg, "B"),
				field("renamedProto", 6, str, ""), field("stamp", 7, msg, "Stamp"), field("skipped", 8, str, ""),
				field("wrong", 9, str, ""), field("list", 10, msg, "Deep")),
			message("Inner", field("name", 1, str, ""), field("url", 2, str, ""), field("deep", 3, msg, "Deep")),
			message("Deep", field("port", 1, descriptorpb.FieldDescriptorProto_TYPE_INT32.Enum(), "")),
			message("A", field("X", 1, str, ""), field("OnlyA", 2, str, "")),
			message("B", field("X", 1, str, "")),
			message("Stamp", field("deep", 1, msg, "Deep")),
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("Outer")
}

func TestDeriveShapesFollowsEncodingJSON(t *testing.T) {
	shapes := deriveShapes(testDescriptor(t), reflect.TypeFor[tOuter]())
	names := func(chain []protoreflect.FieldDescriptor) string {
		var s []string
		for _, fd := range chain {
			s = append(s, string(fd.Name()))
		}
		return strings.Join(s, ".")
	}
	aliases := func(msg protoreflect.FullName) map[string]string {
		out := map[string]string{}
		if s := shapes[msg]; s != nil {
			for name, chain := range s.aliases {
				out[name] = names(chain)
			}
		}
		return out
	}
	wantOuter := map[string]string{
		"url":         "inner.url",       // inlined
		"port":        "inner.deep.port", // inlined twice
		"renamedJSON": "renamedProto",    // renamed
		// "name" is Outer's own: Inner's is hidden. "X" is a tie between A
		// and B, which encoding/json drops. *TA has no json tag, so it is
		// inlined like the others. "wrong" is a proto name of Outer already,
		// although its protobuf tag, which names another field, is not
		// trusted; "skipped" is not in the JSON at all.
		"OnlyA": "a.OnlyA",
	}
	if got := aliases("t.Outer"); !maps.Equal(got, wantOuter) {
		t.Errorf("aliases of Outer = %v, want %v", got, wantOuter)
	}
	if got, want := aliases("t.Inner"), map[string]string{"port": "deep.port"}; !maps.Equal(got, want) {
		t.Errorf("aliases of Inner = %v, want %v", got, want)
	}
	outer := shapes["t.Outer"]
	if outer == nil {
		t.Fatal("no shape for Outer")
	}
	if want := map[string]string{"kind": "tMeta", "ignored": "tOuter"}; !maps.Equal(outer.jsonOnly, want) {
		t.Errorf("JSON-only names of Outer = %v, want %v", outer.jsonOnly, want)
	}
	if got, want := slices.Sorted(maps.Keys(outer.goNames)), []string{"tA", "tB", "tInner"}; !slices.Equal(got, want) {
		t.Errorf("Go names of Outer = %v, want %v", got, want)
	}
	if _, ok := shapes["t.Stamp"]; ok {
		t.Error("Stamp has its own JSON encoding, but a JSON shape was derived for it")
	}
	if _, ok := shapes["t.Deep"]; ok {
		t.Error("Deep's JSON shape is its proto shape, but a shape was derived for it")
	}
}

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
