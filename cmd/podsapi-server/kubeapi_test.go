package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// The Kubernetes API of podsapi-server end to end: Run with
// --source=apiserver and --kube-api-address/--kube-api-socket, its
// kubeconfig podsapi's own least-privileged identity (pods, and
// system:auth-delegator) reaching the API server through a proxy the test
// cuts; unchanged client-go clients and an informer with kubeconfigs
// pointing at podsapi.

const (
	doorPodsapi = "podsapi"                         // podsapi's own identity: reads every pod, reviews tokens and accesses.
	doorReader  = "ns-reader"                       // May read the pods of namespace doorNS only.
	doorLister  = "ns-lister"                       // May list namespaces only.
	doorPoller  = "pod-poller"                      // May get nodes/pods (the kubelet's /pods) only.
	doorNode    = kubetest.NodeUserPrefix + e2eNode // The Node authorizer's: the node's pods, by field selector only.
	doorNS      = "agents"
	doorOtherNS = "shop"
)

func TestKubeAPIDoorAPIServer(t *testing.T) {
	cp := kubetest.Start(t, doorPodsapi, doorReader, doorLister, doorPoller, doorNode)
	ctx := t.Context()
	admin := cp.Admin
	for _, ns := range []string{doorNS, doorOtherNS} {
		mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	grantDoorRoles(t, cp)
	for _, p := range []*corev1.Pod{
		podIn(doorNS, "agent-a", e2eNode), podIn(doorNS, "agent-b", e2eOtherNode),
		podIn(doorOtherNS, "web-a", e2eNode), podIn(doorOtherNS, "web-b", e2eOtherNode),
	} {
		mustCreate(t, admin, p)
	}

	proxy := kubetest.NewProxy(t, cp.Host())
	dir := t.TempDir()
	cert, key, ca := kubetest.ServingCert(t, dir)
	kubeSock := filepath.Join(dir, "kube.sock")
	sock := podstest.SocketPath(t)
	conn, logs := runServing(t, sock, false, "--source", "apiserver", "--node-name", e2eNode,
		"--kubeconfig", cp.Kubeconfig(t, doorPodsapi, proxy.Addr()),
		"--kube-api-address", "127.0.0.1:0", "--kube-api-tls-cert-file", cert, "--kube-api-tls-private-key-file", key,
		"--kube-api-socket", kubeSock)
	_ = waitList(t, conn, logs, podstest.ConnectClient(t, sock))
	addr := kubeAPIAddress(t, logs)
	client := func(user string) *kubernetes.Clientset {
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: "https://" + addr, BearerToken: cp.Token(user), TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	}
	reader, lister := client(doorReader), client(doorLister)
	pinned := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", e2eNode).String()}

	t.Run("node's pods of an allowed namespace", func(t *testing.T) {
		list, err := reader.CoreV1().Pods(doorNS).List(ctx, pinned)
		if err != nil {
			t.Fatal(err)
		}
		if got := podNames(list.Items); !slices.Equal(got, []string{"agent-a"}) {
			t.Fatalf("pods %v, want [agent-a]", got)
		}
	})
	t.Run("node's pods of another namespace", func(t *testing.T) {
		_, err := reader.CoreV1().Pods(doorOtherNS).List(ctx, pinned)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "ns-reader" cannot list resource "pods" in API group "" in the namespace "shop"`) {
			t.Fatalf("got %v, want 403 for ns-reader", err)
		}
	})
	t.Run("cluster's pods passed through with the caller's token", func(t *testing.T) {
		// podsapi's identity may list every pod; the reader may not.
		_, err := reader.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "ns-reader" cannot list resource "pods" in API group "" at the cluster scope`) {
			t.Fatalf("got %v, want the API server's 403 for ns-reader", err)
		}
	})
	t.Run("get namespaces passed through", func(t *testing.T) {
		list, err := lister.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if names := namespaceNames(list.Items); !slices.Contains(names, doorNS) || !slices.Contains(names, "kube-system") {
			t.Fatalf("namespaces %v", names)
		}
	})
	t.Run("selectors in the SubjectAccessReview", func(t *testing.T) {
		// The Node authorizer allows the node's user the pods of its node
		// only when the review carries the request's field selector, as
		// the API server's own authorization does (KEP-4601); RBAC allows
		// it nothing.
		list, err := client(doorNode).CoreV1().Pods(doorOtherNS).List(ctx, pinned)
		if err != nil {
			t.Fatalf("the node's user, its node's pods: %v", err)
		}
		if got := podNames(list.Items); !slices.Equal(got, []string{"web-a"}) {
			t.Fatalf("pods %v, want [web-a]", got)
		}
		_, err = client(doorNode).CoreV1().Pods(doorOtherNS).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + e2eNode + ",status.phase!=Failed"})
		if err != nil {
			t.Fatalf("the node's user, its node's pods with another term: %v", err)
		}
	})
	t.Run("kubelet's /pods", func(t *testing.T) {
		https := httpsClient(ca)
		for user, code := range map[string]int{doorPoller: 200, doorReader: 403} {
			a := doorGet(t, https, "https://"+addr+"/pods", cp.Token(user))
			if a.code != code {
				t.Fatalf("%s: %d %s, want %d", user, a.code, a.body, code)
			}
			if code == 200 {
				var list corev1.PodList
				if err := json.Unmarshal(a.body, &list); err != nil {
					t.Fatal(err)
				}
				if got := podNames(list.Items); !slices.Equal(got, []string{"agent-a", "web-a"}) {
					t.Fatalf("/pods: %v, want [agent-a web-a]", got)
				}
			}
		}
	})
	t.Run("socket root peer without a token", func(t *testing.T) {
		a := doorGet(t, socketClient(kubeSock), "http://podsapi/api/v1/namespaces/shop/pods?fieldSelector=spec.nodeName%3D"+e2eNode, "")
		var list corev1.PodList
		if a.code != 200 || json.Unmarshal(a.body, &list) != nil {
			t.Fatalf("%d %s", a.code, a.body)
		}
		if got := podNames(list.Items); !slices.Equal(got, []string{"web-a"}) {
			t.Fatalf("pods %v, want [web-a]", got)
		}
	})

	t.Run("kubectl", func(t *testing.T) {
		kubectl := kubectlPath(t)
		for _, tc := range []struct {
			user string
			args []string
			want string
		}{
			{doorLister, []string{"get", "namespaces", "-o", "name"}, "namespace/" + doorNS + "\n"},
			{doorReader, []string{"get", "pods", "-n", doorNS, "--field-selector", "spec.nodeName=" + e2eNode, "-o", "name"}, "pod/agent-a\n"},
		} {
			kubeconfig := doorKubeconfig(t, addr, filepath.Join(dir, "serving-ca.crt"), cp.Token(tc.user))
			cctx, cancel := context.WithTimeout(ctx, e2eTimeout)
			out, err := exec.CommandContext(cctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, tc.args...)...).CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("kubectl %q as %s: %v\n%s\nwant a line %q", tc.args, tc.user, err, out, tc.want)
			}
		}
	})

	// An informer of the reader's namespace, pinned to the node, sees the
	// node's pods and their changes.
	factory := informers.NewSharedInformerFactoryWithOptions(reader, 0, informers.WithNamespace(doorNS),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = pinned.FieldSelector }))
	added := make(chan string, 16)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { added <- obj.(*corev1.Pod).Name }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown() // Waits for the informer to end.
	}()
	syncCtx, cancelSync := context.WithTimeout(ctx, e2eTimeout)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	if name := nextName(t, added); name != "agent-a" {
		t.Fatalf("first pod %s, want agent-a", name)
	}
	mustCreate(t, admin, podIn(doorNS, "agent-c", e2eOtherNode)) // Never seen.
	mustCreate(t, admin, podIn(doorNS, "agent-d", e2eNode))
	if name := nextName(t, added); name != "agent-d" {
		t.Fatalf("next pod %s, want agent-d", name)
	}

	// The API server unreachable: the node's pods are still served (cached
	// decisions), passed-through requests fail with a Status.
	proxy.Cut()
	list, err := reader.CoreV1().Pods(doorNS).List(ctx, pinned)
	if err != nil {
		t.Fatalf("the node's pods during the outage: %v", err)
	}
	if got := podNames(list.Items); !slices.Equal(got, []string{"agent-a", "agent-d"}) {
		t.Fatalf("the node's pods during the outage: %v", got)
	}
	if _, err := lister.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("namespaces during the outage: %v, want 503", err)
	}
	proxy.Restore(t)
}

// grantDoorRoles gives each user of the test its rights, and waits until
// the API server's authorizer has them.
func grantDoorRoles(t *testing.T, cp *kubetest.ControlPlane) {
	t.Helper()
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	subject := func(user string) []rbacv1.Subject {
		return []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	}
	rule := func(resource, verbs string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: strings.Split(verbs, ",")}}
	}
	for name, rules := range map[string][]rbacv1.PolicyRule{
		"door-pods": rule("pods", "get,list,watch"), "door-namespaces": rule("namespaces", "list"), "door-nodes-pods": rule("nodes/pods", "get"),
	} {
		mustCreate(t, cp.Admin, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})
	}
	for name, b := range map[string]struct{ role, user string }{
		"door-podsapi":          {"door-pods", doorPodsapi},
		"door-podsapi-delegate": {"system:auth-delegator", doorPodsapi},
		"door-lister":           {"door-namespaces", doorLister},
		"door-poller":           {"door-nodes-pods", doorPoller},
	} {
		mustCreate(t, cp.Admin, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref("ClusterRole", b.role), Subjects: subject(b.user)})
	}
	if _, err := cp.Admin.RbacV1().RoleBindings(doorNS).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "door-reader"}, RoleRef: ref("ClusterRole", "door-pods"), Subjects: subject(doorReader),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podsapi := kubernetes.NewForConfigOrDie(cp.Config(doorPodsapi, cp.Host()))
	reader := kubernetes.NewForConfigOrDie(cp.Config(doorReader, cp.Host()))
	waitFor(t, "the roles", func() (bool, error) {
		_, err1 := podsapi.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{Limit: 1})
		_, err2 := reader.CoreV1().Pods(doorNS).List(t.Context(), metav1.ListOptions{Limit: 1})
		return err1 == nil && err2 == nil, nil
	})
}

// podIn returns a pod of namespace ns bound to node.
func podIn(ns, name, node string) *corev1.Pod {
	p := newPod(name, node, nil)
	p.Namespace = ns
	return p
}

// kubeAPIAddress returns the address the server's log says its Kubernetes
// API listens on.
func kubeAPIAddress(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	waitLog(t, logs, "serving the node's pods through the Kubernetes API")
	m := regexp.MustCompile(`through the Kubernetes API" address=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no address in the logs:\n%s", logs.String())
	}
	return m[1]
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

func namespaceNames(nss []corev1.Namespace) []string {
	var names []string
	for _, ns := range nss {
		names = append(names, ns.Name)
	}
	return names
}

// nextName returns the next name sent on c, within e2eTimeout.
func nextName(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case name := <-c:
		return name
	case <-time.After(e2eTimeout):
		t.Fatalf("no event within %v", e2eTimeout)
		return ""
	}
}

// doorAnswer is a response of the door read whole.
type doorAnswer struct {
	code int
	body []byte
}

// doorGet sends GET url with a bearer token (none if empty).
func doorGet(t *testing.T, c *http.Client, url, token string) doorAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	return doorAnswer{resp.StatusCode, body}
}

func httpsClient(ca []byte) *http.Client {
	c, err := rest.HTTPClientFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		panic(err)
	}
	return c
}

func socketClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}

// kubectlPath returns an unchanged kubectl v1.37.2 (PODSAPI_KUBECTL, or
// kubectl beside the kube-apiserver of PODSAPI_KUBE_BIN, as package
// kubeapi's TestKubectl finds it: docs/kubeapi.md says how to build it), or
// skips the test.
func kubectlPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("PODSAPI_KUBECTL")
	if path == "" {
		path = filepath.Join(os.Getenv(kubetest.EnvBin), "kubectl")
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no kubectl (PODSAPI_KUBECTL): %v", err)
	}
	return path
}

// doorKubeconfig writes a kubeconfig of podsapi's Kubernetes API at addr,
// verified with the CA file, with a bearer token, and returns its path.
func doorKubeconfig(t *testing.T, addr, ca, token string) string {
	t.Helper()
	return kubetest.WriteKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), "agent", token,
		kubetest.Server{Name: "podsapi", Host: addr, CAFile: ca})
}
