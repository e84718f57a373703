package fieldmask_test

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// fieldMaskBytes serializes a google.protobuf.FieldMask with paths.
func fieldMaskBytes(tb testing.TB, paths ...string) []byte {
	tb.Helper()
	b, err := proto.Marshal(&fieldmaskpb.FieldMask{Paths: paths})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestFromHeader(t *testing.T) {
	// 29 bytes of FieldMask: the padded and unpadded encodings differ.
	binPaths := []string{"status.phase", "spec.nodeName"}
	raw := fieldMaskBytes(t, binPaths...)
	padded := base64.StdEncoding.EncodeToString(raw)
	unpadded := base64.RawStdEncoding.EncodeToString(raw)
	if padded == unpadded {
		t.Fatalf("test FieldMask needs padding; %d bytes", len(raw))
	}
	other := base64.RawStdEncoding.EncodeToString(fieldMaskBytes(t, "metadata.uid"))
	empty := base64.StdEncoding.EncodeToString(fieldMaskBytes(t))
	manyText := strings.Repeat("metadata.name,", fieldmask.MaxPaths) + "metadata.uid"

	type kv = [2]string
	tests := []struct {
		name    string
		headers []kv     // added in order with http.Header.Add
		want    []string // nil: the nil mask (whole pod)
		wantErr string   // a prefix of the error
	}{
		{"no header", nil, nil, ""},
		{"unrelated headers", []kv{{"Content-Type", "application/grpc"}, {"X-Kubernetes-Other", "a"}}, nil, ""},
		{"single path", []kv{{fieldmask.Header, "status.phase"}}, []string{"status.phase"}, ""},
		{"any key case", []kv{{"X-KUBERNETES-FIELDMASK", "status.phase"}}, []string{"status.phase"}, ""},
		{"comma list with spaces", []kv{{fieldmask.Header, " metadata.name , status.phase,\tstatus.podIPs "}},
			[]string{"metadata.name", "status.phase", "status.podIPs"}, ""},
		{"multiple values merged", []kv{{fieldmask.Header, "metadata.name"}, {fieldmask.Header, "status.phase,metadata.uid"}},
			[]string{"metadata.name", "metadata.uid", "status.phase"}, ""},
		{"values normalized together", []kv{{fieldmask.Header, "metadata.name"}, {fieldmask.Header, "metadata"}}, []string{"metadata"}, ""},
		{"empty list elements ignored", []kv{{fieldmask.Header, ",metadata.name,, status.phase,"}},
			[]string{"metadata.name", "status.phase"}, ""},
		{"empty value", []kv{{fieldmask.Header, ""}}, nil, "field mask header names no path"},
		{"only commas and spaces", []kv{{fieldmask.Header, " , ,"}}, nil, "field mask header names no path"},
		{"invalid path named", []kv{{fieldmask.Header, "metadata.name, status.fooBar"}}, nil,
			`invalid field mask path "status.fooBar": k8s.io.api.core.v1.PodStatus has no field "fooBar"`},
		{"inner spaces are not trimmed", []kv{{fieldmask.Header, "status. phase"}}, nil,
			`invalid field mask path "status. phase": k8s.io.api.core.v1.PodStatus has no field " phase"`},
		{"too many text paths", []kv{{fieldmask.Header, manyText}}, nil, "field mask headers name more than 256 paths"},
		{"binary padded", []kv{{fieldmask.BinaryHeader, padded}}, []string{"spec.nodeName", "status.phase"}, ""},
		{"binary unpadded", []kv{{fieldmask.BinaryHeader, unpadded}}, []string{"spec.nodeName", "status.phase"}, ""},
		{"binary multiple values", []kv{{fieldmask.BinaryHeader, unpadded}, {fieldmask.BinaryHeader, other}},
			[]string{"metadata.uid", "spec.nodeName", "status.phase"}, ""},
		{"binary values joined by a comma", []kv{{fieldmask.BinaryHeader, padded + ", " + other}},
			[]string{"metadata.uid", "spec.nodeName", "status.phase"}, ""},
		{"both headers", []kv{{fieldmask.Header, "metadata.name"}, {fieldmask.BinaryHeader, padded}},
			[]string{"metadata.name", "spec.nodeName", "status.phase"}, ""},
		{"both headers, binary empty", []kv{{fieldmask.Header, "metadata.name"}, {fieldmask.BinaryHeader, empty}},
			[]string{"metadata.name"}, ""},
		{"binary bad base64", []kv{{fieldmask.BinaryHeader, "!!not base64!!"}}, nil, "invalid x-kubernetes-fieldmask-bin header: bad base64: "},
		{"binary bad FieldMask bytes", []kv{{fieldmask.BinaryHeader, base64.StdEncoding.EncodeToString([]byte{0x0a, 0x05, 'a'})}}, nil,
			"invalid x-kubernetes-fieldmask-bin header: not a serialized google.protobuf.FieldMask: "},
		{"binary invalid UTF-8 path", []kv{{fieldmask.BinaryHeader, base64.StdEncoding.EncodeToString([]byte{0x0a, 0x01, 0xff})}}, nil,
			"invalid x-kubernetes-fieldmask-bin header: not a serialized google.protobuf.FieldMask: "},
		{"binary empty FieldMask", []kv{{fieldmask.BinaryHeader, empty}}, nil, "field mask header names no path"},
		{"binary empty value", []kv{{fieldmask.BinaryHeader, ""}}, nil, "field mask header names no path"},
		{"binary paths are not trimmed", []kv{{fieldmask.BinaryHeader, base64.StdEncoding.EncodeToString(fieldMaskBytes(t, " status.phase"))}}, nil,
			`invalid field mask path " status.phase": k8s.io.api.core.v1.Pod has no field " status"`},
		{"binary invalid path named", []kv{{fieldmask.BinaryHeader, base64.StdEncoding.EncodeToString(fieldMaskBytes(t, "metadata.labels.app"))}}, nil,
			`invalid field mask path "metadata.labels.app": field "labels" of k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta is a map`},
		{"too many binary paths", []kv{{fieldmask.BinaryHeader, base64.StdEncoding.EncodeToString(
			fieldMaskBytes(t, slices.Repeat([]string{"status.phase"}, fieldmask.MaxPaths+1)...))}}, nil,
			"field mask headers name more than 256 paths"},
		{"limit counts both headers", []kv{{fieldmask.Header, strings.Repeat("status.phase,", fieldmask.MaxPaths)}, {fieldmask.BinaryHeader, other}}, nil,
			"field mask headers name more than 256 paths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tt.headers {
				h.Add(kv[0], kv[1])
			}
			m, err := fieldmask.FromHeader(h)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("FromHeader(%v) = %v, %v; want error starting with %q", h, m, err, tt.wantErr)
				}
				if m != nil {
					t.Errorf("FromHeader returned a mask with its error")
				}
				return
			}
			if err != nil {
				t.Fatalf("FromHeader(%v): %v", h, err)
			}
			if tt.want == nil {
				if m != nil {
					t.Fatalf("FromHeader(%v) = %v, want the nil mask", h, m)
				}
				return
			}
			if m == nil || !slices.Equal(m.Paths(), tt.want) {
				t.Errorf("FromHeader(%v).Paths() = %q, want %q", h, m.Paths(), tt.want)
			}
		})
	}
}
