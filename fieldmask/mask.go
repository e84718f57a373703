// Package fieldmask parses, validates and compiles the field masks that
// clients of the Pods API send in gRPC metadata, and applies them to pods
// directly on their protobuf encoding.
//
// A mask is a set of paths over the k8s.io.api.core.v1.Pod message, such as
// "metadata.name" or "status.containerStatuses.ready". A path may be written
// in either shape of a pod, or a mix of both:
//
//   - the JSON shape, as `kubectl get pod -o json` prints it, where the
//     fields of a struct that a Kubernetes Go type embeds are inlined:
//     "spec.volumes.emptyDir", "spec.containers.livenessProbe.httpGet",
//     "spec.ephemeralContainers.name";
//   - the proto shape, where the embedded struct is a field of its own:
//     "spec.volumes.volumeSource.emptyDir",
//     "spec.containers.livenessProbe.handler.httpGet",
//     "spec.ephemeralContainers.ephemeralContainerCommon.name".
//
// Both select the same fields, and a mask always reports its paths in the
// proto shape, so that its key is the same whichever shape a client wrote.
// The correspondence is derived from the k8s.io/api Go types (their json and
// protobuf struct tags), not listed by hand. Quantities, times and
// int-or-strings are messages too: "metadata.creationTimestamp" selects a
// Time, "metadata.creationTimestamp.seconds" its seconds. A nil *Mask stands
// for the whole pod.
//
// The server keeps every pod version encoded once, and
// [Mask.AppendProjection] produces the masked encoding from those bytes
// without decoding them into messages.
package fieldmask

import (
	"slices"
	"strings"
)

const (
	// MaxPaths is the largest number of paths that one call to [Parse],
	// [Mask.Union] or [FromHeader] accepts.
	MaxPaths = 256
	// MaxPathLength is the length in bytes of the longest path accepted.
	MaxPathLength = 1024
)

// Mask is a validated, normalized and compiled field mask over the
// k8s.io.api.core.v1.Pod message. A Mask is immutable and safe for concurrent
// use. The nil *Mask is valid and selects the whole pod.
type Mask struct {
	paths []string // normalized and sorted
	key   string   // paths joined by commas
	root  *node    // compiled projection program for the Pod message
}

// Paths returns the normalized paths of the mask in sorted order, in the
// proto shape: no path is a prefix of another and each appears once. It returns nil for the nil mask,
// which selects the whole pod. The caller may modify the returned slice.
func (m *Mask) Paths() []string {
	if m == nil {
		return nil
	}
	return slices.Clone(m.paths)
}

// Key returns a canonical string for the mask: masks with the same normalized
// paths have equal keys, whatever order, duplicates, overlaps and shape (JSON
// or proto) their paths were given with, and masks with different normalized paths have different
// keys. It is meant as a cache key for projections. The nil mask, which
// selects the whole pod, has the empty key, which no other mask has.
func (m *Mask) Key() string {
	if m == nil {
		return ""
	}
	return m.key
}

// String returns the normalized paths separated by commas, the format of the
// x-kubernetes-fieldmask header, or "(whole pod)" for the nil mask.
func (m *Mask) String() string {
	if m == nil {
		return "(whole pod)"
	}
	return m.key
}

// Union returns a mask that selects the fields of m and those named by paths,
// which are validated as by [Parse]. At most [MaxPaths] paths may be given in
// one call, whatever the size of m. The nil mask already selects the whole
// pod, so its Union is nil too (once paths are found valid). Union with no
// paths returns m.
func (m *Mask) Union(paths ...string) (*Mask, error) {
	if len(paths) == 0 {
		return m, nil
	}
	if err := checkCount(len(paths)); err != nil {
		return nil, err
	}
	sel := newSelection()
	if m != nil {
		for _, p := range m.paths {
			if err := sel.add(p); err != nil {
				return nil, err // unreachable: m's paths are valid
			}
		}
	}
	for _, p := range paths {
		if err := sel.add(p); err != nil {
			return nil, err
		}
	}
	if m == nil {
		return nil, nil
	}
	return sel.mask(), nil
}

// mask builds the Mask for a non-empty selection.
func (s *selection) mask() *Mask {
	paths := s.paths()
	return &Mask{
		paths: paths,
		key:   strings.Join(paths, ","),
		root:  compile(s.root),
	}
}
