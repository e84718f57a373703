//go:build linux

package spire_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/spire/pkg/agent/plugin/workloadattestor"
	"github.com/spiffe/spire/pkg/agent/plugin/workloadattestor/k8s"
	"github.com/spiffe/spire/pkg/common/catalog"
	"github.com/spiffe/spire/test/plugintest"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/podsapi/podsapi/integrations/harness"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/kubetest"
)

const (
	node    = "node-a"
	ns      = "payments"
	image   = "registry.example/payments/api:v1.4.2"
	imageID = "registry.example/payments/api@sha256:4b8e2a1c7d0f9e3b6a5c8d1e4f7a0b3c6d9e2f5a8b1c4d7e0f3a6b9c2d5e8f1a"
)

// TestK8sWorkloadAttestor loads SPIRE agent's k8s workload attestor as the
// agent does (its built-in plugin through the plugin catalog's gRPC facade,
// configured with HCL) twice: with the kubelet's secure port being
// podsapi's front door, and being a stand-in kubelet whose /pods is the API
// server's list of the node's pods. It attests a real process that the
// test puts into a cgroup named as a kubelet names a pod's container, and
// expects the same selectors from both, and from the pod object.
func TestK8sWorkloadAttestor(t *testing.T) {
	cgroups := cgroupRoot(t)
	cluster := harness.StartCluster(t)
	// SPIRE agent's ServiceAccount reads the kubelet's /pods: SPIRE's
	// documented role (nodes/proxy), podsapi's narrower one (nodes/pods),
	// and pods for the stand-in kubelet.
	agent := cluster.Agent(t, "spire", "spire-agent",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/proxy", "nodes/pods"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	)
	ctx := t.Context()
	cluster.Namespace(t, ns)
	containerID := randomHex(t)
	pod := runningPod(t, cluster, "api-7c9d6b5f4-x2x9z", containerID)
	// Other pods of the node, so that /pods is not one pod long.
	for i := range 20 {
		runningPod(t, cluster, fmt.Sprintf("worker-%d", i), randomHex(t))
	}
	workload := startInCgroup(t, cgroups, pod.UID, containerID)

	pa := cluster.StartPodsapi(t, node)
	wire := kubetest.NewProxy(t, pa.Addr)
	kubelet := newStandIn(t, cluster)
	token := agent.TokenFile(t)
	// The agent runs with hostNetwork and without node_name: the plugin
	// then asks https://127.0.0.1:<kubelet_secure_port>/pods and verifies
	// the certificate against kubelet_ca_path without the host name.
	t.Setenv("MY_NODE_NAME", "")
	door := load(t, port(t, wire.Addr()), pa.CAFile, token, "")
	direct := load(t, port(t, kubelet.addr), kubelet.caFile, token, "")

	want := []string{
		"k8s:sa:api", "k8s:ns:" + ns, "k8s:node-name:" + node,
		"k8s:pod-uid:" + string(pod.UID), "k8s:pod-name:" + pod.Name,
		"k8s:pod-image-count:1", "k8s:pod-init-image-count:0",
		"k8s:pod-image:" + image, "k8s:pod-image:" + imageID,
		"k8s:pod-label:app:api",
		"k8s:pod-owner:ReplicaSet:api-7c9d6b5f4", "k8s:pod-owner-uid:ReplicaSet:0e5d3c1a-8f4b-4d2e-9a7c-6b1f0e3d5c2a",
		"k8s:container-name:api", "k8s:container-image:" + image, "k8s:container-image:" + imageID,
	}
	slices.Sort(want)

	t.Run("a process of a pod", func(t *testing.T) {
		localBefore := pa.Door(t).Route("local")
		_, downBefore := wire.Bytes()
		cpuBefore := cpu(t, pa.PID)
		got := attest(t, door, workload)
		cpuAfter := cpu(t, pa.PID)
		_, downAfter := wire.Bytes()
		requests := pa.Door(t).Route("local") - localBefore
		if !slices.Equal(got, want) {
			t.Fatalf("through podsapi:\n%v\nwant\n%v", got, want)
		}
		if d := attest(t, direct, workload); !slices.Equal(d, got) {
			t.Fatalf("directly:\n%v\nthrough podsapi:\n%v", d, got)
		}
		if requests != 1 {
			t.Errorf("one attestation of a known pod asked podsapi's /pods %v times, want 1", requests)
		}
		t.Logf("one attestation: %v /pods request, %d bytes from podsapi on the wire (TLS), %v of podsapi-server's CPU (%d pods on the node)",
			requests, downAfter-downBefore, cpuAfter-cpuBefore, 21)
	})

	t.Run("a process of a pod not known yet", func(t *testing.T) {
		// The plugin polls /pods up to max_poll_attempts times, every
		// poll_retry_interval (60 and 500 ms by default), for a container
		// the kubelet has not reported yet (spire#3092). A short interval
		// here; the count is the same.
		const attempts = 6
		lateID := randomHex(t)
		late := startInCgroup(t, cgroups, types.UID("5f0c3e2a-1b4d-4c6e-8a9f-0d2b4c6e8a1f"), lateID)
		cfg := fmt.Sprintf("max_poll_attempts = %d\npoll_retry_interval = %q\n", attempts, "100ms")
		doorRetry := load(t, port(t, wire.Addr()), pa.CAFile, token, cfg)
		directRetry := load(t, port(t, kubelet.addr), kubelet.caFile, token, cfg)

		localBefore := pa.Door(t).Route("local")
		_, downBefore := wire.Bytes()
		cpuBefore := cpu(t, pa.PID)
		_, errDoor := doorRetry.Attest(ctx, late)
		cpuAfter := cpu(t, pa.PID)
		_, downAfter := wire.Bytes()
		requests := pa.Door(t).Route("local") - localBefore
		standInBefore := kubelet.requests.Load()
		_, errDirect := directRetry.Attest(ctx, late)
		standIn := kubelet.requests.Load() - standInBefore

		for name, err := range map[string]error{"through podsapi": errDoor, "directly": errDirect} {
			if err == nil || !strings.Contains(err.Error(), "no selectors found after max poll attempts") {
				t.Errorf("%s: %v, want no selectors found after max poll attempts", name, err)
			}
		}
		if requests != attempts || standIn != attempts {
			t.Errorf("/pods asked %v times of podsapi and %d of the stand-in, want %d each", requests, standIn, attempts)
		}
		t.Logf("one attestation of an unknown container: %v /pods requests, %d bytes from podsapi on the wire (TLS), %v of podsapi-server's CPU",
			requests, downAfter-downBefore, cpuAfter-cpuBefore)
	})
}

// load loads the plugin as SPIRE agent loads a built-in plugin, with the
// HCL a user writes for a kubelet whose secure port is port, plus extra.
func load(t *testing.T, port int, caFile, tokenFile, extra string) *workloadattestor.V1 {
	t.Helper()
	hcl := fmt.Sprintf("kubelet_secure_port = %d\nkubelet_ca_path = %q\ntoken_path = %q\n%s", port, caFile, tokenFile, extra)
	v1 := new(workloadattestor.V1)
	plugintest.Load(t, k8s.BuiltIn(), v1,
		plugintest.CoreConfig(catalog.CoreConfig{TrustDomain: spiffeid.RequireTrustDomainFromString("example.org")}),
		plugintest.Configure(hcl))
	return v1
}

// attest attests pid and returns its selectors as type:value, sorted.
func attest(t *testing.T, v1 *workloadattestor.V1, pid int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sels, err := v1.Attest(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range sels {
		out = append(out, s.Type+":"+s.Value)
	}
	slices.Sort(out)
	return out
}

// runningPod creates a pod of the node and gives it the status its kubelet
// would report: running, its container's ID and image.
func runningPod(t *testing.T, cluster *harness.Cluster, name, containerID string) *corev1.Pod {
	t.Helper()
	c := cluster.Admin.CoreV1().Pods(ns)
	p, err := c.Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"app": strings.SplitN(name, "-", 2)[0]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-7c9d6b5f4", UID: "0e5d3c1a-8f4b-4d2e-9a7c-6b1f0e3d5c2a", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "api", Containers: []corev1.Container{{Name: "api", Image: image}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now())
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.20", StartTime: &now, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "api", Image: image, ImageID: imageID, ContainerID: "containerd://" + containerID, Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}}
	p, err = c.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cgroupRoot returns the mount of the cgroup v2 hierarchy, where the test
// makes a pod's cgroups, or skips the test when it cannot write there
// (not root, or a read-only cgroup mount).
func cgroupRoot(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		probe, err := os.MkdirTemp(dir, "podsapi-probe-")
		if err != nil {
			t.Skipf("the test puts a process into a pod's cgroup, and cannot write %s: %v", dir, err)
		}
		_ = os.Remove(probe)
		return dir
	}
	t.Skip("the test puts a process into a pod's cgroup, and there is no cgroup v2 hierarchy")
	return ""
}

// startInCgroup starts a process in a cgroup named as the kubelet's systemd
// cgroup driver and containerd name a container's
// (kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<UID>.slice/cri-containerd-<ID>.scope),
// under a directory of the test's own, and returns its PID. It stops the
// process and removes the cgroups at the end of the test.
func startInCgroup(t *testing.T, root string, uid types.UID, containerID string) int {
	t.Helper()
	top, err := os.MkdirTemp(root, "podsapi-it-")
	if err != nil {
		t.Fatal(err)
	}
	u := strings.ReplaceAll(string(uid), "-", "_")
	leaf := filepath.Join(top, "kubepods.slice", "kubepods-besteffort.slice", "kubepods-besteffort-pod"+u+".slice", "cri-containerd-"+containerID+".scope")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// A cgroup is removable once its last process has exited; the
		// kernel may take a moment after the exit is reaped.
		deadline := time.Now().Add(10 * time.Second)
		for dir := leaf; dir != root; dir = filepath.Dir(dir) {
			for {
				err := os.Remove(dir)
				if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
					if err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Errorf("remove cgroup %s: %v", dir, err)
					}
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// standIn is the kubelet of the direct run: an HTTPS server whose /pods is
// the API server's list of the node's pods, asked with the caller's token.
// A real kubelet's /pods lists the pods of its pod manager with the status
// its status manager reports to the API server: the same pod objects.
type standIn struct {
	addr, caFile string
	requests     atomic.Int64
}

func newStandIn(t *testing.T, cluster *harness.Cluster) *standIn {
	t.Helper()
	s := new(standIn)
	tlsConfig, err := rest.TLSConfigFor(cluster.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	api := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pods" {
			http.NotFound(w, r)
			return
		}
		s.requests.Add(1)
		u := "https://" + cluster.Host() + "/api/v1/pods?fieldSelector=" + url.QueryEscape("spec.nodeName="+node)
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := api.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	s.addr = srv.Listener.Addr().String()
	s.caFile = filepath.Join(t.TempDir(), "kubelet-ca.crt")
	if err := os.WriteFile(s.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func port(t *testing.T, hostport string) int {
	t.Helper()
	var p int
	if _, err := fmt.Sscanf(hostport[strings.LastIndex(hostport, ":")+1:], "%d", &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func cpu(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := childproc.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
