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
	"k8s.io/apimachinery/pkg/runtime"
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

// item returns the encoding of p as an item of a list in f: no kind, its
// resourceVersion that of its version.
func (h *Handler) item(f *format, p *store.Pod) ([]byte, error) {
	return p.View(f.itemKey, func(raw []byte) ([]byte, error) {
		h.encodes.Add(1)
		pod, err := decode(raw, h.pods.Revision(p.Version))
		if err != nil {
			return nil, err
		}
		if f.mediaType == mediaProtobuf {
			return pod.Marshal()
		}
		var b bytes.Buffer
		if err := f.plain.Encode(pod, &b); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
	})
}

// object returns the encoding of p as an object of its own in f (a get's
// body, a watch event's object): with its kind, and the resourceVersion of
// the store version version (the pod's own, or that of its deletion).
func (h *Handler) object(f *format, p *store.Pod, version uint64) ([]byte, error) {
	return p.View("kubeapi/"+f.id+"/obj/"+strconv.FormatUint(version, 10), func(raw []byte) ([]byte, error) {
		h.encodes.Add(1)
		pod, err := decode(raw, h.pods.Revision(version))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := f.object.Encode(pod, &b); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	})
}

// event returns the encoding in f, unframed, of a watch event of type t
// whose object is p at the store version version.
func (h *Handler) event(f *format, t watch.EventType, p *store.Pod, version uint64) ([]byte, error) {
	return p.View("kubeapi/"+f.id+"/ev/"+string(t)+"/"+strconv.FormatUint(version, 10), func([]byte) ([]byte, error) {
		h.encodes.Add(1)
		obj, err := h.object(f, p, version)
		if err != nil {
			return nil, err
		}
		return encodeEvent(f, t, obj)
	})
}

// encodeEvent returns the encoding in f, unframed, of a watch event of type t
// whose object is encoded as obj.
func encodeEvent(f *format, t watch.EventType, obj []byte) ([]byte, error) {
	var b bytes.Buffer
	ev := &metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: obj}}
	if err := f.event.Encode(ev, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// bookmark returns the encoding in f of a BOOKMARK event at revision rv,
// marking the end of the initial events when end is true.
func bookmark(f *format, rv string, end bool) ([]byte, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if end {
		pod.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	var b bytes.Buffer
	if err := f.object.Encode(pod, &b); err != nil {
		return nil, err
	}
	return encodeEvent(f, watch.Bookmark, b.Bytes())
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

// podList returns the encoding in f of a v1.PodList of meta and items
// (encoded by item), as the API server's serializers encode one: the items
// are spliced in, not encoded or copied again.
func podList(f *format, meta metav1.ListMeta, items [][]byte) (*body, error) {
	if f.mediaType == mediaProtobuf {
		return protobufList(meta, items)
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	b := &body{parts: make([][]byte, 0, 2*len(items)+2)}
	b.add(append(append([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":`), m...), `,"items":[`...))
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

// protobufList returns the protobuf encoding of a v1.PodList: its fields
// (metadata = 1, items = 2) in a runtime.Unknown of kind PodList (typeMeta =
// 1, raw = 2) behind the serializer's magic, as protobuf.Serializer writes
// one (TestEncodings compares them byte for byte).
func protobufList(meta metav1.ListMeta, items [][]byte) (*body, error) {
	m, err := meta.Marshal()
	if err != nil {
		return nil, err
	}
	tm, err := (&runtime.TypeMeta{APIVersion: "v1", Kind: "PodList"}).Marshal()
	if err != nil {
		return nil, err
	}
	raw := protowire.SizeTag(1) + protowire.SizeBytes(len(m))
	for _, it := range items {
		raw += protowire.SizeTag(2) + protowire.SizeBytes(len(it))
	}
	head := append([]byte(nil), protobufMagic...)
	head = protowire.AppendTag(head, 1, protowire.BytesType)
	head = protowire.AppendBytes(head, tm)
	head = protowire.AppendTag(head, 2, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(raw))
	head = protowire.AppendTag(head, 1, protowire.BytesType)
	head = protowire.AppendBytes(head, m)
	b := &body{parts: make([][]byte, 0, 2*len(items)+2)}
	b.add(head)
	// The items' tags and lengths, in one buffer.
	prefixes := make([]byte, 0, len(items)*(1+protowire.SizeVarint(1<<32)))
	for _, it := range items {
		start := len(prefixes)
		prefixes = protowire.AppendTag(prefixes, 2, protowire.BytesType)
		prefixes = protowire.AppendVarint(prefixes, uint64(len(it)))
		b.add(prefixes[start:len(prefixes):len(prefixes)])
		b.add(it)
	}
	b.add(unknownEnd)
	return b, nil
}
