package fieldmask

import (
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// AppendProjection appends to dst the protobuf encoding of the
// k8s.io.api.core.v1.Pod encoded in src, keeping only the fields that m
// selects, and returns the extended slice. It works on the wire bytes with a
// program compiled by [Parse]: it decodes no message, uses no reflection, and
// allocates only when dst must grow. The result is never longer than src, so
// a dst with len(src) bytes of spare capacity never grows.
//
// A selected field is copied verbatim: every record of it, in wire order,
// including every element of a repeated or map field. A message field below
// which only some paths are selected is projected recursively and emitted with
// its new length even when nothing in it is selected, so that its presence is
// preserved; likewise every element of a repeated message field is emitted,
// which preserves the element count. Fields that are not selected, unknown
// field numbers, and records whose wire type does not match their field's
// type (which the Go protobuf runtime also treats as unknown) are dropped.
// Records are otherwise kept in their original order.
//
// Malformed input, at any level that the projection has to read, yields an
// error naming the message and byte offset; dst is then returned with its
// original length (its spare capacity may have been written to). Bytes inside a field that is copied verbatim or dropped are
// not validated beyond their wire format.
//
// The nil mask selects the whole pod: it appends src unchanged.
func (m *Mask) AppendProjection(dst, src []byte) ([]byte, error) {
	if m == nil {
		return append(dst, src...), nil
	}
	out, err := m.root.project(dst, src, 0)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// project appends to dst the projection of the message encoded in src. base
// is the offset of src in the top-level input, for error messages.
func (n *node) project(dst, src []byte, base int) ([]byte, error) {
	run := 0 // start of the pending run of records to copy verbatim
	keeping := false
	for i := 0; i < len(src); {
		// The tag, with the common one-byte case inline.
		tag, tn := uint64(src[i]), 1
		if tag >= 0x80 {
			if tag, tn = protowire.ConsumeVarint(src[i:]); tn < 0 {
				return dst, n.malformed(base+i, protowire.ParseError(tn))
			}
		}
		if tag>>3 == 0 || tag>>3 > uint64(protowire.MaxValidNumber) {
			return dst, n.malformed(base+i, fmt.Errorf("invalid field number %d", tag>>3))
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		r := &dropRule
		if int(num) < len(n.rules) {
			r = &n.rules[num]
		}
		// The value, with length-delimited values inline.
		val := src[i+tn:]
		vn := 0
		if typ == protowire.BytesType {
			l, ln := uint64(0), 1
			if len(val) > 0 && val[0] < 0x80 {
				l = uint64(val[0])
			} else if l, ln = protowire.ConsumeVarint(val); ln < 0 {
				return dst, n.malformed(base+i+tn, protowire.ParseError(ln))
			}
			if l > uint64(len(val)-ln) {
				return dst, n.malformed(base+i+tn, io.ErrUnexpectedEOF)
			}
			vn = ln + int(l)
			if r.op == opProject {
				if keeping {
					dst = append(dst, src[run:i]...)
					keeping = false
				}
				dst = append(dst, src[i:i+tn]...) // the tag, verbatim
				var err error
				if dst, err = appendProjected(dst, val[ln:vn], r.child, base+i+tn+ln); err != nil {
					return dst, err
				}
				i += tn + vn
				continue
			}
		} else if vn = protowire.ConsumeFieldValue(num, typ, val); vn < 0 {
			return dst, n.malformed(base+i+tn, protowire.ParseError(vn))
		}
		if r.op == opKeep && (typ == r.wire || r.packed && typ == protowire.BytesType) {
			if !keeping {
				run, keeping = i, true
			}
		} else if keeping {
			dst = append(dst, src[run:i]...)
			keeping = false
		}
		i += tn + vn
	}
	if keeping {
		dst = append(dst, src[run:]...)
	}
	return dst, nil
}

// dropRule is the rule of the field numbers past the end of a node's rules.
var dropRule rule

// appendProjected appends the length-prefixed projection of the message in
// payload by child. The projection is at most len(payload) bytes long, so the
// length prefix is first reserved with the size that len(payload) needs, and
// the projected bytes are shifted left afterwards if their length needs fewer.
func appendProjected(dst, payload []byte, child *node, base int) ([]byte, error) {
	lenPos := len(dst)
	dst = protowire.AppendVarint(dst, uint64(len(payload)))
	start := len(dst)
	dst, err := child.project(dst, payload, base)
	if err != nil {
		return dst, err
	}
	size := len(dst) - start
	need := protowire.SizeVarint(uint64(size))
	if need != start-lenPos {
		copy(dst[lenPos+need:], dst[start:])
		dst = dst[:lenPos+need+size]
	}
	protowire.AppendVarint(dst[:lenPos], uint64(size)) // in place: capacity suffices
	return dst, nil
}

// malformed describes a parse error at byte offset off of the input.
func (n *node) malformed(off int, err error) error {
	return fmt.Errorf("fieldmask: malformed %s encoding at byte %d: %w", n.name, off, err)
}
