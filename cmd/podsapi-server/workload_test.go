package main

import (
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestWorkloadsAPIServer runs podsapi-server with --source=apiserver and
// --workloads=apiserver against a real kube-apiserver, as a user allowed to
// read pods and to get ReplicaSets and Jobs only: FindPods answers a
// Deployment's pod with the Deployment, resolved through its ReplicaSet.
func TestWorkloadsAPIServer(t *testing.T) {
	cp := kubetest.Start(t, e2eReader)
	ctx := t.Context()
	grantPodReader(t, cp)
	mustCreate(t, cp.Admin, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "podsapi-workloads"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}},
		},
	})
	mustCreate(t, cp.Admin, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "podsapi-workloads"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "podsapi-workloads"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: e2eReader}},
	})
	mustCreate(t, cp.Admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e2eNamespace}})
	labels := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	dep := mustCreate(t, cp.Admin, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eNamespace, Name: "web"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	})
	yes := true
	// Not named after the Deployment: only the API server can tell.
	rs := mustCreate(t, cp.Admin, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e2eNamespace, Name: "frontend",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	})
	pod := newPod("frontend-x2k4q", e2eNode, nil)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}
	pod = mustCreate(t, cp.Admin, pod)

	sock := podstest.SocketPath(t)
	conn, logs := runServing(t, sock, false, "--source", "apiserver", "--node-name", e2eNode, "--workloads", "apiserver",
		"--kubeconfig", cp.Kubeconfig(t, e2eReader, cp.Host()))
	client := podstest.ConnectClient(t, sock)
	waitList(t, conn, logs, client)
	want := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
	var got *podsv1alpha1.PodWorkload
	waitFor(t, "the Deployment of the pod", func() (bool, error) {
		resp, err := client.FindPods(ctx, connect.NewRequest(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_CgroupPath{CgroupPath: "/kubepods/besteffort/pod" + string(pod.UID)}}))
		if err != nil {
			return false, err
		}
		got = resp.Msg.Matches[0].Workload
		return proto.Equal(got, want), nil
	})
}
