package manifest

import (
	"bytes"
	"errors"
	"io"

	yamlv3 "go.yaml.in/yaml/v3"
)

// checkExpandedSize rejects, with reason "too_large", a YAML document that
// is bigger than limit bytes once its aliases are expanded.
//
// The YAML decoders behind sigs.k8s.io/yaml bound alias expansion by the
// number of nodes it makes, not by bytes: an anchored 1 MB string aliased
// 200 times is 200 MB of JSON, and well over a GB of memory, before the
// Pod decoder gets to see and reject it. No maintained Go YAML decoder
// bounds the expanded bytes, so rather than fork one, this check parses the
// document into a tree of go.yaml.in/yaml/v3 nodes first. That tree holds
// an alias as a pointer to its anchored node and is never expanded: it
// costs memory in proportion to the document, which the file size cap
// already bounds. Walking it, with each anchored node's size computed once,
// gives the expanded size in time linear in the document. Each node counts
// one byte plus the bytes of its value, so that aliased empty collections
// (the classic billion laughs) count too.
//
// A document that this parser rejects is rejected with reason "decode";
// it differs little from the one behind sigs.k8s.io/yaml, and the strict
// decoder would reject nearly all such documents as well.
func checkExpandedSize(doc []byte, limit int64) error {
	var root yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return reject(reasonDecode, "%w", err)
	}
	size := expandedSizer{memo: make(map[*yamlv3.Node]int64), busy: make(map[*yamlv3.Node]bool), limit: limit}
	n, err := size.of(&root)
	if err != nil {
		return err
	}
	if n > limit {
		return reject(reasonTooLarge, "document is %d bytes with its aliases expanded, over the limit of %d bytes", n, limit)
	}
	return nil
}

// expandedSizer computes the expanded size of YAML nodes.
type expandedSizer struct {
	memo  map[*yamlv3.Node]int64 // The size of each anchored node seen.
	busy  map[*yamlv3.Node]bool  // The anchored nodes being sized: an alias to one is a cycle.
	limit int64
}

// of returns the expanded size of n, or an error as soon as it is over the
// limit (which also keeps the sum from overflowing) or for an alias cycle.
func (s *expandedSizer) of(n *yamlv3.Node) (int64, error) {
	if n == nil {
		return 0, nil
	}
	if n.Kind == yamlv3.AliasNode {
		return s.of(n.Alias)
	}
	if n.Anchor != "" {
		if size, ok := s.memo[n]; ok {
			return size, nil
		}
		if s.busy[n] {
			return 0, reject(reasonDecode, "anchor %q contains an alias to itself", n.Anchor)
		}
		s.busy[n] = true
		defer delete(s.busy, n)
	}
	size := 1 + int64(len(n.Value))
	for _, c := range n.Content {
		cs, err := s.of(c)
		if err != nil {
			return 0, err
		}
		size += cs
		if size > s.limit {
			return 0, reject(reasonTooLarge, "document is over the limit of %d bytes with its aliases expanded", s.limit)
		}
	}
	if n.Anchor != "" {
		s.memo[n] = size
	}
	return size, nil
}
