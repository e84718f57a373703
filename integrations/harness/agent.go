package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Agent is the identity an agent runs as: a ServiceAccount, bound to a
// ClusterRole of the rules the test gives it, with a bearer token from the
// API server's TokenRequest (valid an hour), as a DaemonSet's pod gets one.
type Agent struct {
	// Namespace and Name are the ServiceAccount's.
	Namespace, Name string
	// Token is the ServiceAccount's bearer token.
	Token string

	env *Env
}

// PodReader is the rule of an agent that reads pods.
var PodReader = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}

// Agent creates the ServiceAccount namespace/name (and its namespace if
// needed), binds it to a ClusterRole of rules, requests its token, and
// waits until the API server authorizes its first rule.
func (e *Env) Agent(t testing.TB, namespace, name string, rules ...rbacv1.PolicyRule) *Agent {
	t.Helper()
	ctx := context.Background()
	e.Namespace(t, namespace)
	sa, err := e.Admin.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := "agent:" + namespace + ":" + name
	if _, err := e.Admin.RbacV1().ClusterRoles().Create(ctx,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hour := int64(3600)
	tr, err := e.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Namespace: namespace, Name: name, Token: tr.Status.Token, env: e}
	if len(rules) > 0 && len(rules[0].Resources) > 0 && len(rules[0].Verbs) > 0 {
		r := rules[0]
		Eventually(t, "the rights of "+namespace+"/"+name, func() error {
			review, err := e.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar(a, r), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !review.Status.Allowed {
				return fmt.Errorf("not allowed yet: %s", review.Status.Reason)
			}
			return nil
		})
	}
	return a
}

// Namespace creates the namespace unless it exists.
func (e *Env) Namespace(t testing.TB, name string) {
	t.Helper()
	_, err := e.Admin.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// DirectConfig returns the agent's client configuration for the API
// server.
func (a *Agent) DirectConfig() *rest.Config {
	return &rest.Config{Host: "https://" + a.env.Control.Host(), BearerToken: a.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: a.env.apiCAFile}}
}

// DoorConfig returns the agent's client configuration for podsapi's front
// door: the same token, the door's address and CA.
func (a *Agent) DoorConfig() *rest.Config {
	return &rest.Config{Host: "https://" + a.env.DoorAddr, BearerToken: a.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: a.env.doorCAFile}}
}

// DirectKubeconfig writes a kubeconfig of the agent for the API server and
// returns its path.
func (a *Agent) DirectKubeconfig(t testing.TB) string {
	t.Helper()
	return a.kubeconfig(t, a.env.Control.Host(), a.env.apiCAFile)
}

// DoorKubeconfig writes a kubeconfig of the agent for podsapi's front door
// and returns its path: the only change an agent needs.
func (a *Agent) DoorKubeconfig(t testing.TB) string {
	t.Helper()
	return a.kubeconfig(t, a.env.DoorAddr, a.env.doorCAFile)
}

func (a *Agent) kubeconfig(t testing.TB, host, caFile string) string {
	t.Helper()
	path := filepath.Join(a.env.Dir, fmt.Sprintf("kubeconfig-%s-%s-%s", a.Namespace, a.Name, hostFile(host)))
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: https://%s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: agent
  context: {cluster: cluster, user: %s}
current-context: agent
`, host, caFile, a.Name, a.Token, a.Name)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Clients returns the agent's clientsets, direct and through the door.
func (a *Agent) Clients() (direct, door *kubernetes.Clientset) {
	return kubernetes.NewForConfigOrDie(a.DirectConfig()), kubernetes.NewForConfigOrDie(a.DoorConfig())
}
