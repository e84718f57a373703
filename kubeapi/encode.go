package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/podsapi/podsapi/store"
)

// The encodings of a pod version are views of its store.Pod (Pod.View):
// computed once per version, format and resourceVersion, and shared by every
// client, for as long as the store keeps the version's views.

// decode returns the pod of raw as the handler serves it: with the
// resourceVersion rv (a revision of the store) in place of the one its
// source gave it.
func decode(raw []byte, rv string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := pod.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("decode stored pod: %w", err)
	}
	pod.ResourceVersion = rv
	return pod, nil
}

// item returns the encoding of p as an item of a list in f: no kind, its
// resourceVersion that of its version.
func (h *Handler) item(f *format, p *store.Pod) ([]byte, error) {
	return p.View("kubeapi/"+f.id+"/item", func(raw []byte) ([]byte, error) {
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

// podList returns the encoding in f of a v1.PodList of meta and items
// (encoded by item), as the API server's serializers encode one: the items
// are spliced in, not encoded again.
func podList(f *format, meta metav1.ListMeta, items [][]byte) ([]byte, error) {
	if f.mediaType == mediaProtobuf {
		return protobufList(meta, items)
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	n := len(m) + 64
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"kind":"PodList","apiVersion":"v1","metadata":`...)
	b = append(b, m...)
	b = append(b, `,"items":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, "]}\n"...)
	return b, nil
}

// protobufMagic starts every object the Kubernetes protobuf serializer
// encodes (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// protobufList returns the protobuf encoding of a v1.PodList: its fields
// (metadata = 1, items = 2) in a runtime.Unknown of kind PodList behind the
// serializer's magic, as protobuf.Serializer writes one.
func protobufList(meta metav1.ListMeta, items [][]byte) ([]byte, error) {
	m, err := meta.Marshal()
	if err != nil {
		return nil, err
	}
	n := len(m) + 8
	for _, it := range items {
		n += len(it) + 8
	}
	body := make([]byte, 0, n)
	body = protowire.AppendTag(body, 1, protowire.BytesType)
	body = protowire.AppendBytes(body, m)
	for _, it := range items {
		body = protowire.AppendTag(body, 2, protowire.BytesType)
		body = protowire.AppendBytes(body, it)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Raw: body}
	out := make([]byte, len(protobufMagic), len(protobufMagic)+u.Size())
	copy(out, protobufMagic)
	ub, err := u.Marshal()
	if err != nil {
		return nil, err
	}
	return append(out, ub...), nil
}
