package fieldmask

import (
	"slices"
	"strings"
)

// Complete returns the paths that complete partial, the beginning of one
// path of a pod (for shell completion of a --fields flag): the fields of the
// message that partial's complete elements name whose names start with its
// last element, proto and JSON names alike, sorted. It returns nil when an
// element before the last names no field, or a field without fields (a
// scalar or a map).
func Complete(partial string) []string {
	md := podDescriptor
	elems := strings.Split(partial, ".")
	for _, e := range elems[:len(elems)-1] {
		fd := lookup(md, e)
		if fd == nil || fd.IsMap() || fd.Message() == nil {
			return nil
		}
		md = fd.Message()
	}
	head := strings.Join(elems[:len(elems)-1], ".")
	if head != "" {
		head += "."
	}
	last := elems[len(elems)-1]
	var out []string
	add := func(name string) {
		if strings.HasPrefix(name, last) && !slices.Contains(out, head+name) {
			out = append(out, head+name)
		}
	}
	fields := md.Fields()
	for i := range fields.Len() {
		add(string(fields.Get(i).Name()))
	}
	if s := shapeOf(md); s != nil {
		for name := range s.aliases {
			add(name)
		}
	}
	slices.Sort(out)
	return out
}
