package fieldmask

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// op is what a projection does with the records of one field.
type op uint8

const (
	opDrop    op = iota // leave the record out (also: unselected and unknown fields)
	opKeep              // copy the record verbatim
	opProject           // project the embedded message and emit it with its new length
)

// rule tells a projection what to do with the records of one field number.
type rule struct {
	op     op
	wire   protowire.Type // the wire type the field is encoded with
	packed bool           // a repeated scalar, which may also come packed as BytesType
	child  *node          // the program for the embedded message, for opProject
}

// node is the compiled projection program for one message type.
type node struct {
	name  protoreflect.FullName // for error messages
	rules []rule                // indexed by field number; numbers past the end are dropped
}

// compile turns a selection subtree whose children are the selected fields of
// one message into its projection program.
func compile(s *selected) *node {
	var md protoreflect.MessageDescriptor
	if s.field == nil {
		md = podDescriptor
	} else {
		md = s.field.Message()
	}
	n := &node{name: md.FullName()}
	maxNum := 0
	for _, c := range s.children {
		maxNum = max(maxNum, int(c.field.Number()))
	}
	n.rules = make([]rule, maxNum+1)
	for _, c := range s.children {
		fd := c.field
		r := rule{op: opKeep, wire: wireType(fd.Kind())}
		r.packed = fd.IsList() && r.wire != protowire.BytesType && r.wire != protowire.StartGroupType
		if !c.whole {
			r.op = opProject
			r.child = compile(c)
		}
		n.rules[fd.Number()] = r
	}
	return n
}

// wireType returns the wire type that fields of kind k are encoded with
// (unpacked). A record of a known field with another wire type is treated
// like an unknown field, as the Go protobuf runtime does.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	default: // string, bytes, message
		return protowire.BytesType
	}
}
