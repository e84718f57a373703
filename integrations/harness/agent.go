package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/test/kubetest"
)

// The contexts of an agent's kubeconfig (Agent.Kubeconfig), named as the
// servers they reach.
const (
	// ContextDirect reaches the API server.
	ContextDirect = "direct"
	// ContextPodsapi reaches podsapi's front door: its full view, where
	// every answer is the API server's.
	ContextPodsapi = "podsapi"
	// ContextNodeView reaches the door's node view (NodeViewPath), where
	// every list holds the node's slice only.
	ContextNodeView = "node"
)

// PodReader is the rule of an agent that reads pods.
var PodReader = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}

// Agent is the identity an agent runs as: a ServiceAccount, bound to a
// ClusterRole of the rules the test gives it, with a bearer token from the
// API server's TokenRequest (valid an hour), as a DaemonSet's pod gets one.
type Agent struct {
	// Namespace and Name are the ServiceAccount's.
	Namespace, Name string
	// Token is the ServiceAccount's bearer token.
	Token string

	cluster *Cluster
}

// Agent creates the ServiceAccount namespace/name (and its namespace if
// needed), binds it to a ClusterRole of rules, requests its token, and
// waits until the API server authorizes its first rule's first verb.
func (c *Cluster) Agent(t testing.TB, namespace, name string, rules ...rbacv1.PolicyRule) *Agent {
	t.Helper()
	ctx := context.Background()
	c.Namespace(t, namespace)
	sa, err := c.Admin.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := "agent:" + namespace + ":" + name
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(ctx,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hour := int64(3600)
	tr, err := c.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Namespace: namespace, Name: name, Token: tr.Status.Token, cluster: c}
	if len(rules) > 0 && len(rules[0].Resources) > 0 && len(rules[0].Verbs) > 0 {
		review := a.review(rules[0])
		kubetest.Eventually(t, "the rights of "+a.User(), func() error {
			got, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !got.Status.Allowed {
				return fmt.Errorf("not allowed yet: %s", got.Status.Reason)
			}
			return nil
		})
	}
	return a
}

// review is the SubjectAccessReview of the agent's first verb of rule r on
// r's first resource (a subresource after a slash), cluster-wide.
func (a *Agent) review(r rbacv1.PolicyRule) *authorizationv1.SubjectAccessReview {
	group := ""
	if len(r.APIGroups) > 0 {
		group = r.APIGroups[0]
	}
	resource, subresource, _ := strings.Cut(r.Resources[0], "/")
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   a.User(),
		Groups: serviceaccount.MakeGroupNames(a.Namespace),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: r.Verbs[0], Group: group, Resource: resource, Subresource: subresource,
		},
	}}
}

// User returns the agent's user name at the API server
// (system:serviceaccount:NAMESPACE:NAME), as its audit log names it.
func (a *Agent) User() string { return serviceaccount.MakeUsername(a.Namespace, a.Name) }

// DirectConfig returns the agent's client configuration for the API
// server.
func (a *Agent) DirectConfig() *rest.Config {
	return &rest.Config{Host: "https://" + a.cluster.Host(), BearerToken: a.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: a.cluster.CAFile()}}
}

// DoorConfig returns the agent's client configuration for p's front door:
// the same token, the door's address and CA.
func (a *Agent) DoorConfig(p *Podsapi) *rest.Config {
	return &rest.Config{Host: "https://" + p.Addr, BearerToken: a.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: p.CAFile}}
}

// NodeViewConfig returns the agent's client configuration for p's node
// view: DoorConfig's, its host followed by NodeViewPath.
func (a *Agent) NodeViewConfig(p *Podsapi) *rest.Config {
	cfg := a.DoorConfig(p)
	cfg.Host = "https://" + p.NodeViewHost()
	return cfg
}

// Kubeconfig writes a kubeconfig of the agent with three contexts,
// ContextDirect (the API server), ContextPodsapi (p's front door) and
// ContextNodeView (its node view, as podsctl kubeconfig --view node writes
// it), that differ only in their server and CA, the current one being
// current, and returns its path: pointing an agent at podsapi is changing
// its kubeconfig's context.
func (a *Agent) Kubeconfig(t testing.TB, p *Podsapi, current string) string {
	t.Helper()
	servers := []kubetest.Server{
		{Name: ContextDirect, Host: a.cluster.Host(), CAFile: a.cluster.CAFile()},
		{Name: ContextPodsapi, Host: p.Addr, CAFile: p.CAFile},
		{Name: ContextNodeView, Host: p.NodeViewHost(), CAFile: p.CAFile},
	}
	i := slices.IndexFunc(servers, func(s kubetest.Server) bool { return s.Name == current })
	if i < 0 {
		t.Fatalf("harness: no context %q: %q, %q or %q", current, ContextDirect, ContextPodsapi, ContextNodeView)
	}
	servers[0], servers[i] = servers[i], servers[0] // The first is current.
	path := filepath.Join(a.cluster.dir, fmt.Sprintf("kubeconfig-%s-%s-%s", a.Namespace, a.Name, current))
	return kubetest.WriteKubeconfig(t, path, a.User(), a.Token, servers...)
}

// TokenFile writes the agent's token into a file and returns its path, as
// a projected ServiceAccount token is mounted into its pod.
func (a *Agent) TokenFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(a.cluster.dir, fmt.Sprintf("token-%s-%s", a.Namespace, a.Name))
	if err := os.WriteFile(path, []byte(a.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
