package server_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

func TestListGetWatch(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			pods := podstest.SamplePods()
			f := start(t, server.Config{}, false, pods[2], pods[0], pods[1])
			c := kind.Dial(t, f.socket)

			got, err := c.List(ctx(t), nil)
			if err != nil {
				t.Fatalf("ListPods: %v", err)
			}
			if len(got) != len(pods) {
				t.Fatalf("ListPods returned %d pods, want %d", len(got), len(pods))
			}
			for i, p := range pods {
				if !proto.Equal(got[i], podstest.Message(t, p)) {
					t.Errorf("ListPods pod %d = %s/%s, want %s/%s with every field intact", i,
						got[i].GetMetadata().GetNamespace(), got[i].GetMetadata().GetName(), p.Namespace, p.Name)
				}
				one, err := c.Get(ctx(t), string(p.UID), nil)
				if err != nil {
					t.Fatalf("GetPod(%s): %v", p.UID, err)
				}
				if !proto.Equal(one, podstest.Message(t, p)) {
					t.Errorf("GetPod(%s) differs from the stored pod", p.UID)
				}
			}

			w, err := c.Watch(ctx(t), nil)
			if err != nil {
				t.Fatalf("WatchPods: %v", err)
			}
			for _, p := range pods {
				podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_ADDED, podstest.Message(t, p))
			}
			ev := podstest.Recv(t, w)
			if ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE || ev.Pod != nil {
				t.Fatalf("after the snapshot got %v with pod %v, want INITIAL_SYNC_COMPLETE without pod", ev.GetType(), ev.GetPod())
			}

			changed := pods[1].DeepCopy()
			changed.Status.Phase = corev1.PodFailed
			f.store.Upsert(changed)
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, podstest.Message(t, changed))

			added := podstest.Pod("default", "web-3", 4)
			f.store.Upsert(added)
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_ADDED, podstest.Message(t, added))

			f.store.Delete(pods[0].UID)
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_DELETED, podstest.Message(t, pods[0]))

			// Writing the same version again is not a change.
			f.store.Upsert(added.DeepCopy())
			f.store.Delete(added.UID)
			podstest.ExpectEvent(t, podstest.Recv(t, w), podsv1alpha1.EventType_EVENT_TYPE_DELETED, podstest.Message(t, added))
		})
	}
}

func TestErrors(t *testing.T) {
	pods := podstest.SamplePods()
	tests := []struct {
		name     string
		call     func(t *testing.T, c podstest.APIClient) error
		code     connect.Code
		contains string
	}{
		{"GetPod/EmptyUID", func(t *testing.T, c podstest.APIClient) error {
			_, err := c.Get(ctx(t), "", nil)
			return err
		}, connect.CodeInvalidArgument, "podUID must not be empty"},
		{"GetPod/UnknownUID", func(t *testing.T, c podstest.APIClient) error {
			_, err := c.Get(ctx(t), "no-such-uid", nil)
			return err
		}, connect.CodeNotFound, `"no-such-uid"`},
		{"GetPod/HugeRequest", func(t *testing.T, c podstest.APIClient) error {
			_, err := c.Get(ctx(t), strings.Repeat("x", 64<<10), nil)
			return err
		}, connect.CodeResourceExhausted, ""},
		{"ListPods/UnknownField", func(t *testing.T, c podstest.APIClient) error {
			_, err := c.List(ctx(t), podstest.MaskHeader("metadata.name,status.bogus"))
			return err
		}, connect.CodeInvalidArgument, `"status.bogus"`},
		{"GetPod/BelowScalar", func(t *testing.T, c podstest.APIClient) error {
			_, err := c.Get(ctx(t), string(pods[0].UID), podstest.MaskHeader("status.phase.value"))
			return err
		}, connect.CodeInvalidArgument, `"status.phase.value"`},
		{"ListPods/EmptyElement", func(t *testing.T, c podstest.APIClient) error {
			_, err := c.List(ctx(t), podstest.MaskHeader("status..phase"))
			return err
		}, connect.CodeInvalidArgument, `"status..phase"`},
		{"WatchPods/InvalidMask", func(t *testing.T, c podstest.APIClient) error {
			w, err := c.Watch(ctx(t), podstest.MaskHeader("spec.nope"))
			if err != nil {
				return err
			}
			_, err = w.Recv()
			return err
		}, connect.CodeInvalidArgument, `"spec.nope"`},
		{"ListPods/BadBinaryMask", func(t *testing.T, c podstest.APIClient) error {
			h := podstest.MaskHeader("")
			h.Del("x-kubernetes-fieldmask")
			h.Set("x-kubernetes-fieldmask-bin", "\xff\xff\xff")
			_, err := c.List(ctx(t), h)
			return err
		}, connect.CodeInvalidArgument, ""},
	}
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, pods...)
			c := kind.Dial(t, f.socket)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					err := tt.call(t, c)
					if podstest.ErrorCode(err) != tt.code {
						t.Fatalf("code = %v (%v), want %v", podstest.ErrorCode(err), err, tt.code)
					}
					if !strings.Contains(podstest.ErrorMessage(err), tt.contains) {
						t.Errorf("message %q does not contain %q", podstest.ErrorMessage(err), tt.contains)
					}
				})
			}
			// The server is still serving after every bad request.
			if got, err := c.List(ctx(t), nil); err != nil || len(got) != len(pods) {
				t.Fatalf("ListPods after errors: %d pods, %v", len(got), err)
			}
		})
	}
}
