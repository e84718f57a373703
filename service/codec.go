package service

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is connect's JSON codec for messages whose fields may travel as
// raw fields (see withRaw): it decodes them into typed fields before writing
// JSON, which would otherwise leave them out. JSON serves people debugging
// with curl; the fast path is the binary protobuf codec.
type jsonCodec struct{ name string }

// Name returns the codec's name, as used in content types.
func (c jsonCodec) Name() string { return c.name }

// Marshal writes msg as protobuf JSON.
func (c jsonCodec) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", msg)
	}
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		raw, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		typed := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(raw, typed); err != nil {
			return nil, err
		}
		m = typed
	}
	return protojson.Marshal(m)
}

// Unmarshal reads protobuf JSON into msg, ignoring unknown fields.
func (c jsonCodec) Unmarshal(data []byte, msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto.Message", msg)
	}
	if len(data) == 0 {
		return nil
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, m)
}
