package conformance

import (
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maskTree is a field mask as a tree of field names.
type maskTree map[string]maskTree

func newMaskTree(paths ...string) maskTree {
	t := maskTree{}
	for _, p := range paths {
		n, covered := t, false
		for _, el := range strings.Split(strings.TrimSpace(p), ".") {
			child, ok := n[el]
			if !ok {
				child = maskTree{}
				n[el] = child
			} else if len(child) == 0 {
				covered = true // an ancestor is already selected whole
				break
			}
			n = child
		}
		if !covered {
			// A path selects its last field whole.
			for k := range n {
				delete(n, k)
			}
		}
	}
	return t
}

// project returns the fields of m that the mask selects: the suite's
// reference of a field mask, applied to the whole pod the implementation
// returns without a mask. A path through a repeated message field applies
// to each element; maps and scalars are selected whole.
func project[M proto.Message](m M, paths ...string) M {
	out := m.ProtoReflect().New()
	projectInto(out, m.ProtoReflect(), newMaskTree(paths...))
	return out.Interface().(M)
}

func projectInto(dst, src protoreflect.Message, t maskTree) {
	fields := src.Descriptor().Fields()
	for name, sub := range t {
		fd := fields.ByName(protoreflect.Name(name))
		if fd == nil || !src.Has(fd) {
			continue
		}
		v := src.Get(fd)
		switch {
		case len(sub) == 0 || fd.Kind() != protoreflect.MessageKind || fd.IsMap():
			dst.Set(fd, v)
		case fd.IsList():
			list := dst.Mutable(fd).List()
			for i := 0; i < v.List().Len(); i++ {
				el := list.NewElement()
				projectInto(el.Message(), v.List().Get(i).Message(), sub)
				list.Append(el)
			}
		default:
			projectInto(dst.Mutable(fd).Message(), v.Message(), sub)
		}
	}
}
