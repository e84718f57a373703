package kubeapi

import (
	"net/http"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
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
	// plain encodes an object as it is (no kind set): list items, and the
	// objects of meta.k8s.io, whose kind the handler sets.
	plain runtime.Encoder
	// object encodes an object as v1 of its group, with its kind: a get's
	// body, a watch event's object, a Status.
	object runtime.Encoder
	// events encode a metav1.WatchEvent, unframed, as one of the group
	// version of the resource watched (the API server's watch encoder).
	events map[schema.GroupVersion]runtime.Encoder
	// framer frames the events of a watch stream.
	framer runtime.Framer
	// info is the codec factory's description of the media type, for the
	// negotiation.
	info runtime.SerializerInfo
}

// transform is what a client asks the pods to be turned into (the "as"
// parameter of its Accept header).
type transform int

const (
	// asPods serves pods as they are.
	asPods transform = iota
	// asPartial serves each pod as a meta.k8s.io PartialObjectMetadata.
	asPartial
	// asPartialList serves a list as a meta.k8s.io
	// PartialObjectMetadataList.
	asPartialList
	// asTable serves pods as a meta.k8s.io Table of the API server's pod
	// columns.
	asTable
)

// form is what one request is answered in: a format, the transformation
// its Accept header asks for and the group version of the result, and
// whether its JSON is indented.
type form struct {
	*format
	as transform
	// gv is meta.k8s.io/v1 or v1beta1 when as is not asPods.
	gv schema.GroupVersion
	// pretty indents a JSON response (not a watch's events), as the API
	// server's pretty serializer does.
	pretty bool
}

// key names the form's encodings of a pod in the pods' cached views: a
// format and a transformation are one encoding, shared by every client
// that asks for it.
func (fm form) key() string {
	switch fm.as {
	case asPartial, asPartialList:
		return fm.id + "/pom/" + fm.gv.Version
	case asTable:
		return fm.id + "/table/" + fm.gv.Version
	}
	return fm.id
}

// codecs are the formats the handler answers in.
type codecs struct {
	json, protobuf *format
	// accepted are the formats' serializers, JSON first, for the
	// negotiation.
	accepted []runtime.SerializerInfo
}

// servedVersions are the group versions of the kinds the handler serves:
// core/v1 (pods, namespaces, nodes), apps/v1 and batch/v1 (the owner kinds
// of WithResource). An object is encoded in the one of its group.
var servedVersions = schema.GroupVersions{corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion}

// newCodecs returns the formats of a codec factory over a scheme of the
// types the handler serves: core/v1, apps/v1 and batch/v1 (and the Status
// and WatchEvent that meta/v1 adds to each group version). It is
// client-go's scheme (k8s.io/client-go/kubernetes/scheme) reduced to them:
// that one holds every API group's types, registered when the package is
// initialised, in every program that links it (about 0.7 MB of heap and
// 10 MB of resident memory in podsapi-server, with or without a Kubernetes
// API), and encodes these types the same (TestCodecsAsClientGo).
func newCodecs() *codecs {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic("kubeapi: " + err.Error())
		}
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
		events := make(map[schema.GroupVersion]runtime.Encoder, len(servedVersions))
		for _, gv := range servedVersions {
			events[gv] = factory.EncoderForVersion(info.StreamSerializer.Serializer, gv)
		}
		return &format{
			id:         id,
			itemKey:    "kubeapi/" + id + "/item",
			mediaType:  mediaType,
			streamType: streamType,
			plain:      info.Serializer,
			object:     factory.EncoderForVersion(info.Serializer, servedVersions),
			events:     events,
			framer:     info.StreamSerializer.Framer,
			info:       info,
		}
	}
	c := &codecs{json: f("j", mediaJSON), protobuf: f("p", mediaProtobuf)}
	c.accepted = []runtime.SerializerInfo{c.json.info, c.protobuf.info}
	return c
}

// negotiate returns the form that r's Accept header asks for, chosen as the
// API server chooses (k8s.io/apiserver's negotiation: the first media type
// listed that it serves, a wildcard being JSON): pods as they are, in JSON
// or protobuf; or, with the parameters as, g and v, PartialObjectMetadata
// and PartialObjectMetadataList of meta.k8s.io v1 and v1beta1 (JSON and
// protobuf) and Table (JSON only), as the API server allows for pods. It
// reports false when the header lists none (406 NotAcceptable).
func (c *codecs) negotiate(r *http.Request) (form, bool) {
	opts, ok := negotiation.NegotiateMediaTypeOptions(r.Header.Get("Accept"), c.accepted, podsEndpoint{})
	if !ok {
		return form{}, false
	}
	fm := form{format: c.json}
	if opts.Accepted.MediaType == mediaProtobuf {
		fm.format = c.protobuf
	}
	if t := opts.Convert; t != nil {
		fm.gv = t.GroupVersion()
		switch t.Kind {
		case "PartialObjectMetadata":
			fm.as = asPartial
		case "PartialObjectMetadataList":
			fm.as = asPartialList
		case "Table":
			fm.as = asTable
		}
	}
	fm.pretty = fm.format == c.json && (opts.Pretty || prettyPrint(r))
	return fm, true
}

// negotiateError returns the form in which the API server answers r with an
// error: the first media type r's Accept header lists as it is (errors are
// never transformed), or, when it lists none, indented JSON (the API
// server's WriteRawJSON).
func (c *codecs) negotiateError(r *http.Request) form {
	opts, ok := negotiation.NegotiateMediaTypeOptions(r.Header.Get("Accept"), c.accepted, negotiation.DefaultEndpointRestrictions)
	if !ok {
		return form{format: c.json, pretty: true}
	}
	if opts.Accepted.MediaType == mediaProtobuf {
		return form{format: c.protobuf}
	}
	return form{format: c.json, pretty: opts.Pretty || prettyPrint(r)}
}

// podsEndpoint is what the API server's pods endpoint allows in an Accept
// header (k8s.io/apiserver's RequestScope.AllowsMediaTypeTransform): a
// transformation to PartialObjectMetadata, PartialObjectMetadataList or
// (in JSON) Table of meta.k8s.io v1 or v1beta1, and watch streams.
type podsEndpoint struct{}

func (podsEndpoint) AllowsMediaTypeTransform(mimeType, mimeSubType string, gvk *schema.GroupVersionKind) bool {
	if gvk == nil {
		return true
	}
	if gv := gvk.GroupVersion(); gv != metav1.SchemeGroupVersion && gv != metav1beta1.SchemeGroupVersion {
		return false
	}
	switch gvk.Kind {
	case "Table":
		return mimeType == "application" && mimeSubType == "json"
	case "PartialObjectMetadata", "PartialObjectMetadataList":
		return true
	}
	return false
}

func (podsEndpoint) AllowsServerVersion(string) bool { return false }

func (podsEndpoint) AllowsStreamSchema(s string) bool { return s == "watch" }

// prettyPrint reports whether the API server indents its JSON answer to r:
// when its pretty parameter is true, or, without one, when its User-Agent
// is a browser's, curl's or wget's (k8s.io/apiserver's negotiation).
func prettyPrint(r *http.Request) bool {
	if strings.Contains(r.URL.RawQuery, "pretty") {
		if pp := r.URL.Query().Get("pretty"); pp != "" {
			pretty, _ := strconv.ParseBool(pp)
			return pretty
		}
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}
