package fieldmask_test

import (
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/podsapi/podsapi/fieldmask"
)

// FuzzFromHeader reads masks from both headers at once, each possibly
// repeated: the text header split on "\n" into values, the binary one given
// as raw bytes (encoded as gRPC binary metadata) or as an arbitrary header
// value. FromHeader must never panic, and a mask it accepts must name at
// most MaxPaths paths and re-parse to itself.
func FuzzFromHeader(f *testing.F) {
	bin := func(paths ...string) []byte {
		b, _ := proto.Marshal(&fieldmaskpb.FieldMask{Paths: paths})
		return b
	}
	f.Add("metadata.name", []byte(nil), "")
	f.Add("", bin("status.phase"), "")
	f.Add("metadata.name, status.phase\nspec.containers.name", bin("status.podIPs", "metadata.uid"), "")
	f.Add("", []byte(nil), "CgRzcGVj")
	f.Add("", []byte(nil), "CgRzcGVj,CgZzdGF0dXM=")
	f.Add("", []byte(nil), "!!!")
	f.Add(",,,", []byte(nil), "")
	f.Add("", []byte{0x0a, 0xff, 0xff}, "")
	f.Add("", bin(""), "")
	f.Add(strings.Repeat("metadata.name,", 300), []byte(nil), "")
	f.Add("", bin(strings.Repeat("a.", 600)), "")
	f.Add("status.phase", bin("status.phase"), "CgxzdGF0dXMucGhhc2U")
	f.Add("spec.volumes.emptyDir, spec.containers.livenessProbe.httpGet", bin("spec.volumes.volumeSource.emptyDir"), "")
	f.Fuzz(func(t *testing.T, text string, raw []byte, binValue string) {
		h := http.Header{}
		if text != "" {
			for v := range strings.SplitSeq(text, "\n") {
				h.Add(fieldmask.Header, v)
			}
		}
		if raw != nil {
			h.Add(fieldmask.BinaryHeader, connect.EncodeBinaryHeader(raw))
		}
		if binValue != "" {
			h.Add(fieldmask.BinaryHeader, binValue)
		}
		m, err := fieldmask.FromHeader(h)
		if err != nil {
			if m != nil {
				t.Fatalf("FromHeader returned a mask with error %v", err)
			}
			return
		}
		if m == nil {
			if len(h) != 0 {
				t.Fatalf("FromHeader(%v) = nil without error: headers present must name paths or fail", h)
			}
			return
		}
		paths := m.Paths()
		if len(paths) == 0 || len(paths) > fieldmask.MaxPaths {
			t.Fatalf("accepted mask has %d paths", len(paths))
		}
		again, err := fieldmask.Parse(paths...)
		if err != nil || again.Key() != m.Key() {
			t.Fatalf("accepted mask %q does not re-parse to itself: %v", paths, err)
		}
	})
}
