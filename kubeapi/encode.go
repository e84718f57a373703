package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/podsapi/podsapi/podtypes"
	"github.com/podsapi/podsapi/store"
)

// The encodings of a pod version are views of its store.Pod (Pod.View):
// computed once per version, format and resourceVersion, and shared by every
// client, for as long as the store keeps the version's views.

// Encodes returns how many encodings of pods the handler has computed since
// it was created: list items, objects, watch events and the kubelet's items,
// each once per pod version, format and resourceVersion while the store
// keeps the version's views, whatever the number of clients that read it.
func (h *Handler) Encodes() uint64 { return h.encodes.Load() }

// decode returns the pod of raw as the handler serves it: with the
// resourceVersion rv (a revision of the store) in place of the one its
// source gave it, and, for a mirror pod whose source kept the API server's
// UID, with that UID.
func decode(raw []byte, rv string) (*corev1.Pod, error) {
	pod, apiUID, err := decodeStored(raw)
	if err != nil {
		return nil, err
	}
	pod.ResourceVersion = rv
	if apiUID != "" {
		pod.UID = apiUID
	}
	return pod, nil
}

// decodeStored returns the pod of raw as its source gave it, without the
// annotation in which a source keeps a mirror pod's API server UID (which
// neither the API server nor the kubelet shows), and that UID, or "".
func decodeStored(raw []byte) (*corev1.Pod, types.UID, error) {
	pod := &corev1.Pod{}
	if err := pod.Unmarshal(raw); err != nil {
		return nil, "", fmt.Errorf("decode stored pod: %w", err)
	}
	uid, ok := pod.Annotations[podtypes.MirrorPodUIDAnnotation]
	if ok {
		delete(pod.Annotations, podtypes.MirrorPodUIDAnnotation)
	}
	return pod, types.UID(uid), nil
}

// item returns the encoding of p, a version of an object of res, as an
// item of a list in fm: no kind (the object) or its meta.k8s.io kind (a
// PartialObjectMetadata), its resourceVersion that of its version.
func (h *Handler) item(res *resource, fm form, p *store.Pod) ([]byte, error) {
	return p.View("kubeapi/"+fm.key()+"/item", func(raw []byte) ([]byte, error) {
		h.encodes.Add(1)
		obj, err := res.decode(raw, res.reader.Revision(p.Version))
		if err != nil {
			return nil, err
		}
		return encodeItem(fm, obj)
	})
}

// encodeItem returns the encoding of obj as an item of a list in fm.
func encodeItem(fm form, obj object) ([]byte, error) {
	var out runtime.Object = obj
	if fm.as == asPartial || fm.as == asPartialList {
		partial := asPartialObject(obj, fm.gv)
		if fm.mediaType == mediaProtobuf {
			return partial.Marshal()
		}
		out = partial
	} else if fm.mediaType == mediaProtobuf {
		return obj.Marshal()
	}
	var b bytes.Buffer
	if err := fm.plain.Encode(out, &b); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// asPartialObject returns the PartialObjectMetadata of obj in gv, as the
// API server transforms an object for a client that asks for one.
func asPartialObject(obj object, gv schema.GroupVersion) *metav1.PartialObjectMetadata {
	partial := &metav1.PartialObjectMetadata{}
	if m, ok := obj.GetObjectMeta().(*metav1.ObjectMeta); ok {
		partial.ObjectMeta = *m
	}
	partial.SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
	return partial
}

// object returns the encoding of p, a version of an object of res, as an
// object of its own in fm (a get's body, a watch event's object): with its
// kind, and the resourceVersion of the store version version (the
// object's own, or that of its deletion).
func (h *Handler) object(res *resource, fm form, p *store.Pod, version uint64) ([]byte, error) {
	return p.View("kubeapi/"+fm.key()+"/obj/"+strconv.FormatUint(version, 10), func(raw []byte) ([]byte, error) {
		h.encodes.Add(1)
		obj, err := res.decode(raw, res.reader.Revision(version))
		if err != nil {
			return nil, err
		}
		return encodeObject(fm, obj)
	})
}

// encodeObject returns the encoding of obj as an object of its own in fm.
func encodeObject(fm form, obj object) ([]byte, error) {
	var b bytes.Buffer
	var err error
	if fm.as == asPartial || fm.as == asPartialList {
		err = fm.plain.Encode(asPartialObject(obj, fm.gv), &b)
	} else {
		err = fm.object.Encode(obj, &b)
	}
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// event returns the encoding in fm, unframed, of a watch event of type t
// whose object is p, of res, at the store version version.
func (h *Handler) event(res *resource, fm form, t watch.EventType, p *store.Pod, version uint64) ([]byte, error) {
	return p.View("kubeapi/"+fm.key()+"/ev/"+string(t)+"/"+strconv.FormatUint(version, 10), func([]byte) ([]byte, error) {
		h.encodes.Add(1)
		obj, err := h.object(res, fm, p, version)
		if err != nil {
			return nil, err
		}
		return encodeEvent(fm.format, res, t, obj)
	})
}

// encodeEvent returns the encoding in f, unframed, of a watch event of res
// of type t whose object is encoded as obj.
func encodeEvent(f *format, res *resource, t watch.EventType, obj []byte) ([]byte, error) {
	var b bytes.Buffer
	ev := &metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: obj}}
	if err := f.events[res.groupVersion()].Encode(ev, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// bookmarkObject returns the object of a BOOKMARK event of res at
// revision rv, marking the end of the initial events when end is true.
func bookmarkObject(res *resource, rv string, end bool) object {
	obj := res.empty()
	m := obj.GetObjectMeta()
	m.SetResourceVersion(rv)
	if end {
		m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return obj
}

// bookmark returns the encoding in fm of a BOOKMARK event of res at
// revision rv, marking the end of the initial events when end is true.
func bookmark(res *resource, fm form, rv string, end bool) ([]byte, error) {
	obj, err := encodeObject(fm, bookmarkObject(res, rv, end))
	if err != nil {
		return nil, err
	}
	return encodeEvent(fm.format, res, watch.Bookmark, obj)
}

// body is a response spliced from parts, written without being copied into
// one buffer: the pods' cached encodings are written as they are.
type body struct {
	parts [][]byte
	size  int
}

func (b *body) add(p []byte) {
	b.parts = append(b.parts, p)
	b.size += len(p)
}

// bytes returns the body in one slice.
func (b *body) bytes() []byte {
	out := make([]byte, 0, b.size)
	for _, p := range b.parts {
		out = append(out, p...)
	}
	return out
}

// writeTo writes the body to w.
func (b *body) writeTo(w io.Writer) error {
	for _, p := range b.parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// objectList returns the encoding in fm of a list of res (a v1.PodList, an
// apps/v1.ReplicaSetList, or, for a client that asks for one, a
// meta.k8s.io PartialObjectMetadataList) of meta and items (encoded by item), as the
// API server's serializers encode one: the items are spliced in, not
// encoded or copied again.
func objectList(res *resource, fm form, meta metav1.ListMeta, items [][]byte) (*body, error) {
	tm := runtime.TypeMeta{APIVersion: res.apiVersion(), Kind: res.listKind()}
	metaField, itemsField := protowire.Number(1), protowire.Number(2)
	if fm.as == asPartialList {
		tm = runtime.TypeMeta{APIVersion: fm.gv.String(), Kind: "PartialObjectMetadataList"}
		if fm.gv == metav1beta1.SchemeGroupVersion {
			// v1beta1's list numbers its fields the other way round.
			metaField, itemsField = 2, 1
		}
	}
	if fm.mediaType == mediaProtobuf {
		return protobufList(tm, metaField, itemsField, meta, items)
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	b := &body{parts: make([][]byte, 0, 2*len(items)+2)}
	b.add(append(append([]byte(`{"kind":"`+tm.Kind+`","apiVersion":"`+tm.APIVersion+`","metadata":`), m...), `,"items":[`...))
	for i, it := range items {
		if i > 0 {
			b.add(comma)
		}
		b.add(it)
	}
	b.add(listEnd)
	return b, nil
}

var (
	comma   = []byte(",")
	listEnd = []byte("]}\n")
)

// protobufMagic starts every object the Kubernetes protobuf serializer
// encodes (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// unknownEnd ends a runtime.Unknown whose contentEncoding and contentType
// are empty, as its generated marshaller writes them (fields 3 and 4, empty).
var unknownEnd = []byte{0x1a, 0x00, 0x22, 0x00}

// protobufList returns the protobuf encoding of a list of type tm: its
// fields (metadata and items, numbered metaField and itemsField, written in
// the order of their numbers) in a runtime.Unknown of its kind (typeMeta =
// 1, raw = 2) behind the serializer's magic, as protobuf.Serializer writes
// one (TestEncodings compares them byte for byte).
func protobufList(tm runtime.TypeMeta, metaField, itemsField protowire.Number, meta metav1.ListMeta, items [][]byte) (*body, error) {
	m, err := meta.Marshal()
	if err != nil {
		return nil, err
	}
	tmb, err := tm.Marshal()
	if err != nil {
		return nil, err
	}
	raw := protowire.SizeTag(metaField) + protowire.SizeBytes(len(m))
	for _, it := range items {
		raw += protowire.SizeTag(itemsField) + protowire.SizeBytes(len(it))
	}
	head := append([]byte(nil), protobufMagic...)
	head = protowire.AppendTag(head, 1, protowire.BytesType)
	head = protowire.AppendBytes(head, tmb)
	head = protowire.AppendTag(head, 2, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(raw))
	var metaPart []byte
	metaPart = protowire.AppendTag(metaPart, metaField, protowire.BytesType)
	metaPart = protowire.AppendBytes(metaPart, m)
	b := &body{parts: make([][]byte, 0, 2*len(items)+3)}
	b.add(head)
	if metaField < itemsField {
		b.add(metaPart)
	}
	// The items' tags and lengths, in one buffer.
	prefixes := make([]byte, 0, len(items)*(1+protowire.SizeVarint(1<<32)))
	for _, it := range items {
		start := len(prefixes)
		prefixes = protowire.AppendTag(prefixes, itemsField, protowire.BytesType)
		prefixes = protowire.AppendVarint(prefixes, uint64(len(it)))
		b.add(prefixes[start:len(prefixes):len(prefixes)])
		b.add(it)
	}
	if metaField > itemsField {
		b.add(metaPart)
	}
	b.add(unknownEnd)
	return b, nil
}
