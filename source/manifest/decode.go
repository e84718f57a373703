package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// podGVK is the only group, version and kind a manifest document may have.
var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// The strict decoders. Strict means that unknown and duplicate fields are
// errors. The scheme knows only v1 Pod, so any other kind fails to decode.
var (
	podScheme   = newPodScheme()
	yamlDecoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, podScheme, podScheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
	jsonDecoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, podScheme, podScheme,
		kjson.SerializerOptions{Yaml: false, Strict: true})
)

func newPodScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.Pod{})
	return s
}

// rejection is why a manifest file, or a document in it, was rejected.
type rejection struct {
	reason string // One of the reason* constants.
	err    error
}

// maxErrorText is the most of an error's text that a rejection keeps: an
// error about a huge value can quote all of it.
const maxErrorText = 1024

func (r *rejection) Error() string {
	msg := r.err.Error()
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "... (truncated)"
	}
	return msg
}

func (r *rejection) Unwrap() error { return r.err }

func reject(reason string, format string, args ...any) *rejection {
	return &rejection{reason: reason, err: fmt.Errorf(format, args...)}
}

// reasonOf returns the metrics reason of err.
func reasonOf(err error) string {
	if r, ok := errors.AsType[*rejection](err); ok {
		return r.reason
	}
	return reasonDecode
}

// isJSONName reports whether the file name marks a JSON manifest.
func isJSONName(name string) bool {
	return strings.EqualFold(filepath.Ext(name), ".json")
}

// decodeFile decodes the content of the manifest file name into completed
// pods, in document order. A JSON file holds exactly one Pod; a YAML file
// holds any number of documents separated by "---" lines, of which the
// empty ones (nothing but blanks and comments) are skipped. The first
// document that fails makes the whole file fail, with a *rejection. A YAML
// document whose aliases expand it beyond maxBytes is rejected before it is
// decoded (no check if maxBytes is zero).
func decodeFile(name string, data []byte, nodeName string, maxBytes int64) ([]*corev1.Pod, error) {
	if isJSONName(name) {
		pod, err := decodeDocument(jsonDecoder, data, nodeName)
		if err != nil {
			return nil, err
		}
		return []*corev1.Pod{pod}, nil
	}
	var pods []*corev1.Pod
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return pods, nil
		}
		if err != nil {
			return nil, reject(reasonDecode, "document %d: %w", doc, err)
		}
		if maxBytes > 0 {
			if err := checkExpandedSize(raw, maxBytes); err != nil {
				return nil, &rejection{reason: reasonOf(err), err: fmt.Errorf("document %d: %w", doc, err)}
			}
		}
		if isEmptyDocument(raw) {
			continue
		}
		pod, err := decodeDocument(yamlDecoder, raw, nodeName)
		if err != nil {
			return nil, &rejection{reason: reasonOf(err), err: fmt.Errorf("document %d: %w", doc, err)}
		}
		pods = append(pods, pod)
	}
}

// isEmptyDocument reports whether the YAML document holds no value.
func isEmptyDocument(raw []byte) bool {
	j, err := yaml.YAMLToJSON(raw)
	return err == nil && bytes.Equal(bytes.TrimSpace(j), []byte("null"))
}

// decodeDocument strictly decodes one document into a v1 Pod, validates
// it and completes it with the defaults for nodeName.
func decodeDocument(dec runtime.Decoder, raw []byte, nodeName string) (*corev1.Pod, error) {
	obj, gvk, err := dec.Decode(raw, nil, nil)
	if gvk != nil && *gvk != podGVK {
		return nil, reject(reasonDecode, "apiVersion %q and kind %q: want apiVersion %q and kind %q",
			gvk.GroupVersion().String(), gvk.Kind, podGVK.GroupVersion().String(), podGVK.Kind)
	}
	if err != nil {
		return nil, reject(reasonDecode, "%w", err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, reject(reasonDecode, "decoded a %T, want a *v1.Pod", obj)
	}
	if err := validate(pod); err != nil {
		return nil, err
	}
	complete(pod, nodeName)
	return pod, nil
}

// maxLabels is the most labels a manifest's pod may have. The API server
// sets no such limit, but every label is copied into each pod the server
// sends, and real pods have a few dozen at most.
const maxLabels = 1024

// validate checks what the source needs of a decoded pod: a valid name and,
// when set, a valid namespace; labels and annotations as the API server
// validates them (so annotations of at most 256 KiB in all), and at most
// maxLabels labels.
func validate(pod *corev1.Pod) error {
	if pod.Name == "" {
		return reject(reasonInvalid, "metadata.name is required")
	}
	if msgs := validation.IsDNS1123Subdomain(pod.Name); len(msgs) > 0 {
		return reject(reasonInvalid, "metadata.name %q: %s", pod.Name, strings.Join(msgs, "; "))
	}
	if pod.Namespace != "" {
		if msgs := validation.IsDNS1123Label(pod.Namespace); len(msgs) > 0 {
			return reject(reasonInvalid, "metadata.namespace %q: %s", pod.Namespace, strings.Join(msgs, "; "))
		}
	}
	if len(pod.Labels) > maxLabels {
		return reject(reasonInvalid, "metadata.labels: %d labels, more than the limit of %d", len(pod.Labels), maxLabels)
	}
	if errs := metav1validation.ValidateLabels(pod.Labels, field.NewPath("metadata", "labels")); len(errs) > 0 {
		return reject(reasonInvalid, "%w", errs.ToAggregate())
	}
	if errs := apivalidation.ValidateAnnotations(pod.Annotations, field.NewPath("metadata", "annotations")); len(errs) > 0 {
		return reject(reasonInvalid, "%w", errs.ToAggregate())
	}
	return nil
}

// complete fills in what a static pod manifest may leave out: the
// namespace "default", the derived UID, spec.nodeName (always nodeName) and,
// when the manifest has no status at all, the phase Pending.
func complete(pod *corev1.Pod, nodeName string) {
	pod.APIVersion, pod.Kind = podGVK.ToAPIVersionAndKind()
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	if pod.UID == "" {
		pod.UID = DerivedUID(pod.Namespace, pod.Name, nodeName)
	}
	pod.Spec.NodeName = nodeName
	if equality.Semantic.DeepEqual(pod.Status, corev1.PodStatus{}) {
		pod.Status.Phase = corev1.PodPending
	}
}
