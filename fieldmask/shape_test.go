package fieldmask_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// inlinedPod returns a pod that fills the fields reached through every
// embedded struct of the Kubernetes types, each with a distinct marker
// string, so that a projection shows which of them it kept.
func inlinedPod() *corev1.Pod {
	pod := richPod()
	size := resource.MustParse("1Gi")
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: "scratch-vol", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: "marker-empty-dir-medium", SizeLimit: &size}}},
		corev1.Volume{Name: "cm-vol", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "marker-config-map-volume"}}}},
		corev1.Volume{Name: "projected-vol", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "marker-projected-secret"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "marker-projected-config-map"}}},
			}}}},
	)
	c := &pod.Spec.Containers[0]
	c.LivenessProbe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/marker-liveness-path", Port: intstr.FromString("marker-liveness-port")}}
	c.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"marker-readiness-exec"}}}
	c.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "marker-startup-host", Port: intstr.FromInt32(1)}}}
	c.EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "marker-env-from-config-map"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "marker-env-from-secret"}}},
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "marker-secret-key-ref"}, Key: "token"}}})
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:  "marker-debugger-name",
			Image: "marker-debugger-image",
			Env: []corev1.EnvVar{{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "marker-debugger-config-map-key"}, Key: "k"}}}},
		},
		TargetContainerName: "marker-debugger-target",
	}}
	return pod
}

// shapeCases are paths in the JSON shape, as `kubectl get pod -o json`
// prints a pod, with the same paths in the proto shape, a marker that the
// projection must hold and one that it must not.
var shapeCases = []struct {
	name, json, proto, keep, drop string
}{
	{"VolumeSource in Volume", "spec.volumes.emptyDir", "spec.volumes.volumeSource.emptyDir",
		"marker-empty-dir-medium", "marker-config-map-volume"},
	{"below VolumeSource", "spec.volumes.emptyDir.medium", "spec.volumes.volumeSource.emptyDir.medium",
		"marker-empty-dir-medium", "scratch-vol"},
	{"VolumeSource and LocalObjectReference", "spec.volumes.configMap.name", "spec.volumes.volumeSource.configMap.localObjectReference.name",
		"marker-config-map-volume", "marker-empty-dir-medium"},
	{"LocalObjectReference in projections", "spec.volumes.projected.sources.secret.name",
		"spec.volumes.volumeSource.projected.sources.secret.localObjectReference.name",
		"marker-projected-secret", "marker-projected-config-map"},
	{"ProbeHandler in Probe", "spec.containers.livenessProbe.httpGet", "spec.containers.livenessProbe.handler.httpGet",
		"/marker-liveness-path", "marker-readiness-exec"},
	{"below ProbeHandler", "spec.containers.livenessProbe.httpGet.port.strVal", "spec.containers.livenessProbe.handler.httpGet.port.strVal",
		"marker-liveness-port", "/marker-liveness-path"},
	{"exec of ProbeHandler", "spec.containers.readinessProbe.exec.command", "spec.containers.readinessProbe.handler.exec.command",
		"marker-readiness-exec", "/marker-liveness-path"},
	{"tcpSocket of ProbeHandler", "spec.containers.startupProbe.tcpSocket.host", "spec.containers.startupProbe.handler.tcpSocket.host",
		"marker-startup-host", "marker-readiness-exec"},
	{"LocalObjectReference in ConfigMapEnvSource", "spec.containers.envFrom.configMapRef.name",
		"spec.containers.envFrom.configMapRef.localObjectReference.name", "marker-env-from-config-map", "marker-env-from-secret"},
	{"LocalObjectReference in SecretKeySelector", "spec.containers.env.valueFrom.secretKeyRef.name",
		"spec.containers.env.valueFrom.secretKeyRef.localObjectReference.name", "marker-secret-key-ref", "production"},
	{"EphemeralContainerCommon in EphemeralContainer", "spec.ephemeralContainers.name", "spec.ephemeralContainers.ephemeralContainerCommon.name",
		"marker-debugger-name", "marker-debugger-image"},
	{"EphemeralContainerCommon then LocalObjectReference", "spec.ephemeralContainers.env.valueFrom.configMapKeyRef.name",
		"spec.ephemeralContainers.ephemeralContainerCommon.env.valueFrom.configMapKeyRef.localObjectReference.name",
		"marker-debugger-config-map-key", "marker-debugger-name"},
	{"mixed shapes", "spec.volumes.volumeSource.configMap.name", "spec.volumes.volumeSource.configMap.localObjectReference.name",
		"marker-config-map-volume", "marker-empty-dir-medium"},
	{"mixed shapes the other way", "spec.volumes.configMap.localObjectReference", "spec.volumes.volumeSource.configMap.localObjectReference",
		"marker-config-map-volume", "marker-empty-dir-medium"},
}

// TestJSONShapeSelectsLikeProtoShape checks that a path in the JSON shape
// gives the mask of its proto spelling: the same paths, the same key, and
// byte for byte the same projection, which holds the field it names.
func TestJSONShapeSelectsLikeProtoShape(t *testing.T) {
	src := marshalPod(t, inlinedPod())
	for _, tt := range shapeCases {
		t.Run(tt.name, func(t *testing.T) {
			js, err := fieldmask.Parse(tt.json)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.json, err)
			}
			pb, err := fieldmask.Parse(tt.proto)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.proto, err)
			}
			if js.Key() != tt.proto || js.String() != tt.proto || js.Key() != pb.Key() {
				t.Errorf("Parse(%q): Key() = %q, String() = %q; want the proto spelling %q", tt.json, js.Key(), js.String(), tt.proto)
			}
			jsOut, err := js.AppendProjection(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			pbOut, err := pb.AppendProjection(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(jsOut, pbOut) {
				t.Errorf("projection by %q (%d bytes) differs from projection by %q (%d bytes)", tt.json, len(jsOut), tt.proto, len(pbOut))
			}
			if !bytes.Contains(jsOut, []byte(tt.keep)) {
				t.Errorf("projection by %q lacks %q", tt.json, tt.keep)
			}
			if bytes.Contains(jsOut, []byte(tt.drop)) {
				t.Errorf("projection by %q holds %q, which it does not select", tt.json, tt.drop)
			}
		})
	}
}

func TestJSONShapeNormalizes(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{"both spellings once", []string{"spec.volumes.emptyDir", "spec.volumes.volumeSource.emptyDir"}, "spec.volumes.volumeSource.emptyDir"},
		{"embedded struct subsumes a JSON path", []string{"spec.volumes.emptyDir.medium", "spec.volumes.volumeSource"}, "spec.volumes.volumeSource"},
		{"JSON path subsumes a proto path", []string{"spec.volumes.volumeSource.emptyDir.medium", "spec.volumes.emptyDir"}, "spec.volumes.volumeSource.emptyDir"},
		{"siblings inside the embedded struct", []string{"spec.volumes.secret", "spec.volumes.name", "spec.volumes.emptyDir"},
			"spec.volumes.name,spec.volumes.volumeSource.emptyDir,spec.volumes.volumeSource.secret"},
		{"proto names still win", []string{"spec.ephemeralContainers.targetContainerName"}, "spec.ephemeralContainers.targetContainerName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := fieldmask.Parse(tt.paths...)
			if err != nil {
				t.Fatal(err)
			}
			if m.Key() != tt.want {
				t.Errorf("Parse(%q).Key() = %q, want %q", tt.paths, m.Key(), tt.want)
			}
		})
	}
}

func TestJSONShapeFromHeader(t *testing.T) {
	js, err := fieldmask.FromHeader(http.Header{fieldmask.Header: {"metadata.name, spec.containers.livenessProbe.httpGet"}})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := fieldmask.FromHeader(http.Header{fieldmask.BinaryHeader: {
		base64.StdEncoding.EncodeToString(fieldMaskBytes(t, "spec.containers.livenessProbe.handler.httpGet", "metadata.name"))}})
	if err != nil {
		t.Fatal(err)
	}
	if js.Key() != pb.Key() {
		t.Errorf("text header in the JSON shape gives key %q, binary header in the proto shape %q", js.Key(), pb.Key())
	}
}

// TestEveryJSONPathParses walks the k8s.io/api Go types of a pod the way
// encoding/json does, independently of the package, and checks that every
// JSON path of a pod (down to the types with their own JSON encoding) parses
// to the mask of its proto spelling.
func TestEveryJSONPathParses(t *testing.T) {
	type pair struct{ json, proto string }
	var pairs []pair
	var walk func(gt reflect.Type, md protoreflect.MessageDescriptor, jsonPath, protoPath string, stack map[reflect.Type]bool)
	walk = func(gt reflect.Type, md protoreflect.MessageDescriptor, jsonPath, protoPath string, stack map[reflect.Type]bool) {
		for i := range gt.NumField() {
			f := gt.Field(i)
			num, ok := protoNumber(f)
			tag := f.Tag.Get("json")
			if !ok || tag == "-" {
				continue
			}
			fd := md.Fields().ByNumber(num)
			if fd == nil {
				t.Fatalf("%s.%s: proto field %d not in %s", gt, f.Name, num, md.FullName())
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			jsonName, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && jsonName == "" {
				walk(ft, fd.Message(), jsonPath, join(protoPath, string(fd.Name())), stack)
				continue
			}
			jp, pp := join(jsonPath, jsonName), join(protoPath, string(fd.Name()))
			pairs = append(pairs, pair{jp, pp})
			if ft.Kind() != reflect.Struct || fd.Message() == nil || fd.IsMap() || stack[ft] ||
				reflect.PointerTo(ft).Implements(reflect.TypeFor[interface{ MarshalJSON() ([]byte, error) }]()) {
				continue
			}
			stack[ft] = true
			walk(ft, fd.Message(), jp, pp, stack)
			delete(stack, ft)
		}
	}
	walk(reflect.TypeFor[corev1.Pod](), (&corev1pb.Pod{}).ProtoReflect().Descriptor(), "", "", map[reflect.Type]bool{})
	differ := 0
	for _, p := range pairs {
		js, err := fieldmask.Parse(p.json)
		if err != nil {
			t.Errorf("Parse(%q) of the JSON shape: %v", p.json, err)
			continue
		}
		if js.Key() != p.proto {
			t.Errorf("Parse(%q).Key() = %q, want %q", p.json, js.Key(), p.proto)
		}
		if p.json != p.proto {
			differ++
		}
	}
	// The walk must have met the embedded structs at all: a regression in
	// the walk would otherwise pass vacuously.
	if len(pairs) < 1000 || differ < 100 {
		t.Errorf("walked %d JSON paths, %d of them differing from the proto shape; want at least 1000 and 100", len(pairs), differ)
	}
	t.Logf("%d JSON paths, %d differ from their proto spelling", len(pairs), differ)
}

func protoNumber(f reflect.StructField) (protoreflect.FieldNumber, bool) {
	parts := strings.Split(f.Tag.Get("protobuf"), ",")
	if len(parts) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(parts[1])
	return protoreflect.FieldNumber(n), err == nil
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func TestJSONOnlyFields(t *testing.T) {
	for _, p := range []string{"kind", "apiVersion"} {
		_, err := fieldmask.Parse(p)
		want := `invalid field mask path "` + p + `": k8s.io.api.core.v1.Pod has no field "` + p + `": "` + p +
			`" is in the JSON of a Pod (TypeMeta) but not in its proto encoding, which masks select from`
		if err == nil || err.Error() != want {
			t.Errorf("Parse(%q) error:\n got %v\nwant %s", p, err, want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	tests := []struct {
		name, path, want string // want: the suggestion, or "" for none
	}{
		{"typo", "spec.nodname", "spec.nodeName"},
		{"transposition", "status.phsae", "status.phase"},
		{"case", "Status.Phase", "status.phase"},
		{"snake case", "status.container_statuses.restart_count", "status.containerStatuses.restartCount"},
		{"typo in a JSON-shape element", "spec.volumes.emtyDir.sizeLimit", "spec.volumes.emptyDir.sizeLimit"},
		{"typo below an embedded struct", "spec.volumes.volumeSource.confgMap.nme", "spec.volumes.volumeSource.configMap.name"},
		{"Go name of an embedded struct", "spec.containers.livenessProbe.probeHandler.httpGet", "spec.containers.livenessProbe.handler.httpGet"},
		{"JSON name of an ephemeral container", "spec.ephemeralContainers.imagee", "spec.ephemeralContainers.image"},
		{"rest kept while it resolves", "spec.contaners.livenessProbe.httpGet.path", "spec.containers.livenessProbe.httpGet.path"},
		{"stops where the rest cannot be fixed", "spec.contaners.name.first", "spec.containers.name"},
		{"nothing close", "status.fooBar", ""},
		{"too short to guess", "spec.x", ""},
		{"element too long to look for", "spec." + strings.Repeat("n", 65), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fieldmask.Parse(tt.path)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tt.path)
			}
			_, got, found := strings.Cut(err.Error(), "; did you mean ")
			if tt.want == "" {
				if found {
					t.Errorf("Parse(%q) error %q suggests something; want no suggestion", tt.path, err)
				}
				return
			}
			if want := strconv.Quote(tt.want) + "?"; got != want {
				t.Errorf("Parse(%q) error %q; want the suggestion %s", tt.path, err, want)
			}
			if _, err := fieldmask.Parse(tt.want); err != nil {
				t.Errorf("the suggestion %q does not parse: %v", tt.want, err)
			}
		})
	}
}

// TestErrorsAreBounded checks that no error quotes a long path in full.
func TestErrorsAreBounded(t *testing.T) {
	pad := func(prefix string) string {
		return prefix + strings.Repeat("x", fieldmask.MaxPathLength-len(prefix))
	}
	for _, p := range []string{
		pad("spec.nodname."),
		pad(""),
		pad("spec."),
		pad("metadata.name."),
		pad("metadata.labels."),
		pad("status..phase"),
		pad("status.containerStatuses.name.") + "a",
		strings.Repeat("spec.", fieldmask.MaxPathLength/5),
		strings.Repeat("a.", fieldmask.MaxPathLength/2),
		strings.Repeat("é", fieldmask.MaxPathLength/2),
	} {
		_, err := fieldmask.Parse(p)
		if err == nil {
			t.Fatalf("Parse of %d bytes succeeded", len(p))
		}
		if len(err.Error()) > 600 {
			t.Errorf("error for a %d-byte path is %d bytes: %s", len(p), len(err.Error()), err)
		}
		if !strings.HasPrefix(err.Error(), "invalid field mask path ") {
			t.Errorf("error does not say what is wrong: %s", err)
		}
	}
}
