package service_test

import (
	"testing"

	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// TestEventTypeNumbers checks that both wires number their event types
// alike: the service encodes the events of both with the same numbers.
func TestEventTypeNumbers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typed   podsv1alpha1.EventType
		kubelet v1alpha1.EventType
	}{
		{"unspecified", podsv1alpha1.EventType_EVENT_TYPE_UNSPECIFIED, v1alpha1.EventType_UNSPECIFIED},
		{"added", podsv1alpha1.EventType_EVENT_TYPE_ADDED, v1alpha1.EventType_ADDED},
		{"modified", podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, v1alpha1.EventType_MODIFIED},
		{"deleted", podsv1alpha1.EventType_EVENT_TYPE_DELETED, v1alpha1.EventType_DELETED},
		{"initial sync complete", podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE, v1alpha1.EventType_INITIAL_SYNC_COMPLETE},
	} {
		if int32(tc.typed) != int32(tc.kubelet) {
			t.Errorf("%s: typed %d, kubelet %d", tc.name, tc.typed, tc.kubelet)
		}
	}
}
