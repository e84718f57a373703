package fieldmask_test

import (
	"fmt"
	"net/http"

	"github.com/podsapi/podsapi/fieldmask"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func Example() {
	// The server stores each pod encoded once.
	stored, _ := (&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.23"},
	}).Marshal()

	// A client asks for some fields.
	h := http.Header{}
	h.Add(fieldmask.Header, "status.phase, metadata.name")
	mask, err := fieldmask.FromHeader(h)
	if err != nil {
		panic(err)
	}
	// Watches always carry the pod's identity.
	mask, _ = mask.Union("metadata.namespace", "metadata.name", "metadata.uid")
	fmt.Println(mask)

	view, err := mask.AppendProjection(nil, stored)
	if err != nil {
		panic(err)
	}
	var pod corev1pb.Pod
	_ = proto.Unmarshal(view, &pod)
	fmt.Println(pod.GetMetadata().GetName(), pod.GetMetadata().GetNamespace(), pod.GetStatus().GetPhase(), pod.GetStatus().GetPodIP() == "")
	// Output:
	// metadata.name,metadata.namespace,metadata.uid,status.phase
	// web-0 shop Running true
}

// Paths may be copied from `kubectl get pod -o json`, where the structs that
// Kubernetes Go types embed are inlined; the mask is the same as with the
// proto spelling, and says so in the proto shape.
func ExampleParse_jsonShape() {
	fromJSON, _ := fieldmask.Parse("spec.volumes.emptyDir", "spec.containers.livenessProbe.httpGet")
	fromProto, _ := fieldmask.Parse("spec.volumes.volumeSource.emptyDir", "spec.containers.livenessProbe.handler.httpGet")
	fmt.Println(fromJSON)
	fmt.Println(fromJSON.Key() == fromProto.Key())

	_, err := fieldmask.Parse("spec.volumes.emtyDir")
	fmt.Println(err)
	// Output:
	// spec.containers.livenessProbe.handler.httpGet,spec.volumes.volumeSource.emptyDir
	// true
	// invalid field mask path "spec.volumes.emtyDir": k8s.io.api.core.v1.Volume has no field "emtyDir"; did you mean "spec.volumes.emptyDir"?
}
