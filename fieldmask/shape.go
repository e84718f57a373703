package fieldmask

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
)

// The JSON shape of a pod (what `kubectl get pod -o json` prints) and its
// proto shape differ where a Kubernetes Go type embeds a struct: encoding/json
// inlines the embedded struct's fields into the outer object, while the proto
// message keeps the embedded struct as a field of its own. So the JSON path
// "spec.volumes.emptyDir" is "spec.volumes.volumeSource.emptyDir" in the
// proto shape, and "spec.containers.livenessProbe.httpGet" is
// "spec.containers.livenessProbe.handler.httpGet".
//
// The differences are derived once from the k8s.io/api Go types, walked in
// step with the proto descriptors that masks are checked against: a Go field
// is matched to its proto field by the number in its protobuf struct tag, and
// its JSON name is the one encoding/json gives it (its json tag, or its Go
// name; embedded structs without a JSON name are inlined, recursively, and a
// shallower name hides a deeper one).

// messageShape is what the JSON shape of one message adds to its proto
// fields. Every map is nil when the message has nothing of that kind.
type messageShape struct {
	// aliases maps a JSON name that is not a proto field name of the
	// message to the proto fields it stands for: the embedded fields that
	// the JSON shape inlines, then the field itself, as in "emptyDir" of
	// Volume: [volumeSource, emptyDir].
	aliases map[string][]protoreflect.FieldDescriptor
	// jsonOnly maps a JSON name that the proto encoding does not carry at
	// all to the Go struct that holds it ("kind" of Pod: "TypeMeta").
	jsonOnly map[string]string
	// goNames maps the Go name (in lower camel case) of an embedded field,
	// where it differs from the proto name, to the proto field, so that
	// "probeHandler" can be suggested as "handler". Suggestions only.
	goNames map[string]protoreflect.FieldDescriptor
	// names are the alias and Go names in sorted order, for suggestions.
	names []string
}

// podShapes returns the shape of every message reachable from Pod whose JSON
// shape differs from its proto shape. It is derived on first use.
var podShapes = sync.OnceValue(func() map[protoreflect.FullName]*messageShape {
	return deriveShapes(podDescriptor, reflect.TypeFor[corev1.Pod]())
})

// shapeOf returns the JSON shape of md, or nil when it is the proto shape.
func shapeOf(md protoreflect.MessageDescriptor) *messageShape {
	return podShapes()[md.FullName()]
}

// alias returns the proto fields that the JSON name stands for in the
// message of s, or nil.
func (s *messageShape) alias(name string) []protoreflect.FieldDescriptor {
	if s == nil {
		return nil
	}
	return s.aliases[name]
}

// jsonOnlyOwner returns the Go struct holding the JSON name that the proto
// encoding does not carry, or "".
func (s *messageShape) jsonOnlyOwner(name string) string {
	if s == nil {
		return ""
	}
	return s.jsonOnly[name]
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// deriveShapes walks the message md together with the Go struct type gt that
// k8s.io/api decodes it into, and every message field below them, once per
// message type. Types with their own JSON encoding (Time, Quantity,
// IntOrString, ...) are leaves: their JSON shape is not their fields.
func deriveShapes(md protoreflect.MessageDescriptor, gt reflect.Type) map[protoreflect.FullName]*messageShape {
	shapes := make(map[protoreflect.FullName]*messageShape)
	seen := make(map[protoreflect.FullName]bool)
	var walk func(md protoreflect.MessageDescriptor, gt reflect.Type)
	walk = func(md protoreflect.MessageDescriptor, gt reflect.Type) {
		if seen[md.FullName()] || customJSON(gt) {
			return
		}
		seen[md.FullName()] = true
		if s := shapeFor(md, gt); s != nil {
			shapes[md.FullName()] = s
		}
		for i := range gt.NumField() {
			f := gt.Field(i)
			fd := protoField(md, f)
			if fd == nil || fd.IsMap() || fd.Message() == nil {
				continue
			}
			if st := structType(f.Type); st != nil {
				walk(fd.Message(), st)
			}
		}
	}
	walk(md, gt)
	return shapes
}

// jsonField is a JSON name of a message found while flattening its Go type.
type jsonField struct {
	chain []protoreflect.FieldDescriptor // nil when the proto encoding has no such field
	depth int                            // how many embedded structs deep
	owner string                         // the Go struct that declares it
	count int                            // how many fields have this name at depth
}

// shapeFor returns the JSON shape of md, whose Go type is gt, or nil when
// its JSON names are its proto field names.
func shapeFor(md protoreflect.MessageDescriptor, gt reflect.Type) *messageShape {
	fields := make(map[string]*jsonField)
	var goNames map[string]protoreflect.FieldDescriptor
	var flatten func(md protoreflect.MessageDescriptor, gt reflect.Type, chain []protoreflect.FieldDescriptor, depth int)
	flatten = func(md protoreflect.MessageDescriptor, gt reflect.Type, chain []protoreflect.FieldDescriptor, depth int) {
		for i := range gt.NumField() {
			f := gt.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			var fd protoreflect.FieldDescriptor
			if md != nil {
				fd = protoField(md, f)
			}
			if st := embeddedStruct(f); st != nil && name == "" {
				// encoding/json inlines the fields of an embedded struct.
				inner := protoreflect.MessageDescriptor(nil)
				if fd != nil && fd.Message() != nil && !fd.IsList() && !fd.IsMap() {
					inner = fd.Message()
					if depth == 0 {
						if goName := lowerFirst(f.Name); goName != string(fd.Name()) {
							if goNames == nil {
								goNames = make(map[string]protoreflect.FieldDescriptor)
							}
							goNames[goName] = fd
						}
					}
				}
				var next []protoreflect.FieldDescriptor
				if inner != nil {
					next = append(slices.Clip(chain), fd)
				}
				flatten(inner, st, next, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			jf := &jsonField{depth: depth, owner: gt.Name(), count: 1}
			if fd != nil {
				jf.chain = append(slices.Clip(chain), fd)
			}
			switch old := fields[name]; {
			case old == nil || depth < old.depth:
				fields[name] = jf
			case depth == old.depth:
				old.count++ // ambiguous: encoding/json drops it, and so do masks
			}
		}
	}
	flatten(md, gt, nil, 0)

	var s messageShape
	for name, jf := range fields {
		switch {
		case jf.count > 1 || md.Fields().ByName(protoreflect.Name(name)) != nil:
			// Ambiguous, or a proto field name already.
		case jf.chain == nil:
			if s.jsonOnly == nil {
				s.jsonOnly = make(map[string]string)
			}
			s.jsonOnly[name] = jf.owner
		default:
			if s.aliases == nil {
				s.aliases = make(map[string][]protoreflect.FieldDescriptor)
			}
			s.aliases[name] = jf.chain
			s.names = append(s.names, name)
		}
	}
	for name := range goNames {
		if md.Fields().ByName(protoreflect.Name(name)) == nil && s.aliases[name] == nil {
			if s.goNames == nil {
				s.goNames = make(map[string]protoreflect.FieldDescriptor)
			}
			s.goNames[name] = goNames[name]
			s.names = append(s.names, name)
		}
	}
	if s.aliases == nil && s.jsonOnly == nil && s.goNames == nil {
		return nil
	}
	slices.Sort(s.names)
	return &s
}

// protoField returns the field of md that the Go struct field f encodes to,
// by the number in its protobuf tag, or nil when f has no protobuf tag or
// its tag disagrees with md (then f is not treated as a proto field).
func protoField(md protoreflect.MessageDescriptor, f reflect.StructField) protoreflect.FieldDescriptor {
	tag := f.Tag.Get("protobuf")
	if tag == "" || tag == "-" {
		return nil
	}
	parts := strings.Split(tag, ",")
	if len(parts) < 2 {
		return nil
	}
	n, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil {
		return nil
	}
	fd := md.Fields().ByNumber(protoreflect.FieldNumber(n))
	if fd == nil {
		return nil
	}
	for _, p := range parts[2:] {
		if name, ok := strings.CutPrefix(p, "name="); ok && name != string(fd.Name()) {
			return nil
		}
	}
	return fd
}

// structType returns the struct type that t holds (t itself, or the element
// of a pointer, slice or array of structs), or nil.
func structType(t reflect.Type) reflect.Type {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			t = t.Elem()
		case reflect.Struct:
			return t
		default:
			return nil
		}
	}
}

// embeddedStruct returns the struct type of f when f embeds a struct or a
// pointer to one (encoding/json treats other embedded types as named
// fields), or nil.
func embeddedStruct(f reflect.StructField) reflect.Type {
	if !f.Anonymous {
		return nil
	}
	t := f.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

// customJSON reports whether t has a JSON encoding of its own, which is then
// not the object of its fields.
func customJSON(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)
}

// lowerFirst returns s with its first letter in lower case, as Go field
// names become proto and JSON names ("VolumeSource": "volumeSource").
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}
