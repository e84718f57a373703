package server_test

import (
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	metav1pb "github.com/podsapi/podsapi/gen/k8s.io/apimachinery/pkg/apis/meta/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// binMask returns request metadata with a binary field mask.
func binMask(t *testing.T, paths ...string) http.Header {
	raw, err := proto.Marshal(&fieldmaskpb.FieldMask{Paths: paths})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("x-kubernetes-fieldmask-bin", string(raw))
	return h
}

func TestFieldMasks(t *testing.T) {
	pod := podstest.SamplePods()[0]
	full := podstest.Message(t, pod)
	str := proto.String
	tests := []struct {
		name   string
		header func(t *testing.T) http.Header
		want   *corev1pb.Pod
	}{
		{"None", func(*testing.T) http.Header { return nil }, full},
		{"Scalar", func(*testing.T) http.Header { return podstest.MaskHeader("status.phase") }, &corev1pb.Pod{
			Status: &corev1pb.PodStatus{Phase: str("Running")},
		}},
		{"CommaListWithSpaces", func(*testing.T) http.Header { return podstest.MaskHeader("metadata.name, status.podIPs") }, &corev1pb.Pod{
			Metadata: &metav1pb.ObjectMeta{Name: str(pod.Name)},
			Status:   &corev1pb.PodStatus{PodIPs: full.Status.PodIPs},
		}},
		{"MergedHeaderValues", func(*testing.T) http.Header { return podstest.MaskHeader("metadata.name", "status.phase") }, &corev1pb.Pod{
			Metadata: &metav1pb.ObjectMeta{Name: str(pod.Name)},
			Status:   &corev1pb.PodStatus{Phase: str("Running")},
		}},
		{"Map", func(*testing.T) http.Header { return podstest.MaskHeader("metadata.labels") }, &corev1pb.Pod{
			Metadata: &metav1pb.ObjectMeta{Labels: full.Metadata.Labels},
		}},
		{"ThroughRepeated", func(*testing.T) http.Header { return podstest.MaskHeader("status.containerStatuses.ready") }, &corev1pb.Pod{
			Status: &corev1pb.PodStatus{ContainerStatuses: []*corev1pb.ContainerStatus{
				{Ready: proto.Bool(true)}, {Ready: proto.Bool(true)},
			}},
		}},
		{"Binary", func(t *testing.T) http.Header { return binMask(t, "metadata.uid", "spec.nodeName") }, &corev1pb.Pod{
			Metadata: &metav1pb.ObjectMeta{Uid: str(string(pod.UID))},
			Spec:     &corev1pb.PodSpec{NodeName: str("node-1")},
		}},
		{"JSONShape", func(*testing.T) http.Header {
			return podstest.MaskHeader("spec.volumes.name,spec.containers.livenessProbe.httpGet.path")
		}, projectJSONShape(full)},
		{"BinaryAndText", func(t *testing.T) http.Header {
			h := binMask(t, "metadata.uid")
			h.Add("x-kubernetes-fieldmask", "status.phase")
			return h
		}, &corev1pb.Pod{
			Metadata: &metav1pb.ObjectMeta{Uid: str(string(pod.UID))},
			Status:   &corev1pb.PodStatus{Phase: str("Running")},
		}},
	}
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, pod)
			c := kind.Dial(t, f.socket)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					list, err := c.List(ctx(t), tt.header(t))
					if err != nil {
						t.Fatalf("ListPods: %v", err)
					}
					if len(list) != 1 || !proto.Equal(list[0], tt.want) {
						t.Fatalf("ListPods = %v\nwant %v", list, tt.want)
					}
					got, err := c.Get(ctx(t), string(pod.UID), tt.header(t))
					if err != nil {
						t.Fatalf("GetPod: %v", err)
					}
					if !proto.Equal(got, tt.want) {
						t.Fatalf("GetPod = %v\nwant %v", got, tt.want)
					}
				})
			}
			// Masking never changes what the server stores.
			got, err := c.Get(ctx(t), string(pod.UID), nil)
			if err != nil || !proto.Equal(got, full) {
				t.Fatalf("GetPod without a mask after masked calls: %v, equal to the stored pod: %v", err, proto.Equal(got, full))
			}
		})
	}
}

// projectJSONShape returns what the mask
// spec.volumes.name,spec.containers.livenessProbe.httpGet.path, written in
// the JSON shape of a pod, selects of full: the same as its proto spelling
// spec.volumes.name,spec.containers.livenessProbe.handler.httpGet.path.
func projectJSONShape(full *corev1pb.Pod) *corev1pb.Pod {
	want := &corev1pb.Pod{Spec: &corev1pb.PodSpec{}}
	for _, v := range full.GetSpec().GetVolumes() {
		want.Spec.Volumes = append(want.Spec.Volumes, &corev1pb.Volume{Name: v.Name})
	}
	for _, c := range full.GetSpec().GetContainers() {
		out := &corev1pb.Container{}
		if get := c.GetLivenessProbe().GetHandler().GetHttpGet(); get != nil {
			out.LivenessProbe = &corev1pb.Probe{Handler: &corev1pb.ProbeHandler{HttpGet: &corev1pb.HTTPGetAction{Path: get.Path}}}
		}
		want.Spec.Containers = append(want.Spec.Containers, out)
	}
	return want
}

func TestWatchFieldMask(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			pod := podstest.SamplePods()[0]
			f := start(t, server.Config{}, false, pod)
			c := kind.Dial(t, f.socket)
			w, err := c.Watch(ctx(t), podstest.MaskHeader("status.phase"))
			if err != nil {
				t.Fatal(err)
			}
			// Watch events always identify their pod.
			view := func(phase corev1.PodPhase) *corev1pb.Pod {
				return &corev1pb.Pod{
					Metadata: &metav1pb.ObjectMeta{Name: proto.String(pod.Name), Namespace: proto.String(pod.Namespace), Uid: proto.String(string(pod.UID))},
					Status:   &corev1pb.PodStatus{Phase: proto.String(string(phase))},
				}
			}
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_ADDED, view(corev1.PodRunning))
			if ev := podstest.Recv(t, w); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
				t.Fatalf("got %v, want INITIAL_SYNC_COMPLETE", ev.GetType())
			}

			// A change outside the mask sends nothing; the next change inside
			// it is the next event.
			p := pod.DeepCopy()
			p.Labels["extra"] = "yes"
			p.Status.ContainerStatuses[0].RestartCount = 7
			f.store.Upsert(p)
			p = p.DeepCopy()
			p.Status.Phase = corev1.PodSucceeded
			f.store.Upsert(p)
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, view(corev1.PodSucceeded))

			// A visible change followed at once by a hidden one: the
			// visible one arrives without waiting for another event.
			p = p.DeepCopy()
			p.Status.Phase = corev1.PodFailed
			f.store.Upsert(p)
			p = p.DeepCopy()
			p.Labels["extra"] = "again"
			f.store.Upsert(p)
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, view(corev1.PodFailed))

			f.store.Delete(p.UID)
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_DELETED, view(corev1.PodFailed))
		})
	}
}
