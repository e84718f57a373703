package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsapi/podsapi/test/kubetest"
)

// PodsapiUser is podsapi-server's own identity at the API server: it reads
// the pods of every node, and reviews the tokens and accesses of the
// door's callers (system:auth-delegator), as deploy/ grants its
// ServiceAccount, and has PodsapiKindsRules.
const PodsapiUser = "podsapi"

// PodsapiKindsRules are the rights podsapi-server has beside reading pods,
// so that its door answers the kinds an agent reads to describe a pod
// itself (docs/kubeapi.md): what deploy/components/kube-api-kinds grants
// (get, list and watch of namespaces and nodes: one shared watch of the
// namespaces and one of its own Node, --kube-api-shared-kinds), and what
// deploy/components/node-view grants (a get of each owner kind a pod's
// chain can hold: ReplicaSet, Deployment, StatefulSet, DaemonSet, Job,
// CronJob; one get per owner of the node's pods, --workloads=apiserver
// and the node view), never a list or watch of an owner kind.
var PodsapiKindsRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces", "nodes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get"}},
}

// Cluster is an API server and etcd whose audit log records every request,
// and where PodsapiUser has its rights.
type Cluster struct {
	*kubetest.ControlPlane

	dir   string // The cluster's files: audit log, kubeconfigs, tokens.
	audit string
}

// auditPolicy records every request at level Metadata, when its response
// is complete, and a watch also when its response starts, so that an open
// watch counts (see Requests).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// StartCluster starts etcd and the API server with its audit log, gives
// PodsapiUser a token and its rights, and waits until the API server's
// authorizer has them. Everything is stopped at the end of the test. It
// skips the test when PODSAPI_KUBE_BIN is unset.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "cluster")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{dir: dir, audit: filepath.Join(dir, "audit.log")}
	c.ControlPlane = kubetest.StartWith(t, kubetest.Options{
		Users: []string{PodsapiUser},
		APIServerFlags: []string{
			"--audit-policy-file=" + policy, "--audit-log-path=" + c.audit,
			"--audit-log-mode=blocking", "--audit-log-format=json",
		},
	})
	c.grantPodsapi(t)
	return c
}

// grantPodsapi gives PodsapiUser its rights (PodReader and
// PodsapiKindsRules) and waits until the API server's authorizer has them.
func (c *Cluster) grantPodsapi(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "podsapi"}, Rules: append([]rbacv1.PolicyRule{PodReader}, PodsapiKindsRules...)}
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]string{"podsapi": "podsapi", "podsapi-delegator": "system:auth-delegator"} {
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: PodsapiUser}},
		}
		if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client := kubernetes.NewForConfigOrDie(c.Config(PodsapiUser, c.Host()))
	kubetest.Eventually(t, "podsapi's rights", func() error {
		if _, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return err
		}
		if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return err
		}
		// The last rule's: the role is granted as a whole.
		_, err := client.BatchV1().CronJobs("default").Get(ctx, "none", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// Namespace creates the namespace unless it exists.
func (c *Cluster) Namespace(t testing.TB, name string) {
	t.Helper()
	_, err := c.Admin.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
