package kubeapi

import (
	"mime"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// The media types the handler answers in.
const (
	mediaJSON     = runtime.ContentTypeJSON     // application/json
	mediaProtobuf = runtime.ContentTypeProtobuf // application/vnd.kubernetes.protobuf
)

// format is one media type the handler encodes in, with the encoders of
// apimachinery's codec factory that the API server uses for it.
type format struct {
	// id names the format in the keys of the pods' cached views.
	id string
	// itemKey is the key of a pod's view as a list item in the format.
	itemKey string
	// mediaType is the Content-Type of its objects and lists.
	mediaType string
	// streamType is the Content-Type of its watch streams.
	streamType string
	// plain encodes an object as it is (no kind set): list items.
	plain runtime.Encoder
	// object encodes an object as v1, with its kind: a get's body, a watch
	// event's object, a Status.
	object runtime.Encoder
	// event encodes a metav1.WatchEvent, unframed.
	event runtime.Encoder
	// framer frames the events of a watch stream.
	framer runtime.Framer
}

// codecs are the formats the handler answers in.
type codecs struct {
	json, protobuf *format
}

// newCodecs returns the formats of a codec factory over a scheme of the
// types the handler serves: core/v1 (pods, and the Status and WatchEvent
// that meta/v1 adds to each group version). It is client-go's scheme
// (k8s.io/client-go/kubernetes/scheme) reduced to them: that one holds every
// API group's types, registered when the package is initialised, in every
// program that links it (about 0.7 MB of heap and 10 MB of resident memory
// in podsapi-server, with or without a Kubernetes API), and encodes these
// types the same (TestCodecsAsClientGo).
func newCodecs() *codecs {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic("kubeapi: " + err.Error())
	}
	factory := serializer.NewCodecFactory(scheme)
	f := func(id, mediaType string) *format {
		info, ok := runtime.SerializerInfoForMediaType(factory.SupportedMediaTypes(), mediaType)
		if !ok || info.StreamSerializer == nil {
			panic("kubeapi: the codec factory has no serializer for " + mediaType)
		}
		streamType := mediaType
		if mediaType != mediaJSON {
			streamType += ";stream=watch"
		}
		return &format{
			id:         id,
			itemKey:    "kubeapi/" + id + "/item",
			mediaType:  mediaType,
			streamType: streamType,
			plain:      info.Serializer,
			object:     factory.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion),
			event:      factory.EncoderForVersion(info.StreamSerializer.Serializer, corev1.SchemeGroupVersion),
			framer:     info.StreamSerializer.Framer,
		}
	}
	return &codecs{json: f("j", mediaJSON), protobuf: f("p", mediaProtobuf)}
}

// negotiate returns the format that r's Accept header asks for: the first
// media type it lists that the handler encodes in (JSON or protobuf; a
// wildcard is JSON), skipping those that ask for a transformation (an "as"
// parameter, such as kubectl's as=Table, for which it lists plain JSON as its
// fallback). It reports false when the header lists none.
func (c *codecs) negotiate(r *http.Request) (*format, bool) {
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return c.json, true
	}
	for _, line := range accept {
		for _, clause := range strings.Split(line, ",") {
			clause = strings.TrimSpace(clause)
			if clause == "" {
				continue
			}
			mt, params, err := mime.ParseMediaType(clause)
			if err != nil {
				continue
			}
			if _, ok := params["as"]; ok {
				continue
			}
			switch mt {
			case mediaJSON, "*/*", "application/*":
				return c.json, true
			case mediaProtobuf:
				return c.protobuf, true
			}
		}
	}
	return nil, false
}
