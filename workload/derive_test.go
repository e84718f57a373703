package workload_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/workload"
)

func metav1UID(s string) types.UID { return types.UID(s) }

// TestDerive resolves without an API server: what the pod's names tell.
func TestDerive(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		want   workload.Workload
	}{
		{name: "deployment's replicaset", labels: map[string]string{"pod-template-hash": "5d9f8b6c5d"}, owners: controller("apps/v1", "ReplicaSet", "web-5d9f8b6c5d", "u"),
			want: workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Derived}},
		{name: "hash not the label's", labels: map[string]string{"pod-template-hash": "abc"}, owners: controller("apps/v1", "ReplicaSet", "web-5d9f8b6c5d", "u"),
			want: workload.Workload{Kind: workload.KindReplicaSet, Name: "web-5d9f8b6c5d", Resolution: workload.Unresolved}},
		{name: "no hash label", owners: controller("apps/v1", "ReplicaSet", "web-5d9f8b6c5d", "u"),
			want: workload.Workload{Kind: workload.KindReplicaSet, Name: "web-5d9f8b6c5d", Resolution: workload.Unresolved}},
		{name: "replicaset named as its hash", labels: map[string]string{"pod-template-hash": "abc"}, owners: controller("apps/v1", "ReplicaSet", "-abc", "u"),
			want: workload.Workload{Kind: workload.KindReplicaSet, Name: "-abc", Resolution: workload.Unresolved}},
		{name: "cronjob's job", owners: controller("batch/v1", "Job", "backup-29412345", "u"),
			want: workload.Workload{Kind: workload.KindCronJob, Name: "backup", Resolution: workload.Derived}},
		{name: "job with a short number", owners: controller("batch/v1", "Job", "migrate-2", "u"),
			want: workload.Workload{Kind: workload.KindJob, Name: "migrate-2", Resolution: workload.Unresolved}},
		{name: "job with a long number", owners: controller("batch/v1", "Job", "x-12345678901", "u"),
			want: workload.Workload{Kind: workload.KindJob, Name: "x-12345678901", Resolution: workload.Unresolved}},
		{name: "job of another group", owners: controller("example.com/v1", "Job", "backup-29412345", "u"),
			want: workload.Workload{Kind: "Job", Name: "backup-29412345", Resolution: workload.Resolved}},
		{name: "statefulset", owners: controller("apps/v1", "StatefulSet", "cache", "u"),
			want: workload.Workload{Kind: workload.KindStatefulSet, Name: "cache", Resolution: workload.Resolved}},
		{name: "custom controller", owners: controller("argoproj.io/v1alpha1", "Rollout", "canary", "u"),
			want: workload.Workload{Kind: "Rollout", Name: "canary", Resolution: workload.Resolved}},
		{name: "owner that is not the controller", owners: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u"}},
			want: workload.Workload{Resolution: workload.Resolved}},
	}
	r := workload.NewResolver()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID(rune('a' + i)), Labels: tt.labels, OwnerReferences: tt.owners}}
			r.Observe(pod)
			if next := r.Sync(t.Context()); !next.IsZero() {
				t.Errorf("Sync without a Getter: next due %v, want none", next)
			}
			want(t, r, pod, tt.want)
		})
	}
	if got := r.Gets(); len(got) != 0 {
		t.Errorf("gets without a Getter: %v", got)
	}
}
