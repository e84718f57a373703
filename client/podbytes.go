package client

import (
	"bytes"
	"cmp"
	"fmt"
	"net/http"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/fieldmask"
)

// The kubelet's wire keeps the pods as their encodings: the client applies
// the field mask to them before it decodes them, since a kubelet ignores the
// mask, and reads their identities without decoding them.

// identityPaths are added to the field mask of a watch, as the server does,
// so that every event says which pod it is about.
var identityPaths = []string{"metadata.namespace", "metadata.name", "metadata.uid"}

// podDecoder decodes encoded pods, projected by its mask first unless the
// mask is nil. It reuses one buffer for the projections.
type podDecoder struct {
	mask *fieldmask.Mask
	buf  []byte
}

// newPodDecoder returns a decoder applying the field mask of o, parsed as
// the server parses the header the client sends, with identityPaths for a
// watch. An invalid mask is an INVALID_ARGUMENT error, as from the server.
func newPodDecoder(o callOptions, watch bool) (*podDecoder, error) {
	h := o.header()
	if h == "" {
		return &podDecoder{}, nil
	}
	header := make(http.Header)
	header.Set(fieldmask.Header, h)
	mask, err := fieldmask.FromHeader(header)
	if err == nil && watch {
		mask, err = mask.Union(identityPaths...)
	}
	if err != nil {
		return nil, errFieldMask(err)
	}
	return &podDecoder{mask: mask}, nil
}

// project returns raw projected by the mask, in the decoder's buffer, which
// the next call reuses; raw itself when the mask is nil.
func (d *podDecoder) project(raw []byte) ([]byte, error) {
	if d.mask == nil {
		return raw, nil
	}
	var err error
	if d.buf, err = d.mask.AppendProjection(d.buf[:0], raw); err != nil {
		return nil, errDecode(err)
	}
	return d.buf, nil
}

// decode returns the pod encoded in raw, projected by the mask.
func (d *podDecoder) decode(raw []byte) (*corev1.Pod, error) {
	raw, err := d.project(raw)
	if err != nil {
		return nil, err
	}
	pod, err := decodePod(raw)
	if err != nil {
		return nil, errDecode(err)
	}
	return pod, nil
}

// podIdentity is the namespace, name and UID of an encoded pod, pointing
// into its encoding.
type podIdentity struct{ namespace, name, uid []byte }

// compare orders identities by namespace, name and UID.
func (a podIdentity) compare(b podIdentity) int {
	return cmp.Or(bytes.Compare(a.namespace, b.namespace), bytes.Compare(a.name, b.name), bytes.Compare(a.uid, b.uid))
}

// identityOf reads the identity of the pod encoded in raw without decoding
// it: Pod.metadata is field 1; ObjectMeta.name 1, namespace 3 and uid 5.
func identityOf(raw []byte) (podIdentity, error) {
	var id podIdentity
	err := eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case 1:
				id.name = v
			case 3:
				id.namespace = v
			case 5:
				id.uid = v
			}
			return nil
		})
	})
	if err != nil {
		return podIdentity{}, errDecode(fmt.Errorf("decode pod: %w", err))
	}
	return id, nil
}
