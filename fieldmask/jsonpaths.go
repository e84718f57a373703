package fieldmask

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// JSONPaths returns the paths of the mask in the JSON shape of a pod (what
// `kubectl get pod -o json` prints), sorted: the fields of embedded structs
// are named where encoding/json inlines them ("spec.volumes.emptyDir" for
// the proto path "spec.volumes.volumeSource.emptyDir"), and a path to an
// embedded struct as a whole becomes one path per field it inlines. A
// printer of masked pods keeps these paths of a pod's JSON and drops the
// zero values its Go type adds for the fields the mask left out. It
// returns nil for the nil mask, which selects the whole pod.
func (m *Mask) JSONPaths() []string {
	if m == nil {
		return nil
	}
	var out []string
	for _, p := range m.paths {
		out = appendJSONPaths(out, podDescriptor, "", strings.Split(p, "."))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// appendJSONPaths appends to out the JSON paths of the proto path segs
// below the message md, whose JSON path is prefix.
func appendJSONPaths(out []string, md protoreflect.MessageDescriptor, prefix string, segs []string) []string {
	fd := md.Fields().ByName(protoreflect.Name(segs[0]))
	if fd == nil { // not a field of md: m's paths are valid, so unreachable
		return append(out, joinPath(prefix, strings.Join(segs, ".")))
	}
	if names := inlinedNames(md, fd); names != nil {
		if len(segs) == 1 {
			for _, n := range names {
				out = append(out, joinPath(prefix, n))
			}
			return out
		}
		return appendJSONPaths(out, fd.Message(), prefix, segs[1:])
	}
	path := joinPath(prefix, string(fd.Name()))
	if len(segs) == 1 || fd.Message() == nil {
		return append(out, path)
	}
	return appendJSONPaths(out, fd.Message(), path, segs[1:])
}

// inlinedNames returns the JSON names that the field fd of md stands for
// when it is an embedded struct that encoding/json inlines, sorted, or nil
// when fd is a field of its own in the JSON shape.
func inlinedNames(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor) []string {
	s := shapeOf(md)
	if s == nil {
		return nil
	}
	var names []string
	for name, chain := range s.aliases {
		if len(chain) > 1 && chain[0] == fd {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// joinPath joins a path and a name with a dot.
func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
