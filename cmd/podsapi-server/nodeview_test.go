package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestKubeAPINodeViewAPIServer runs podsapi-server with --source=apiserver,
// --kube-api-address and --workloads=apiserver against a real
// kube-apiserver, as an identity with the rights deploy/ grants (pods;
// system:auth-delegator; components/kube-api-kinds; components/node-view):
// the node view is served under /views/node without a flag of its own, and
// a client-go clientset pointed at it reads the node's slice: the
// Deployment of the node's pod through its ReplicaSet, the namespace that
// holds it, and a 404 for a namespace that holds none of the node's pods.
func TestKubeAPINodeViewAPIServer(t *testing.T) {
	cp := kubetest.Start(t, doorPodsapi)
	rule := func(group, resources, verbs string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: strings.Split(resources, ","), Verbs: strings.Split(verbs, ",")}
	}
	mustCreate(t, cp.Admin, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nv-podsapi"}, Rules: []rbacv1.PolicyRule{
		rule("", "pods", "get,list,watch"), rule("", "namespaces,nodes", "get,list,watch"),
		rule("apps", "replicasets,deployments,statefulsets,daemonsets", "get"), rule("batch", "jobs,cronjobs", "get"),
	}})
	for name, role := range map[string]string{"nv-podsapi": "nv-podsapi", "nv-podsapi-delegate": "system:auth-delegator"} {
		mustCreate(t, cp.Admin, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: doorPodsapi}}})
	}
	for _, ns := range []string{doorNS, doorOtherNS} {
		mustCreate(t, cp.Admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	labels := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	dep := mustCreate(t, cp.Admin, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: doorNS, Name: "web"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	})
	yes := true
	rs := mustCreate(t, cp.Admin, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: doorNS, Name: "web-1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	})
	pod := podIn(doorNS, "web-1-a", e2eNode)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}
	mustCreate(t, cp.Admin, pod)
	mustCreate(t, cp.Admin, podIn(doorOtherNS, "far", e2eOtherNode))

	dir := t.TempDir()
	cert, key, ca := kubetest.ServingCert(t, dir)
	sock := podstest.SocketPath(t)
	conn, logs := runServing(t, sock, false, "--source", "apiserver", "--node-name", e2eNode, "--workloads", "apiserver",
		"--kubeconfig", cp.Kubeconfig(t, doorPodsapi, cp.Host()),
		"--kube-api-address", "127.0.0.1:0", "--kube-api-tls-cert-file", cert, "--kube-api-tls-private-key-file", key,
		"--kube-api-socket", filepath.Join(dir, "kube.sock"))
	_ = waitList(t, conn, logs, podstest.ConnectClient(t, sock))
	view := kubernetes.NewForConfigOrDie(&rest.Config{Host: "https://" + kubeAPIAddress(t, logs) + "/views/node",
		BearerToken: cp.Token(kubetest.AdminUser), TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	ctx := t.Context()
	waitFor(t, "the node view's Deployments", func() (bool, error) {
		list, err := view.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
		if apierrors.IsServiceUnavailable(err) {
			return false, nil // The slice has not been read yet.
		}
		return err == nil && len(list.Items) == 1 && list.Items[0].UID == dep.UID, err
	})
	namespaces, err := view.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil || !slices.Equal(namespaceNames(namespaces.Items), []string{doorNS}) {
		t.Errorf("the node view's namespaces: %v %v, want [%s]", err, namespaces, doorNS)
	}
	pods, err := view.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil || !slices.Equal(podNames(pods.Items), []string{"web-1-a"}) {
		t.Errorf("the node view's pods: %v %v, want [web-1-a]", err, pods)
	}
	if got, err := view.AppsV1().ReplicaSets(doorNS).Get(ctx, rs.Name, metav1.GetOptions{}); err != nil || got.UID != rs.UID {
		t.Errorf("the node view's ReplicaSet: %v %v", err, got)
	}
	if _, err := view.CoreV1().Namespaces().Get(ctx, doorOtherNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a namespace outside the node's slice: %v, want 404", err)
	}
}
