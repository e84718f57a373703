package e2e_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	kubeletpods "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/server"
)

// The pods of the kubelet-wire tests.
var kubeletPods = map[string]string{
	"web.yaml":   manifest("shop", "web", "00000000-0000-4000-8000-0000000000a1", "nginx:1.27", "app", "web"),
	"db.yaml":    manifest("shop", "db", "00000000-0000-4000-8000-0000000000a2", "postgres:17", "app", "db"),
	"proxy.yaml": manifest("kube-system", "proxy", "00000000-0000-4000-8000-0000000000a3", "kube-proxy:v1.37.2"),
}

// decode decodes a pod of the kubelet wire, as the kubelet's clients do.
func decode(t *testing.T, b []byte) *corev1.Pod {
	t.Helper()
	pod := new(corev1.Pod)
	if err := pod.Unmarshal(b); err != nil {
		t.Fatalf("v1.Pod.Unmarshal: %v", err)
	}
	return pod
}

// TestKubeletClient drives our server with the kubelet's own generated gRPC
// client (k8s.io/kubelet v0.37.2) over the socket: the same pods, GetPod of
// each, NOT_FOUND, the snapshot then INITIAL_SYNC_COMPLETE, MODIFIED after a
// manifest edit and DELETED after its removal.
func TestKubeletClient(t *testing.T) {
	n := startServer(t, kubeletPods, server.Config{})
	client := kubeletpods.NewPodsClient(dial(t, n.Socket))
	ctx := t.Context()

	list, err := client.ListPods(ctx, &kubeletpods.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	var uids []string
	for _, b := range list.GetPods() {
		pod := decode(t, b)
		uids = append(uids, string(pod.UID))
		if pod.Spec.NodeName != "node-1" || len(pod.Spec.Containers) != 1 {
			t.Errorf("pod %s/%s: nodeName %q, %d containers; want node-1 and 1", pod.Namespace, pod.Name, pod.Spec.NodeName, len(pod.Spec.Containers))
		}
		got, err := client.GetPod(ctx, &kubeletpods.GetPodRequest{PodUID: string(pod.UID)})
		if err != nil {
			t.Fatalf("GetPod(%s): %v", pod.UID, err)
		}
		if !bytes.Equal(got.GetPod(), b) {
			t.Errorf("GetPod(%s) differs from its ListPods element", pod.UID)
		}
	}
	slices.Sort(uids)
	want := []string{"00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000a2", "00000000-0000-4000-8000-0000000000a3"}
	if !slices.Equal(uids, want) {
		t.Fatalf("ListPods UIDs %v, want %v", uids, want)
	}

	_, err = client.GetPod(ctx, &kubeletpods.GetPodRequest{PodUID: "00000000-0000-4000-8000-00000000dead"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("GetPod of an unknown UID: %v, want NotFound", err)
	}

	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	watch, err := client.WatchPods(wctx, &kubeletpods.WatchPodsRequest{})
	if err != nil {
		t.Fatalf("WatchPods: %v", err)
	}
	recv := func() *kubeletpods.WatchPodsEvent {
		t.Helper()
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("WatchPods: %v", err)
		}
		return ev
	}
	var snapshot [][]byte
	for range list.GetPods() {
		ev := recv()
		if ev.GetType() != kubeletpods.EventType_ADDED {
			t.Fatalf("snapshot event %v, want ADDED", ev.GetType())
		}
		snapshot = append(snapshot, ev.GetPod())
	}
	if !slices.EqualFunc(snapshot, list.GetPods(), bytes.Equal) {
		t.Error("the watch's snapshot differs from ListPods")
	}
	if ev := recv(); ev.GetType() != kubeletpods.EventType_INITIAL_SYNC_COMPLETE || len(ev.GetPod()) != 0 {
		t.Fatalf("after the snapshot: %v with %d pod bytes, want INITIAL_SYNC_COMPLETE without a pod", ev.GetType(), len(ev.GetPod()))
	}

	n.write(t, "web.yaml", manifest("shop", "web", "00000000-0000-4000-8000-0000000000a1", "nginx:1.28", "app", "web"))
	ev := recv()
	if pod := decode(t, ev.GetPod()); ev.GetType() != kubeletpods.EventType_MODIFIED || pod.Name != "web" || pod.Spec.Containers[0].Image != "nginx:1.28" {
		t.Fatalf("after editing web.yaml: %v %s/%s image %q, want MODIFIED shop/web nginx:1.28", ev.GetType(), pod.Namespace, pod.Name, pod.Spec.Containers[0].Image)
	}

	if err := os.Remove(filepath.Join(n.Manifests, "db.yaml")); err != nil {
		t.Fatal(err)
	}
	ev = recv()
	if pod := decode(t, ev.GetPod()); ev.GetType() != kubeletpods.EventType_DELETED || pod.Name != "db" || pod.Namespace != "shop" || pod.UID != "00000000-0000-4000-8000-0000000000a2" {
		t.Fatalf("after removing db.yaml: %v %s/%s uid %s, want DELETED shop/db with its UID", ev.GetType(), pod.Namespace, pod.Name, pod.UID)
	}
}

// TestKubeletWireSameBytes checks that both wires serve the same bytes: a
// ListPods or GetPod of the kubelet wire is byte for byte the typed
// response, with and without a field mask, which the kubelet wire honours.
func TestKubeletWireSameBytes(t *testing.T) {
	n := startServer(t, kubeletPods, server.Config{})
	kubelet := kubeletpods.NewPodsClient(dial(t, n.Socket))
	// The typed ListPods, read as the kubelet's message: its pods as bytes,
	// since the two responses are the same on the wire.
	typed := connect.NewClient[podsv1alpha1.PodListRequest, kubeletpods.ListPodsResponse](h2c.NewClient(n.Socket),
		h2c.BaseURL+podsv1alpha1connect.PodsListPodsProcedure, connect.WithGRPC(), connect.WithReadMaxBytes(64<<20))
	for _, tc := range []struct {
		name string
		mask string
	}{
		{"whole pods", ""},
		{"masked", "metadata.name,status.phase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			req := connect.NewRequest(&podsv1alpha1.PodListRequest{})
			if tc.mask != "" {
				req.Header().Set("x-kubernetes-fieldmask", tc.mask)
				ctx = metadata.AppendToOutgoingContext(ctx, "x-kubernetes-fieldmask", tc.mask)
			}
			typedResp, err := typed.CallUnary(ctx, req)
			if err != nil {
				t.Fatalf("typed ListPods: %v", err)
			}
			resp, err := kubelet.ListPods(ctx, &kubeletpods.ListPodsRequest{})
			if err != nil {
				t.Fatalf("kubelet ListPods: %v", err)
			}
			if !slices.EqualFunc(resp.GetPods(), typedResp.Msg.GetPods(), bytes.Equal) || len(resp.GetPods()) != len(kubeletPods) {
				t.Errorf("ListPods: the kubelet wire's %d pods differ from the typed wire's %d", len(resp.GetPods()), len(typedResp.Msg.GetPods()))
			}
			for _, b := range resp.GetPods() {
				pod := decode(t, b)
				if tc.mask != "" && (pod.UID != "" || len(pod.Spec.Containers) != 0 || pod.Name == "") {
					t.Errorf("masked pod %+v: want only metadata.name and status.phase", pod.ObjectMeta)
				}
			}
		})
	}
}

// TestKubeletWireOff checks a server without the kubelet wire
// (--kubelet-wire=false): the kubelet's client is
// told UNIMPLEMENTED, the typed service still serves.
func TestKubeletWireOff(t *testing.T) {
	n := startServer(t, kubeletPods, server.Config{NoKubeletWire: true})
	_, err := kubeletpods.NewPodsClient(dial(t, n.Socket)).ListPods(t.Context(), &kubeletpods.ListPodsRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("kubelet ListPods without the kubelet wire: %v, want Unimplemented", err)
	}
	typed := podsv1alpha1connect.NewPodsClient(h2c.NewClient(n.Socket), h2c.BaseURL, connect.WithGRPC())
	resp, err := typed.ListPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodListRequest{}))
	if err != nil {
		t.Fatalf("typed ListPods: %v", err)
	}
	if got := len(resp.Msg.GetPods()); got != len(kubeletPods) {
		t.Errorf("typed ListPods: %d pods, want %d", got, len(kubeletPods))
	}
}
