package door_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/test/kubetest"
)

// The door against a real kube-apiserver and etcd: tokens the API server
// knows, authenticated by real TokenReviews and authorized by real
// SubjectAccessReviews, and the pass-through carrying each caller's own
// token. podsapi's own identity is the API server's admin (system:masters),
// so that any request made with podsapi's credentials would be allowed:
// every 403 below proves that it was not.

const (
	nsReader  = "ns-reader" // May get, list and watch pods in namespace "a" only.
	nsLister  = "ns-lister" // May list namespaces, nothing else.
	nobody    = "nobody"    // May do nothing.
	nsAllowed = "a"
	nsOther   = "b"
)

// grantRoles gives nsReader and nsLister their rights and waits until the
// API server's authorizer has them.
func grantRoles(t *testing.T, cp *kubetest.ControlPlane) {
	t.Helper()
	ctx := t.Context()
	rbac := cp.Admin.RbacV1()
	for _, ns := range []string{nsAllowed, nsOther} {
		if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rbac.Roles(nsAllowed).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(nsAllowed).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: nsReader}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "ns-lister"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ns-lister"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ns-lister"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: nsLister}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader := kubernetes.NewForConfigOrDie(cp.Config(nsReader, cp.Host()))
	lister := kubernetes.NewForConfigOrDie(cp.Config(nsLister, cp.Host()))
	// RBAC takes effect once the API server's informers have it.
	waitUntil(t, "the roles", func() bool {
		_, err1 := reader.CoreV1().Pods(nsAllowed).List(ctx, metav1.ListOptions{})
		_, err2 := lister.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err1 == nil && err2 == nil
	})
}

// waitUntil polls cond until it holds, within the test's deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-tick.C:
		}
	}
}

// newDoor returns a door in front of a local double, whose TokenReviews,
// SubjectAccessReviews and pass-through go to the API server at host with
// the admin's credentials, with the options given.
func newDoor(t *testing.T, cp *kubetest.ControlPlane, host string, opts ...door.AuthOption) *door.Door {
	t.Helper()
	own := cp.Config(kubetest.AdminUser, host) // podsapi's own identity: every right.
	auth, err := door.NewAuth(own, opts...)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := door.NewPassThrough(own)
	if err != nil {
		t.Fatal(err)
	}
	return door.New(newLocalDouble(), door.WithAuth(auth), door.WithPassThrough(pass))
}

// clientOf returns a client-go clientset of user reaching the door s.
func clientOf(cp *kubetest.ControlPlane, s *served, token string) *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(&rest.Config{
		Host:            "https://" + s.addr,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.ca},
	})
}

func TestDoorAPIServer(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	ctx := t.Context()
	s := serve(t, newDoor(t, cp, cp.Host()), door.Config{})
	reader := clientOf(cp, s, cp.Token(nsReader))
	lister := clientOf(cp, s, cp.Token(nsLister))

	t.Run("podsapi's own rights checked", func(t *testing.T) {
		for user, want := range map[string]string{
			kubetest.AdminUser: "",
			nsReader:           "may not create tokenreviews.authentication.k8s.io or create subjectaccessreviews.authorization.k8s.io: bind it to the ClusterRole system:auth-delegator",
		} {
			auth, err := door.NewAuth(cp.Config(user, cp.Host()))
			if err != nil {
				t.Fatal(err)
			}
			err = auth.Check(ctx)
			if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
				t.Fatalf("%s: Check = %v, want %q", user, err, want)
			}
		}
	})
	t.Run("allowed namespace served locally", func(t *testing.T) {
		list, err := reader.CoreV1().Pods(nsAllowed).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if list.ResourceVersion != "1" { // The local double's, not the API server's.
			t.Fatalf("resourceVersion %q: not answered by the local side", list.ResourceVersion)
		}
	})
	t.Run("other namespace forbidden locally", func(t *testing.T) {
		_, err := reader.CoreV1().Pods(nsOther).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("got %v, want 403 Forbidden", err)
		}
		want := `pods is forbidden: User "ns-reader" cannot list resource "pods" in API group "" in the namespace "b"`
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("message %q, want %q", err, want)
		}
	})
	t.Run("pass-through with the caller's own token", func(t *testing.T) {
		// podsapi's identity may list namespaces and create config maps;
		// the reader may not, and the API server says so naming the reader.
		_, err := reader.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "ns-reader" cannot list resource "namespaces"`) {
			t.Fatalf("list namespaces: %v, want the API server's 403 for ns-reader", err)
		}
		_, err = reader.CoreV1().ConfigMaps(nsAllowed).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "ns-reader" cannot create resource "configmaps"`) {
			t.Fatalf("create a config map: %v, want the API server's 403 for ns-reader", err)
		}
		// Cluster-wide pods are the API server's to answer: forbidden to
		// the reader there too.
		_, err = reader.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "ns-reader" cannot list resource "pods" in API group "" at the cluster scope`) {
			t.Fatalf("list pods of all namespaces: %v, want the API server's 403", err)
		}
	})
	t.Run("get namespaces through the pass-through", func(t *testing.T) {
		list, err := lister.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		for _, want := range []string{"default", nsAllowed, nsOther} {
			if !slices.Contains(names, want) {
				t.Fatalf("namespaces %v, missing %s", names, want)
			}
		}
		// A watch streams through.
		w, err := lister.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if !apierrors.IsForbidden(err) { // ns-lister may list, not watch.
			if err == nil {
				w.Stop()
			}
			t.Fatalf("watch namespaces: %v, want the API server's 403", err)
		}
	})
	t.Run("a watch passed through streams its events", func(t *testing.T) {
		admin := clientOf(cp, s, cp.Token(kubetest.AdminUser))
		w, err := admin.CoreV1().ConfigMaps(nsOther).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := cp.Admin.CoreV1().ConfigMaps(nsOther).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "streamed"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == "streamed" {
				return
			}
		}
		t.Fatal("the watch ended before the config map's event")
	})
	t.Run("an upgrade passed through", func(t *testing.T) {
		// The API server serves watches over WebSocket too: a real 101 and
		// an upgraded connection, through the door, with the caller's token.
		dial := func(user string) (*websocket.Conn, error) {
			cfg, err := websocket.NewConfig("wss://"+s.addr+"/api/v1/namespaces/b/configmaps?watch=true", "https://"+s.addr)
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(s.ca)
			cfg.TlsConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			cfg.Header = http.Header{"Authorization": {"Bearer " + cp.Token(user)}}
			return websocket.DialConfig(cfg)
		}
		if _, err := dial(nsReader); err == nil || !strings.Contains(err.Error(), "bad status") {
			t.Fatalf("the reader's upgrade: %v, want the API server's refusal (403, no upgrade)", err)
		}
		ws, err := dial(kubetest.AdminUser)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if err := ws.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Admin.CoreV1().ConfigMaps(nsOther).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "upgraded"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			var frame []byte
			if err := websocket.Message.Receive(ws, &frame); err != nil {
				t.Fatalf("the upgraded watch: %v", err)
			}
			if strings.Contains(string(frame), `"name":"upgraded"`) {
				return
			}
		}
	})
	t.Run("body larger than the bound", func(t *testing.T) {
		body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"x":"` + strings.Repeat("x", door.DefaultMaxRequestBytes) + `"}}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+s.addr+"/api/v1/namespaces/a/configmaps", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+cp.Token(kubetest.AdminUser))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s, want 413", resp.Status)
		}
	})
	for _, tc := range []struct {
		name, path, token string
	}{
		{"garbage token local", "/api/v1/namespaces/a/pods", "garbage"},
		{"garbage token passed through", "/api/v1/namespaces", "garbage"},
		{"no token local", "/api/v1/namespaces/a/pods", ""},
		{"no token passed through", "/api/v1/namespaces", ""},
		{"nobody local", "/api/v1/namespaces/a/pods", cp.Token(nobody)},
		{"nobody passed through", "/api/v1/namespaces", cp.Token(nobody)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get(t, s.client(), "https://"+s.addr+tc.path, tc.token)
			st := got.status(t)
			local := strings.HasSuffix(tc.path, "/pods")
			direct := get(t, apiClient(t, cp), "https://"+cp.Host()+tc.path, tc.token)
			switch {
			case local && tc.token == cp.Token(nobody):
				if got.code != 403 || !strings.Contains(st.Message, `User "nobody" cannot list resource "pods"`) {
					t.Fatalf("%d %q, want 403 for nobody", got.code, st.Message)
				}
			case local:
				// The kubelet's answer to a caller it cannot authenticate.
				if got.code != 401 || st.Reason != metav1.StatusReasonUnauthorized {
					t.Fatalf("%d %s, want 401 Unauthorized", got.code, st.Reason)
				}
			default:
				// The API server's own answer, whatever it is.
				if got.code != direct.code || string(got.body) != string(direct.body) {
					t.Fatalf("through the door %d %s; the API server answers %d %s", got.code, got.body, direct.code, direct.body)
				}
			}
		})
	}
}

// apiClient returns an HTTPS client of the API server that trusts its CA
// and sends no credentials of its own.
func apiClient(t *testing.T, cp *kubetest.ControlPlane) *http.Client {
	t.Helper()
	c, err := rest.HTTPClientFor(rest.AnonymousClientConfig(cp.AdminConfig))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A caller with a client certificate signed by the client CA is
// authenticated by it and authorized by SubjectAccessReviews; its requests
// cannot be passed through, and are refused with a Status that says why.
func TestDoorAPIServerClientCertificate(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	caFile, cert := clientCert(t, nsReader)
	// One review of an unknown token for the address of the test.
	budgets := door.ReviewBudgets{PerAddress: 1e-9}
	s := serve(t, newDoor(t, cp, cp.Host(), door.WithClientCAFile(caFile), door.WithReviewBudgets(budgets)), door.Config{ClientCertificates: true})
	c := s.client(cert)
	for _, tc := range []struct {
		name, path string
		code       int
		says       string
	}{
		{"allowed namespace", "/api/v1/namespaces/a/pods", 200, ""},
		{"other namespace", "/api/v1/namespaces/b/pods", 403, `User "ns-reader" cannot list resource "pods"`},
		{"passed through", "/api/v1/namespaces", 401, "cannot forward a client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, c, "https://"+s.addr+tc.path, "")
			if a.code != tc.code {
				t.Fatalf("%d %s, want %d", a.code, a.body, tc.code)
			}
			if tc.says != "" && !strings.Contains(a.status(t).Message, tc.says) {
				t.Fatalf("message %s, want %q", a.body, tc.says)
			}
		})
	}
	// A certificate of another CA authenticates nobody.
	_, stranger := clientCert(t, nsReader)
	if a := get(t, s.client(stranger), "https://"+s.addr+"/api/v1/namespaces/a/pods", ""); a.code != 401 {
		t.Fatalf("a certificate of another CA: %d %s, want 401", a.code, a.body)
	}
	// A certificate names its caller whatever token comes with it, as the
	// API server tries the certificate first: the token is neither
	// charged to the review budget (one review) nor remembered as
	// authenticated.
	for _, step := range []struct {
		what   string
		client *http.Client
		token  string
		code   int
	}{
		{"a certificate with a token", c, "garbage-1", 200},
		{"a certificate with another token", c, "garbage-2", 200},
		{"a token alone, the address's one review", s.client(), "garbage-3", 401},
		{"the token that came with the certificate, alone", s.client(), "garbage-1", 429},
	} {
		if a := get(t, step.client, "https://"+s.addr+"/api/v1/namespaces/a/pods", step.token); a.code != step.code {
			t.Fatalf("%s: %d %s, want %d", step.what, a.code, a.body, step.code)
		}
	}
}

// clientCert writes a client CA into a temporary file and returns its path
// and a client certificate for user signed by it.
func clientCert(t *testing.T, user string) (string, tls.Certificate) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, userKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &userKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: userKey}
}

// While the API server is unreachable, decisions cached before keep
// working for their TTL (here an hour, so that no machine is too slow for
// the test), callers that cannot be verified get 401, requests whose
// authorization cannot be asked 503, and passed-through requests 503; with
// TTLs shorter than the outage, nothing cached is left, and the same
// caller gets 401.
func TestDoorAPIServerOutage(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	ctx := t.Context()
	proxy := kubetest.NewProxy(t, cp.Host())
	long := serve(t, newDoor(t, cp, proxy.Addr(), door.WithCacheTTLs(time.Hour, time.Hour, time.Hour)), door.Config{})
	short := serve(t, newDoor(t, cp, proxy.Addr(), door.WithCacheTTLs(time.Nanosecond, time.Nanosecond, time.Nanosecond)), door.Config{})
	const pods, namespaces = "/api/v1/namespaces/a/pods", "/api/v1/namespaces"
	reader, lister := cp.Token(nsReader), cp.Token(nsLister)
	for _, s := range []*served{long, short} {
		for _, path := range []string{pods, namespaces} {
			if a := get(t, s.client(), "https://"+s.addr+path, map[string]string{pods: reader, namespaces: lister}[path]); a.code != 200 {
				t.Fatalf("before the outage, %s: %d %s", path, a.code, a.body)
			}
		}
	}
	proxy.Cut()
	for _, tc := range []struct {
		name   string
		s      *served
		path   string
		token  string
		code   int
		reason metav1.StatusReason
	}{
		{"cached decision", long, pods, reader, 200, ""},
		{"cached token, decision not cached", long, "/api/v1/namespaces/b/pods", reader, 503, metav1.StatusReasonServiceUnavailable},
		{"token not cached", long, pods, cp.Token(nobody), 401, metav1.StatusReasonUnauthorized},
		{"passed through", long, namespaces, lister, 503, metav1.StatusReasonServiceUnavailable},
		{"decision expired", short, pods, reader, 401, metav1.StatusReasonUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, tc.s.client(), "https://"+tc.s.addr+tc.path, tc.token)
			if a.code != tc.code {
				t.Fatalf("%d %s, want %d", a.code, a.body, tc.code)
			}
			if tc.reason != "" {
				if st := a.status(t); st.Reason != tc.reason {
					t.Fatalf("reason %s, want %s: %s", st.Reason, tc.reason, a.body)
				}
			}
		})
	}
	proxy.Restore(t)
	waitUntil(t, "the pass-through after the outage", func() bool {
		_, err := clientOf(cp, long, lister).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err == nil
	})
}

// direct returns a valid caller's request sent straight to the API server
// of cp, timed's control: a GET of path with token, on a new connection.
// Its answer is not the test's business, only its time.
func direct(t *testing.T, cp *kubetest.ControlPlane, path, token string) func() {
	t.Helper()
	ca, err := os.ReadFile(cp.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return func() {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+cp.Host()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("the API server, for the control: %v", err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
