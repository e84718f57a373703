package realkubelet_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/test/realkubelet"
)

// SoakEnv is the duration of TestKubeletGRPCSoak (make soak-kubelet
// SOAK=1h); unset, the test is skipped.
const SoakEnv = "PODSAPI_SOAK"

// TestKubeletGRPCSoak runs two podsapi-servers on one real kubelet through
// --source=kubelet-grpc with the default keepalive for as long as
// PODSAPI_SOAK says: one with the default resync (a ListPods every 10 s on
// the connection) and one with none, whose connection carries nothing but
// pings between the checkpoints, the quiet spells in which a kubelet sent
// GOAWAY too_many_pings to the pings of earlier versions. Neither source
// may see its stream end or a connection fail in that time
// (podsapi_source_errors_total of reasons stream and connect stay 0), and at the end an image change still
// reaches both servers' watches over the first connection.
func TestKubeletGRPCSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(SoakEnv))
	if err != nil || d <= 0 {
		t.Skipf("%s is not a positive duration: make soak-kubelet SOAK=1h runs this test", SoakEnv)
	}
	k := start(t, realkubelet.Options{})
	base := benchPod(0)
	base.Spec.Containers = base.Spec.Containers[:1]
	writeManifest(t, k, base)
	for i := 1; i < 3; i++ {
		writeManifest(t, k, benchPod(i))
	}
	waitPods(t, wireClient(k.Socket), 3)
	server := buildServer(t)
	type srv struct {
		name, socket, metrics string
	}
	var servers []srv
	for _, s := range []struct {
		name   string
		resync string
	}{{"resync", "10s"}, {"quiet", "-1s"}} {
		v := srv{name: s.name, socket: filepath.Join(k.Dir, "soak-"+s.name+".sock"), metrics: freeAddress(t)}
		runServer(t, server, "--source", "kubelet-grpc", "--source-socket", k.Socket, "--socket", v.socket,
			"--metrics-address", v.metrics, "--source-resync-interval", s.resync, "--log-level", "info")
		waitPods(t, wireClient(v.socket), 3)
		servers = append(servers, v)
	}
	check := func(when string) {
		t.Helper()
		for _, s := range servers {
			m := scrapeSource(t, "http://"+s.metrics+"/metrics")
			t.Logf("%s, %s: stream errors %v, connect errors %v, resync errors %v",
				when, s.name, m["errors_stream"], m["errors_connect"], m["errors_resync"])
			if m["errors_stream"] != 0 || m["errors_connect"] != 0 {
				t.Fatalf("%s, %s: the kubelet-grpc connection failed: %v", when, s.name, m)
			}
		}
	}
	check("start")
	started := time.Now()
	// Checkpoints read only podsapi's metrics, over TCP: the kubelet
	// connections stay quiet in between.
	for step := 10 * time.Minute; time.Since(started) < d; {
		wait := min(step, d-time.Since(started))
		select {
		case <-time.After(wait):
		case <-t.Context().Done():
			t.Fatal("the test's deadline came first: run go test with -timeout above the soak")
		}
		check(fmt.Sprintf("after %s", time.Since(started).Round(time.Second)))
	}
	// An image change restarts the container: the kubelet reports it on its
	// watch, and both servers must pass it on.
	ctx := t.Context()
	var streams []*connect.ServerStreamForClient[v1alpha1.WatchPodsEvent]
	for _, s := range servers {
		st, err := wireClient(s.socket).WatchPods(ctx, connect.NewRequest(&v1alpha1.WatchPodsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		streams = append(streams, st)
	}
	p := base.DeepCopy()
	p.Spec.Containers[0].Image = "registry.k8s.io/pause:soak"
	writeManifest(t, k, p)
	for i, st := range streams {
		deadline := time.AfterFunc(2*time.Minute, func() { _ = st.Close() })
		found := false
		for !found && st.Receive() {
			var got corev1.Pod
			if got.Unmarshal(st.Msg().GetPod()) == nil && strings.HasPrefix(got.Name, base.Name) &&
				len(got.Spec.Containers) > 0 && got.Spec.Containers[0].Image == p.Spec.Containers[0].Image {
				found = true
			}
		}
		deadline.Stop()
		if !found {
			t.Fatalf("%s: the image change never reached the watch (%v)", servers[i].name, st.Err())
		}
	}
	check(fmt.Sprintf("the end, after %s", time.Since(started).Round(time.Second)))
}

// scrapeSource reads the kubelet-grpc source's metrics from a
// podsapi-server: errors_REASON for each reason.
func scrapeSource(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(name, `source="kubelet-grpc"`) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "podsapi_source_errors_total{"):
			_, reason, _ := strings.Cut(name, `reason="`)
			reason, _, _ = strings.Cut(reason, `"`)
			m["errors_"+reason] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["errors_stream"]; !ok {
		t.Fatalf("%s exports no podsapi_source_errors_total for kubelet-grpc", url)
	}
	return m
}
