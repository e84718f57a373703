package fieldmask

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

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
// must name a field of the message selected so far, by its proto name or by
// its name in the JSON shape of a pod (see the package documentation). A
// path may continue below a message field, and below a repeated message
// field, where it then applies to each element
// ("status.containerStatuses.ready"). A path may select a whole map
// ("metadata.labels") but not continue into it, and may not continue below a
// scalar, enum or bytes field. Paths are not trimmed.
//
// Overlapping paths are normalized: "metadata" subsumes "metadata.name", and
// duplicates are ignored. Parse accepts at most [MaxPaths] paths of at most
// [MaxPathLength] bytes each, and at least one path: an empty mask would be
// ambiguous, and the nil *Mask already stands for the whole pod. Errors name
// the offending path (cut after 128 bytes) and the reason, and suggest the
// closest spelling of a field that does not exist.
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

// add validates path and adds it to the selection. Elements are looked up
// as proto field names first, then as JSON names (see shape.go), which may
// stand for several proto fields; the selection holds proto fields only, so
// both spellings of a path select the same thing.
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
				return fmt.Errorf("invalid field mask path %q: empty field name at the start", show(path))
			}
			return fmt.Errorf("invalid field mask path %q: empty field name after %q",
				show(path), show(path[:len(path)-len(rest)]))
		}
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			chain := shapeOf(md).alias(name)
			if chain == nil {
				return unknownField(path, len(path)-len(rest), md, name)
			}
			for _, embedded := range chain[:len(chain)-1] {
				cur, subsumed = cur.step(embedded, subsumed)
			}
			fd = chain[len(chain)-1]
		}
		cur, subsumed = cur.step(fd, subsumed)
		if !found {
			break
		}
		if more == "" {
			return fmt.Errorf("invalid field mask path %q: empty field name after %q", show(path), show(path))
		}
		if fd.IsMap() || fd.Kind() == protoreflect.GroupKind || fd.Message() == nil {
			return cannotDescend(path, len(path)-len(more)-1, fd)
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

// step returns the child of n that selects fd, creating it, and whether it
// is selected entirely; below a field selected entirely (subsumed), it
// changes nothing.
func (n *selected) step(fd protoreflect.FieldDescriptor, subsumed bool) (*selected, bool) {
	if subsumed {
		return n, true
	}
	next := n.children[fd.Name()]
	if next == nil {
		next = &selected{field: fd}
		if n.children == nil {
			n.children = make(map[protoreflect.Name]*selected)
		}
		n.children[fd.Name()] = next
	}
	return next, next.whole
}

// cannotDescend returns the error for a path that continues below fd, which
// path[:end] selects, and which is a map, a group or has no fields.
func cannotDescend(path string, end int, fd protoreflect.FieldDescriptor) error {
	owner := fd.ContainingMessage().FullName()
	prefix := path[:end]
	switch {
	case fd.IsMap():
		return fmt.Errorf("invalid field mask path %q: field %q of %s is a map; a mask selects a whole map (%q), not its entries",
			show(path), fd.Name(), owner, show(prefix))
	case fd.Kind() == protoreflect.GroupKind:
		return fmt.Errorf("invalid field mask path %q: field %q of %s is a group, which a mask cannot select into",
			show(path), fd.Name(), owner)
	case fd.Message() == nil:
		kind := "a " + fd.Kind().String()
		if fd.IsList() {
			kind = "a repeated " + fd.Kind().String()
		} else if strings.ContainsRune("aeiou", rune(kind[2])) {
			kind = "an " + fd.Kind().String()
		}
		return fmt.Errorf("invalid field mask path %q: field %q of %s is %s and has no fields (select %q)",
			show(path), fd.Name(), owner, kind, show(prefix))
	default:
		return fmt.Errorf("invalid field mask path %q: field %q of %s cannot be selected into",
			show(path), fd.Name(), owner) // unreachable: add checks the cases above
	}
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

// shownBytes is the length of the longest path or field name that an error
// message quotes in full; longer ones are cut.
const shownBytes = 128

// show shortens a path or a part of it for an error message.
func show(s string) string { return truncate(s, shownBytes) }

// truncate shortens s to at most n bytes, not cutting a UTF-8 sequence, for
// an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			n = i
			break
		}
	}
	return s[:n] + "..."
}
