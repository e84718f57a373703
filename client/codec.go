package client

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// wireMessage is a message of the Pods API that encodes and decodes itself.
// The client's messages are small hand-written types rather than the
// generated protobuf-go ones, so that pods are decoded once, from the wire
// bytes, by k8s.io/api's generated Unmarshal.
type wireMessage interface {
	marshalWire() []byte
	unmarshalWire(b []byte) error
}

// codec is the client's "proto" codec: it handles wireMessage values (the
// typed wire's) itself, and any other protobuf message (the kubelet wire's,
// from its published package, and the google.rpc.Status of an error, which
// connect decodes with the client's codec) with protobuf-go.
type codec struct{}

// Name returns "proto", so that the codec replaces connect's protobuf codec.
func (codec) Name() string { return "proto" }

// Marshal encodes a request.
func (codec) Marshal(msg any) ([]byte, error) {
	switch m := msg.(type) {
	case wireMessage:
		return m.marshalWire(), nil
	case proto.Message:
		return proto.Marshal(m)
	default:
		return nil, fmt.Errorf("client codec: cannot marshal %T", msg)
	}
}

// Unmarshal decodes a response. The pods it holds are decoded here, which
// copies what they keep: data may be reused once Unmarshal returns.
func (codec) Unmarshal(data []byte, msg any) error {
	switch m := msg.(type) {
	case wireMessage:
		return m.unmarshalWire(data)
	case proto.Message:
		return proto.Unmarshal(data, m)
	default:
		return fmt.Errorf("client codec: cannot unmarshal %T", msg)
	}
}

// selectRequest is PodListRequest and PodWatchRequest: namespace = 1,
// label_selector = 2, field_selector = 3 and, for a watch, resume_from = 4.
// Empty fields are not encoded, so that a request without selectors is
// empty, as before.
type selectRequest struct {
	namespace, labelSelector, fieldSelector, resumeFrom string
	// watch says the request is a PodWatchRequest, whose fields
	// include_workloads and workload_selector are numbered 6 and 7 (4 and
	// 5 in a PodListRequest).
	watch bool
	// includeWorkloads is include_workloads; workloads is
	// workload_selector, nil for none.
	includeWorkloads bool
	workloads        *workloadSelection
}

func (r selectRequest) marshalWire() []byte {
	var b []byte
	for i, v := range []string{r.namespace, r.labelSelector, r.fieldSelector, r.resumeFrom} {
		if v != "" {
			b = protowire.AppendTag(b, protowire.Number(i+1), protowire.BytesType)
			b = protowire.AppendString(b, v)
		}
	}
	include, selector := protowire.Number(4), protowire.Number(5)
	if r.watch {
		include, selector = 6, 7
	}
	if r.includeWorkloads {
		b = protowire.AppendTag(b, include, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if r.workloads != nil {
		var sel []byte
		for i, v := range []string{r.workloads.kind, r.workloads.name} {
			if v != "" {
				sel = protowire.AppendTag(sel, protowire.Number(i+1), protowire.BytesType)
				sel = protowire.AppendString(sel, v)
			}
		}
		b = protowire.AppendTag(b, selector, protowire.BytesType)
		b = protowire.AppendBytes(b, sel)
	}
	return b
}
func (*selectRequest) unmarshalWire(b []byte) error {
	return errors.New("client codec: requests are not decoded")
}

// getRequest is PodGetRequest: pod_uid = 1.
type getRequest struct{ uid string }

func (r getRequest) marshalWire() []byte {
	if r.uid == "" {
		return nil
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendString(b, r.uid)
}
func (*getRequest) unmarshalWire(b []byte) error {
	return errors.New("client codec: requests are not decoded")
}

// listResponse is PodListResponse: pods = 1, revision = 2, workloads = 3.
type listResponse struct {
	pods      []*corev1.Pod
	revision  string
	workloads map[types.UID]*podsv1alpha1.PodWorkload
}

func (*listResponse) marshalWire() []byte { return nil }
func (r *listResponse) unmarshalWire(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == 2 && typ == protowire.BytesType {
			r.revision = string(v)
			return nil
		}
		if num == 3 && typ == protowire.BytesType {
			return r.addWorkload(v)
		}
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		pod, err := decodePod(v)
		if err != nil {
			return err
		}
		r.pods = append(r.pods, pod)
		return nil
	})
}

// addWorkload decodes an entry of workloads: key = 1, value = 2.
func (r *listResponse) addWorkload(entry []byte) error {
	var uid types.UID
	w := &podsv1alpha1.PodWorkload{}
	err := eachField(entry, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			uid = types.UID(v)
		case num == 2 && typ == protowire.BytesType:
			return proto.UnmarshalOptions{Merge: true}.Unmarshal(v, w)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("decode workload: %w", err)
	}
	if r.workloads == nil {
		r.workloads = map[types.UID]*podsv1alpha1.PodWorkload{}
	}
	r.workloads[uid] = w
	return nil
}

// getResponse is PodGetResponse: pod = 1, workload = 2.
type getResponse struct {
	pod      *corev1.Pod
	workload *podsv1alpha1.PodWorkload
}

func (*getResponse) marshalWire() []byte { return nil }
func (r *getResponse) unmarshalWire(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == 2 && typ == protowire.BytesType {
			return mergeWorkload(&r.workload, v)
		}
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		pod, err := mergePod(r.pod, v)
		r.pod = pod
		return err
	})
}

// mergeWorkload decodes b, a PodWorkload, into *w, allocating it if nil.
func mergeWorkload(w **podsv1alpha1.PodWorkload, b []byte) error {
	if *w == nil {
		*w = &podsv1alpha1.PodWorkload{}
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(b, *w); err != nil {
		return fmt.Errorf("decode workload: %w", err)
	}
	return nil
}

// watchResponse is PodWatchResponse: pod = 1, type = 2, revision = 3,
// workload = 4.
type watchResponse struct {
	pod      *corev1.Pod
	typ      uint64
	revision string
	workload *podsv1alpha1.PodWorkload
}

func (*watchResponse) marshalWire() []byte { return nil }
func (r *watchResponse) unmarshalWire(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			pod, err := mergePod(r.pod, v)
			r.pod = pod
			return err
		case num == 2 && typ == protowire.VarintType:
			n, l := protowire.ConsumeVarint(v)
			if l < 0 {
				return protowire.ParseError(l)
			}
			r.typ = n
		case num == 3 && typ == protowire.BytesType:
			r.revision = string(v)
		case num == 4 && typ == protowire.BytesType:
			return mergeWorkload(&r.workload, v)
		}
		return nil
	})
}

// decodePod decodes one k8s.io.api.core.v1.Pod.
func decodePod(b []byte) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := pod.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	return pod, nil
}

// mergePod decodes b into pod, or a new pod when pod is nil. Protobuf
// merges repeated occurrences of a message field; k8s.io/api's Unmarshal
// does the same when given the previous value.
func mergePod(pod *corev1.Pod, b []byte) (*corev1.Pod, error) {
	if pod == nil {
		return decodePod(b)
	}
	if err := pod.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	return pod, nil
}

// eachField calls f with the number, wire type and value of every field of
// the message b. For a varint field, v is the varint's encoding; for a bytes
// field, its contents. Unknown fields are skipped by f returning nil.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("client codec: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			val, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("client codec: %w", protowire.ParseError(m))
			}
			v, n = val, m
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("client codec: %w", protowire.ParseError(n))
			}
			v = b[:n]
		}
		if err := f(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
