package fieldmask

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

const (
	// maxSuggestName is the length of the longest path element that a
	// suggestion is looked for; no field name comes close to it.
	maxSuggestName = 64
	// maxFixes is how many elements of one path a suggestion corrects.
	maxFixes = 4
)

// unknownField returns the error for a path whose element name, at byte
// offset start, names no field of md, with a suggestion when one is close.
func unknownField(path string, start int, md protoreflect.MessageDescriptor, name string) error {
	msg := fmt.Sprintf("invalid field mask path %q: %s has no field %q", show(path), md.FullName(), truncate(name, maxSuggestName))
	if owner := shapeOf(md).jsonOnlyOwner(name); owner != "" {
		return fmt.Errorf("%s: %q is in the JSON of a %s (%s) but not in its proto encoding, which masks select from",
			msg, name, md.Name(), owner)
	}
	if s := suggest(path, start, md, name); s != "" {
		return fmt.Errorf("%s; did you mean %q?", msg, show(s))
	}
	return fmt.Errorf("%s", msg)
}

// suggest returns path with the element name at byte offset start, which
// names no field of md, replaced by the closest field name, and the elements
// after it corrected likewise (up to maxFixes in all) as long as they can be.
// It returns "" when no field name is close to name.
func suggest(path string, start int, md protoreflect.MessageDescriptor, name string) string {
	var b strings.Builder
	b.WriteString(path[:start])
	fixes := 0
	rest := path[start:]
	for {
		name, more, found := strings.Cut(rest, ".")
		fd := lookup(md, name)
		if fd == nil {
			if fixes == maxFixes {
				break
			}
			if name = closest(md, name); name == "" {
				break
			}
			fixes++
			fd = lookup(md, name)
		}
		if b.Len() > start {
			b.WriteByte('.')
		}
		b.WriteString(name)
		if !found || fd.IsMap() || fd.Message() == nil {
			break
		}
		md, rest = fd.Message(), more
	}
	if fixes == 0 {
		return ""
	}
	return b.String()
}

// lookup returns the field of md that name selects, as a proto or a JSON
// name: the last of the fields a JSON name stands for.
func lookup(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByName(protoreflect.Name(name)); fd != nil {
		return fd
	}
	if chain := shapeOf(md).alias(name); chain != nil {
		return chain[len(chain)-1]
	}
	return nil
}

// closest returns the name of md (proto field name, JSON name, or the proto
// name of an embedded field given by its Go name) closest to name, or "" if
// none is close: names are compared in lower case without underscores and
// dashes ("pod_ips" and "PodIPs" are "podIPs"), and their edit distance must
// be at most a third of the length of name (at least 1, at most 3). The
// first of the closest names wins: proto names in field order, then the
// others in sorted order.
func closest(md protoreflect.MessageDescriptor, name string) string {
	if name == "" || len(name) > maxSuggestName {
		return ""
	}
	want := fold(name)
	limit := min(max(len(want)/3, 1), 3)
	best, bestDist := "", limit+1
	consider := func(cand, spelling string) {
		if d := distance(want, fold(cand)); d < bestDist {
			best, bestDist = spelling, d
		}
	}
	fields := md.Fields()
	for i := range fields.Len() {
		n := string(fields.Get(i).Name())
		consider(n, n)
	}
	if s := shapeOf(md); s != nil {
		for _, n := range s.names {
			if fd, ok := s.goNames[n]; ok {
				consider(n, string(fd.Name()))
			} else {
				consider(n, n)
			}
		}
	}
	return best
}

// fold returns s in lower case without underscores and dashes.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return toLowerASCII(r)
	}, s)
}

func toLowerASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// distance returns the edit distance between a and b, in bytes: the number
// of insertions, deletions, substitutions and transpositions of adjacent
// bytes (the optimal string alignment distance).
func distance(a, b string) int {
	var buf [3 * (maxSuggestName + 1)]int // no allocation for short names
	cells := buf[:0]
	if n := 3 * (len(b) + 1); n > len(buf) {
		cells = make([]int, 0, n)
	}
	cells = cells[:3*(len(b)+1)]
	older, prev, cur := cells[:len(b)+1], cells[len(b)+1:2*(len(b)+1)], cells[2*(len(b)+1):]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], older[j-2]+1)
			}
		}
		older, prev, cur = prev, cur, older
	}
	return prev[len(b)]
}
