package source_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/source/manifest"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// waitSource is a pod source of TestFindWaitsForEachSource: run starts it
// feeding sink, without the pod; add makes the pod known to it.
type waitSource struct {
	name string
	// run starts the source on sink, and returns the key that finds pod
	// (of which the source knows nothing yet) and add, which makes the
	// source learn of pod.
	run func(t *testing.T, sink source.Sink, pod *corev1.Pod) (key client.FindKey, add func())
}

// TestFindWaitsForEachSource starts each pod source feeding a real server
// (the apiserver source: a real kube-apiserver, with PODSAPI_KUBE_BIN),
// asks it through the real client for a pod the source does not know yet,
// waiting up to an hour, and has the source learn of the pod only once the
// call waits: the call answers with the pod, long before its bound.
func TestFindWaitsForEachSource(t *testing.T) {
	for _, src := range []waitSource{
		{"manifest", runManifest},
		{"kubelet-http", runKubeletHTTP},
		{"kubelet-grpc", runKubeletGRPC},
		{"apiserver", runAPIServer},
	} {
		t.Run(src.name, func(t *testing.T) {
			st := store.New()
			waited := podstest.NewWaited(st)
			pod := podstest.Pod("default", "late", 7)
			key, add := src.run(t, st, pod)
			srv := podstest.Start(t, waited, server.Config{Limits: server.LimitsConfig{QPS: -1, MaxFindWait: time.Hour}})
			c, err := client.New(srv.SocketPath())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })

			type result struct {
				ms  []client.Match
				err error
			}
			done := make(chan result, 1)
			go func() {
				ms, _, err := c.FindPods(t.Context(), key, client.WithWait(time.Hour))
				done <- result{ms, err}
			}()
			waited.WaitFor(t, 1)
			select {
			case r := <-done:
				t.Fatalf("FindPods answered %v, %v before the source knew the pod", r.ms, r.err)
			default:
			}
			add()
			near, stop := podstest.NearDeadline(t)
			defer stop()
			select {
			case r := <-done:
				if r.err != nil || len(r.ms) != 1 || r.ms[0].Pod.Name != "late" {
					t.Fatalf("FindPods = %v, %v; want default/late", r.ms, r.err)
				}
			case <-near:
				t.Fatal("FindPods did not answer once the source knew the pod")
			}
		})
	}
}

// shortDir returns a directory of a path short enough for UNIX sockets,
// removed at the end of the test.
func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "fw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// runManifest runs the manifest source on an empty directory; the pod, a
// static pod, comes as a file, found by its pod's cgroup (its UID is the
// one the source derives).
func runManifest(t *testing.T, sink source.Sink, pod *corev1.Pod) (client.FindKey, func()) {
	dir := t.TempDir()
	sourcetest.Run(t, func(ctx context.Context) error {
		return manifest.New(dir, "node-1", manifest.WithResyncInterval(50*time.Millisecond)).Run(ctx, sink)
	})
	uid := manifest.DerivedUID(pod.Namespace, pod.Name, "node-1")
	return client.ByCgroup("0::/kubepods/pod" + string(uid)), func() {
		b, err := json.Marshal(&corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Spec: pod.Spec})
		if err != nil {
			t.Fatal(err)
		}
		// The UID comes from the source, as a static pod's.
		b = []byte(strings.Replace(string(b), `"uid":"`+string(pod.UID)+`",`, "", 1))
		tmp := filepath.Join(t.TempDir(), "late.json")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "late.json")); err != nil {
			t.Fatal(err)
		}
	}
}

// runKubeletHTTP runs the kubelet-http source, polling a fake /pods every
// 20 ms; the pod, found by its container's ID, comes in a later answer.
func runKubeletHTTP(t *testing.T, sink source.Sink, pod *corev1.Pod) (client.FindKey, func()) {
	var (
		mu   sync.Mutex
		pods = corev1.PodList{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		b, err := json.Marshal(&pods)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	pods.Kind, pods.APIVersion = "PodList", "v1"
	sourcetest.Run(t, func(ctx context.Context) error {
		return kubelethttp.New(kubelethttp.WithURL(srv.URL+"/pods"), kubelethttp.WithInterval(20*time.Millisecond)).Run(ctx, sink)
	})
	return client.ByContainerID(pod.Status.ContainerStatuses[0].ContainerID), func() {
		mu.Lock()
		defer mu.Unlock()
		pods.Items = append(pods.Items, *pod)
	}
}

// runKubeletGRPC runs the kubelet-grpc source on a fake kubelet's Pods
// API; the pod, found by its IP, comes in a watch event.
func runKubeletGRPC(t *testing.T, sink source.Sink, pod *corev1.Pod) (client.FindKey, func()) {
	k := sourcetest.NewFakeKubelet(t, filepath.Join(shortDir(t), "k.sock"))
	sourcetest.Run(t, func(ctx context.Context) error {
		return kubeletgrpc.New(kubeletgrpc.WithSocket(k.Path())).Run(ctx, sink)
	})
	return client.ByIP(netip.MustParseAddr(pod.Status.PodIP)), func() { k.Set(pod) }
}

// runAPIServer runs the apiserver source against a real kube-apiserver
// (skipped without PODSAPI_KUBE_BIN); the pod, found by its IP, is created
// bound to the node, and its IP set in its status.
func runAPIServer(t *testing.T, sink source.Sink, pod *corev1.Pod) (client.FindKey, func()) {
	cp := kubetest.Start(t)
	const node = "node-1"
	if _, err := cp.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	src := apiserver.New(node, apiserver.WithKubeconfig(cp.Kubeconfig(t, kubetest.AdminUser, cp.Host())), apiserver.WithBackoff(10*time.Millisecond, 200*time.Millisecond))
	sourcetest.Run(t, func(ctx context.Context) error { return src.Run(ctx, sink) })
	ip := pod.Status.PodIP
	return client.ByIP(netip.MustParseAddr(ip)), func() {
		pods := cp.Admin.CoreV1().Pods(pod.Namespace)
		created, err := pods.Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "pause"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase, created.Status.PodIP, created.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		if _, err := pods.UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
