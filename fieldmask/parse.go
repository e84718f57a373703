package fieldmask

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// podDescriptor is the descriptor of k8s.io.api.core.v1.Pod, the message
// that every mask applies to.
var podDescriptor = (*corev1.Pod)(nil).ProtoReflect().Descriptor()

// Parse validates paths against the k8s.io.api.core.v1.Pod message and
// returns the mask that selects the union of them.
//
// A path is a sequence of field names separated by single dots. Each element
// must name a field of the message selected so far. A path may continue below
// a message field, and below a repeated message field, where it then applies
// to each element ("status.containerStatuses.ready"). A path may select a
// whole map ("metadata.labels") but not continue into it, and may not
// continue below a scalar, enum or bytes field. Paths are not trimmed.
//
// Overlapping paths are normalized: "metadata" subsumes "metadata.name", and
// duplicates are ignored. Parse accepts at most [MaxPaths] paths of at most
// [MaxPathLength] bytes each, and at least one path: an empty mask would be
// ambiguous, and the nil *Mask already stands for the whole pod. Errors name
// the offending path and the reason.
func Parse(paths ...string) (*Mask, error) {
	if len(paths) == 0 {
		return nil, errors.New("field mask has no paths; send no mask to get the whole pod")
	}
	if err := checkCount(len(paths)); err != nil {
		return nil, err
	}
	sel := newSelection()
	for _, p := range paths {
		if err := sel.add(p); err != nil {
			return nil, err
		}
	}
	return sel.mask(), nil
}

// checkCount bounds the number of paths given at once.
func checkCount(n int) error {
	if n > MaxPaths {
		return fmt.Errorf("field mask has %d paths; at most %d are allowed", n, MaxPaths)
	}
	return nil
}

// selection is the normalized tree of selected fields that paths are added
// to, before it is compiled.
type selection struct {
	root *selected
}

// selected is one field of a selection (or the Pod itself at the root).
type selected struct {
	field    protoreflect.FieldDescriptor // nil at the root
	whole    bool                         // the field is selected entirely
	children map[protoreflect.Name]*selected
}

func newSelection() *selection {
	return &selection{root: &selected{}}
}

// add validates path and adds it to the selection.
func (s *selection) add(path string) error {
	if len(path) > MaxPathLength {
		return fmt.Errorf("invalid field mask path %q (%d bytes): a path is at most %d bytes",
			truncate(path, 64), len(path), MaxPathLength)
	}
	if path == "" {
		return errors.New(`invalid field mask path "": the path is empty`)
	}
	md := podDescriptor
	cur := s.root
	subsumed := false // a prefix of path is already selected entirely
	rest := path
	for {
		name, more, found := strings.Cut(rest, ".")
		if name == "" {
			if len(rest) == len(path) {
				return fmt.Errorf("invalid field mask path %q: empty field name at the start", path)
			}
			return fmt.Errorf("invalid field mask path %q: empty field name after %q",
				path, path[:len(path)-len(rest)])
		}
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return fmt.Errorf("invalid field mask path %q: %s has no field %q", path, md.FullName(), name)
		}
		if !subsumed {
			next := cur.children[fd.Name()]
			if next == nil {
				next = &selected{field: fd}
				if cur.children == nil {
					cur.children = make(map[protoreflect.Name]*selected)
				}
				cur.children[fd.Name()] = next
			}
			cur = next
			subsumed = cur.whole
		}
		if !found {
			break
		}
		if more == "" {
			return fmt.Errorf("invalid field mask path %q: empty field name after %q", path, path)
		}
		prefix := path[:len(path)-len(more)-1]
		switch {
		case fd.IsMap():
			return fmt.Errorf("invalid field mask path %q: field %q of %s is a map; a mask selects a whole map (%q), not its entries",
				path, fd.Name(), md.FullName(), prefix)
		case fd.Kind() == protoreflect.GroupKind:
			return fmt.Errorf("invalid field mask path %q: field %q of %s is a group, which a mask cannot select into",
				path, fd.Name(), md.FullName())
		case fd.Message() == nil:
			kind := "a " + fd.Kind().String()
			if fd.IsList() {
				kind = "a repeated " + fd.Kind().String()
			} else if strings.ContainsRune("aeiou", rune(kind[2])) {
				kind = "an " + fd.Kind().String()
			}
			return fmt.Errorf("invalid field mask path %q: field %q of %s is %s and has no fields (select %q)",
				path, fd.Name(), md.FullName(), kind, prefix)
		}
		md = fd.Message()
		rest = more
	}
	if !subsumed {
		cur.whole = true
		cur.children = nil
	}
	return nil
}

// paths returns the selected paths in sorted order.
func (s *selection) paths() []string {
	var out []string
	var walk func(prefix string, n *selected)
	walk = func(prefix string, n *selected) {
		for name, c := range n.children {
			p := string(name)
			if prefix != "" {
				p = prefix + "." + p
			}
			if c.whole {
				out = append(out, p)
			} else {
				walk(p, c)
			}
		}
	}
	walk("", s.root)
	slices.Sort(out)
	return out
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
