package service_test

import (
	"context"
	"net"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/workload"
)

// TestFindPodsWorkload answers each match's workload beside its pod,
// whatever the field mask, to connect-go and grpc-go, and the last known
// workload of a deleted pod.
func TestFindPodsWorkload(t *testing.T) {
	yes := true
	web := podstest.Pod("shop", "web-5d9f8b6c5d-x2k4q", 1)
	web.Labels = map[string]string{"pod-template-hash": "5d9f8b6c5d"}
	web.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9f8b6c5d", UID: "rs", Controller: &yes}}
	cache := podstest.Pod("shop", "cache-0", 2)
	cache.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "sts", Controller: &yes}}
	debug := podstest.Pod("shop", "debug", 3)
	debug.OwnerReferences = nil
	gone := podstest.Pod("shop", "backup-29412345-kq2lm", 4)
	gone.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "backup-29412345", UID: "job", Controller: &yes}}

	r := workload.NewResolver() // no API server: what the pods tell
	st := synced(nil, web, cache, debug, gone)
	for _, p := range []*corev1.Pod{web, cache, debug, gone} {
		r.Observe(p)
	}
	st.Delete(gone.UID)
	r.Forget(gone.UID)
	h := newHarness(t, st, false, service.WithWorkloads(r))

	tests := []struct {
		name    string
		pod     *corev1.Pod
		deleted bool
		want    *podsv1alpha1.PodWorkload
	}{
		{name: "derived deployment", pod: web, want: &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED}},
		{name: "statefulset", pod: cache, want: &podsv1alpha1.PodWorkload{Kind: "StatefulSet", Name: "cache", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}},
		{name: "no controller", pod: debug, want: &podsv1alpha1.PodWorkload{Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}},
		{name: "deleted cronjob's pod", pod: gone, deleted: true, want: &podsv1alpha1.PodWorkload{Kind: "CronJob", Name: "backup", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED}},
	}
	connectc := podsv1alpha1connect.NewPodsClient(h.http, baseURL, connect.WithGRPC())
	conn, err := grpc.NewClient("passthrough:///harness",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	clients := map[string]func(ctx context.Context, req *podsv1alpha1.PodFindRequest) (*podsv1alpha1.PodFindResponse, error){
		"connect-go": func(ctx context.Context, req *podsv1alpha1.PodFindRequest) (*podsv1alpha1.PodFindResponse, error) {
			r := connect.NewRequest(req)
			r.Header().Set("x-kubernetes-fieldmask", "status.phase")
			resp, err := connectc.FindPods(ctx, r)
			if err != nil {
				return nil, err
			}
			return resp.Msg, nil
		},
		"grpc-go": func(ctx context.Context, req *podsv1alpha1.PodFindRequest) (*podsv1alpha1.PodFindResponse, error) {
			resp := &podsv1alpha1.PodFindResponse{}
			err := conn.Invoke(metadata.AppendToOutgoingContext(ctx, "x-kubernetes-fieldmask", "status.phase"), podsv1alpha1connect.PodsFindPodsProcedure, req, resp)
			return resp, err
		},
	}
	for name, find := range clients {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				resp, err := find(t.Context(), &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: tt.pod.Status.PodIP}, IncludeDeleted: tt.deleted})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Matches) != 1 {
					t.Fatalf("%d matches, want 1", len(resp.Matches))
				}
				m := resp.Matches[0]
				if m.Pod.GetMetadata().GetName() != tt.pod.Name || m.Pod.GetSpec() != nil {
					t.Errorf("pod %q with spec %v: want %q trimmed by the mask", m.Pod.GetMetadata().GetName(), m.Pod.GetSpec(), tt.pod.Name)
				}
				if !proto.Equal(m.Workload, tt.want) {
					t.Errorf("workload %v, want %v", m.Workload, tt.want)
				}
			})
		}
	}
}

// TestFindPodsNoWorkloads leaves PodMatch.workload unset without
// WithWorkloads.
func TestFindPodsNoWorkloads(t *testing.T) {
	web := podstest.Pod("shop", "web", 1)
	h := newHarness(t, synced(nil, web), false)
	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL)
	resp, err := c.FindPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: web.Status.PodIP}}))
	if err != nil {
		t.Fatal(err)
	}
	if w := resp.Msg.Matches[0].Workload; w != nil {
		t.Errorf("workload %v without WithWorkloads, want none", w)
	}
}

// TestGetPodWorkload answers the pod's workload beside it, whatever the
// field mask, and none for a pod the Resolver does not know.
func TestGetPodWorkload(t *testing.T) {
	yes := true
	cache := podstest.Pod("shop", "cache-0", 2)
	cache.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "sts", Controller: &yes}}
	unseen := podstest.Pod("shop", "unseen", 3)
	r := workload.NewResolver()
	r.Observe(cache)
	h := newHarness(t, synced(nil, cache, unseen), false, service.WithWorkloads(r))
	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL)
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want *podsv1alpha1.PodWorkload
	}{
		{"statefulset", cache, &podsv1alpha1.PodWorkload{Kind: "StatefulSet", Name: "cache", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}},
		{"not observed", unseen, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: string(tt.pod.UID)})
			req.Header().Set("x-kubernetes-fieldmask", "metadata.name")
			resp, err := c.GetPod(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Msg.Pod.GetMetadata().GetName() != tt.pod.Name || resp.Msg.Pod.GetStatus() != nil {
				t.Errorf("pod %v, want %s trimmed by the mask", resp.Msg.Pod.GetMetadata(), tt.pod.Name)
			}
			if !proto.Equal(resp.Msg.Workload, tt.want) {
				t.Errorf("workload %v, want %v", resp.Msg.Workload, tt.want)
			}
		})
	}
}
