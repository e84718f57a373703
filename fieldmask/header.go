package fieldmask

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

const (
	// Header is the gRPC metadata key of a field mask given as text: paths
	// separated by commas, such as "metadata.name, status.phase".
	Header = "x-kubernetes-fieldmask"
	// BinaryHeader is the gRPC metadata key of a field mask given as a
	// serialized google.protobuf.FieldMask, in base64 as gRPC binary metadata.
	BinaryHeader = "x-kubernetes-fieldmask-bin"
)

// FromHeader returns the mask that the request headers h ask for: the union
// of the paths in every value of [Header] and every value of [BinaryHeader].
//
// Each value of [Header] is a comma-separated list of paths; whitespace
// around a path is trimmed, and empty list elements are ignored as HTTP list
// headers require. Each value of [BinaryHeader] is a base64-encoded (padded
// or not) google.protobuf.FieldMask; a value may also hold several such
// encodings separated by commas, as when a proxy joins repeated headers.
//
// When neither header is present, FromHeader returns (nil, nil): the nil mask
// selects the whole pod. When a header is present but no value names a path
// (an empty value, say), FromHeader returns an error rather than guess between
// "nothing" and "everything". Paths are validated as by [Parse], and at most
// [MaxPaths] paths are accepted in all.
func FromHeader(h http.Header) (*Mask, error) {
	texts := h.Values(Header)
	bins := h.Values(BinaryHeader)
	if len(texts) == 0 && len(bins) == 0 {
		return nil, nil
	}
	var paths []string
	add := func(p string) error {
		if len(paths) == MaxPaths {
			return fmt.Errorf("field mask headers name more than %d paths", MaxPaths)
		}
		paths = append(paths, p)
		return nil
	}
	for _, v := range texts {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if err := add(p); err != nil {
				return nil, err
			}
		}
	}
	for _, v := range bins {
		for enc := range strings.SplitSeq(v, ",") {
			if enc = strings.TrimSpace(enc); enc == "" {
				continue
			}
			raw, err := connect.DecodeBinaryHeader(enc)
			if err != nil {
				return nil, fmt.Errorf("invalid %s header: bad base64: %w", BinaryHeader, err)
			}
			var fm fieldmaskpb.FieldMask
			if err := proto.Unmarshal(raw, &fm); err != nil {
				return nil, fmt.Errorf("invalid %s header: not a serialized google.protobuf.FieldMask: %w", BinaryHeader, err)
			}
			for _, p := range fm.GetPaths() {
				if err := add(p); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("field mask header names no path; omit the " + Header +
			" and " + BinaryHeader + " headers to get the whole pod")
	}
	return Parse(paths...)
}
