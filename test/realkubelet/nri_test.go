package realkubelet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/test/realkubelet"
)

// TestNRIOverKubelet runs a real kubelet on fakecri serving NRI's runtime
// side (--nri-socket: the adaptation package, called where containerd's
// CRI plugin calls it), and podsapi-server on the kubelet's Pods API with
// --nri-socket: podsapi connects to the runtime's NRI, the runtime tells
// it of a static pod's sandbox and containers, FindPods finds each
// container by the ID the kubelet reports, and the delay histogram has
// counted the kubelet's report of containers the runtime had told of,
// which shows the runtime's facts and the kubelet's report name the same
// containers. make bench-nri measures the window this closes.
func TestNRIOverKubelet(t *testing.T) {
	// A short directory: the NRI socket lives in it.
	dir, err := os.MkdirTemp("", "nri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	nriSocket := filepath.Join(dir, "nri.sock")
	k := start(t, realkubelet.Options{FakeCRIArgs: []string{"--nri-socket", nriSocket}})
	server := buildServer(t)
	socket, metrics := filepath.Join(k.Dir, "podsapi-nri.sock"), freeAddress(t)
	runServer(t, server, "--source", "kubelet-grpc", "--source-socket", k.Socket, "--socket", socket,
		"--metrics-address", metrics, "--nri-socket", nriSocket, "--log-level", "warn")
	c, err := client.New(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// The pod is written once podsapi has connected to the runtime's
	// NRI: its sandbox and containers come as events, not in the
	// synchronisation.
	connected, cancelConnected := context.WithTimeout(t.Context(), time.Minute)
	defer cancelConnected()
	for m, _ := scrapeNRI("http://" + metrics + "/metrics"); m["podsapi_nri_connected"] != 1; m, _ = scrapeNRI("http://" + metrics + "/metrics") {
		select {
		case <-connected.Done():
			t.Fatal("podsapi did not connect to fakecri's NRI socket within a minute")
		case <-time.After(100 * time.Millisecond):
		}
	}

	// Two containers and no init container: fakecri's containers never
	// exit, so an init container would hold the others.
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nri-smoke"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Image: "registry.k8s.io/pause:3.10"},
			{Name: "sidecar", Image: "registry.k8s.io/pause:3.10"},
		}},
	}
	writeManifest(t, k, p)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var ids []string
	for last := errors.New("not listed"); ; {
		got, err := containerIDs(ctx, c, k.StaticName(p.Name), len(p.Spec.Containers))
		if err == nil {
			ids = got
			break
		}
		if ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the static pod's containers: %v", last)
		case <-tick.C:
		}
	}
	for _, id := range ids {
		ms, _, err := c.FindPods(ctx, client.ByContainerID(id))
		if err != nil || len(ms) != 1 || ms[0].Pod.Name != k.StaticName(p.Name) || ms[0].Source != podsv1alpha1.MatchSource_MATCH_SOURCE_POD_SOURCE {
			t.Errorf("FindPods(%s) = %v, %v; want the static pod from the pod source", id, ms, err)
		}
	}
	m, err := scrapeNRI("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name    string
		atLeast float64
	}{
		{"podsapi_nri_connected", 1},
		{`podsapi_nri_events_total{event="synchronize"}`, 1},
		{`podsapi_nri_events_total{event="run_pod_sandbox"}`, 1},
		{`podsapi_nri_events_total{event="post_create_container"}`, float64(len(ids))},
		{`podsapi_nri_events_total{event="post_start_container"}`, float64(len(ids))},
		{"podsapi_nri_report_delay_seconds_count", 1},
	} {
		if got, ok := m[w.name]; !ok || got < w.atLeast {
			t.Errorf("%s = %v (exported: %v), want at least %v", w.name, got, ok, w.atLeast)
		}
	}
	for _, name := range []string{`podsapi_nri_facts_refused_total{reason="invalid"}`, `podsapi_nri_facts_refused_total{reason="bound"}`} {
		if got := m[name]; got != 0 {
			t.Errorf("%s = %v, want 0", name, got)
		}
	}
}

// containerIDs returns the IDs of the n containers of the pod name, once
// the pod source reports all of them.
func containerIDs(ctx context.Context, c *client.Client, name string, n int) ([]string, error) {
	pods, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.Name != name {
			continue
		}
		var ids []string
		for _, cs := range p.Status.ContainerStatuses {
			if cs.ContainerID != "" {
				ids = append(ids, cs.ContainerID)
			}
		}
		if len(ids) < n {
			return nil, fmt.Errorf("%d of %d container IDs reported", len(ids), n)
		}
		return ids, nil
	}
	return nil, fmt.Errorf("pod %s not listed", name)
}

// scrapeNRI returns the samples of podsapi_nri_* by name with labels.
func scrapeNRI(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "podsapi_nri_") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}
