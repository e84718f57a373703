package service_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// findMatches returns "namespace/name[/container][ (deleted)][ (host)]"
// for each match of a FindPods response in JSON.
func findMatches(t *testing.T, out string) string {
	t.Helper()
	var resp struct {
		Matches []struct {
			Pod struct {
				Metadata struct{ Namespace, Name, UID string }
				Status   map[string]any
			}
			ContainerName string
			Deleted       bool
			HostNetwork   bool
		}
		Revision string
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if resp.Revision == "" {
		t.Errorf("no revision in %s", out)
	}
	var s []string
	for _, m := range resp.Matches {
		v := m.Pod.Metadata.Namespace + "/" + m.Pod.Metadata.Name
		if m.Pod.Metadata.UID == "" {
			t.Errorf("a match without its UID: %s", out)
		}
		if m.ContainerName != "" {
			v += "/" + m.ContainerName
		}
		if m.Deleted {
			v += " (deleted)"
		}
		if m.HostNetwork {
			v += " (host)"
		}
		s = append(s, v)
	}
	return strings.Join(s, ", ")
}

const (
	// callerRequest is the FindPods request of the key caller.
	callerRequest = `{"caller": true}`
	findUID       = "8dbc5a3c-7f4e-4b39-9e7c-2a1f0c6d9e11"
	findCID       = "4f1e9b0c2d3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"
)

// findPods returns the pods of the FindPods tests: web (UID findUID, its
// app container findCID), a deleted one, two of the host network.
func findPods() (web, gone *corev1.Pod, host []*corev1.Pod) {
	web = podstest.Pod("default", "web", 1)
	web.UID = findUID
	web.Status.ContainerStatuses[0].ContainerID = "containerd://" + findCID
	gone = podstest.Pod("default", "gone", 9)
	for _, name := range []string{"kube-proxy", "node-exporter"} {
		p := podstest.Pod("kube-system", name, 0)
		p.Spec.HostNetwork = true
		p.Status.PodIP, p.Status.PodIPs = p.Status.HostIP, []corev1.PodIP{{IP: p.Status.HostIP}}
		host = append(host, p)
	}
	return web, gone, host
}

// hostProc writes a fake --host-proc: processes 100 (the app container of
// web, systemd driver, cgroup v2), 101 (the same, cgroupfs, cgroup v1), 102
// (web's sandbox, relative to another cgroup namespace), 103 (of the host),
// 104 (systemd, cgroup v1, CRI-O), 105 (cgroupfs, cgroup v2), and the test
// process itself, in web's app container.
func hostProc(t *testing.T) string {
	t.Helper()
	usc := strings.ReplaceAll(findUID, "-", "_")
	root, err := podstest.WriteHostProc(t.TempDir(), map[int]string{
		100:         podstest.SystemdCgroup(findUID, findCID) + "\n",
		101:         "11:memory:/kubepods/burstable/pod" + findUID + "/" + findCID + "\n1:name=systemd:/kubepods/burstable/pod" + findUID + "/" + findCID + "\n",
		102:         "0::/../../kubepods-burstable-pod" + usc + ".slice/cri-containerd-" + strings.Repeat("5a", 32) + ".scope\n",
		103:         "0::/system.slice/kubelet.service\n",
		104:         "4:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + usc + ".slice/crio-" + findCID + ".scope\n",
		105:         "0::/kubepods/burstable/pod" + findUID + "/" + findCID + "\n",
		os.Getpid(): "0::/kubepods/burstable/pod" + findUID + "/" + findCID + "\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// findCase is a FindPods call of the grpcurl tests: its JSON request, and
// the matches it returns (as findMatches prints them) or its error's code
// and ErrorInfo reason.
type findCase struct {
	name, request string
	want          string
	code          connect.Code
	reason        string
}

// findCases returns the FindPods calls of the grpcurl tests over the
// pods of findPods (web, and gone deleted) and the processes of hostProc.
// The request callerRequest finds the calling process, which each test
// puts in web's app container in its fake --host-proc.
func findCases(web, gone *corev1.Pod) []findCase {
	usc := strings.ReplaceAll(findUID, "-", "_")
	return []findCase{
		{"a full container ID", `{"containerId": "containerd://` + findCID + `"}`, "default/web/app", 0, ""},
		{"a container ID without its runtime", `{"containerId": "` + findCID + `"}`, "default/web/app", 0, ""},
		{"a prefix of a container ID", `{"containerId": "` + findCID[:20] + `"}`, "default/web/app", 0, ""},
		{"a 12-digit prefix", `{"containerId": "` + findCID[:12] + `"}`, "default/web/app", 0, ""},
		{"an IP", `{"ip": "` + web.Status.PodIP + `"}`, "default/web", 0, ""},
		{"the node's IP", `{"ip": "` + web.Status.HostIP + `"}`, "kube-system/kube-proxy (host), kube-system/node-exporter (host)", 0, ""},
		{"a PID, systemd, cgroup v2", `{"pid": 100}`, "default/web/app", 0, ""},
		{"a PID, cgroupfs, cgroup v1", `{"pid": 101}`, "default/web/app", 0, ""},
		{"a PID of the sandbox, namespace-relative", `{"pid": 102}`, "default/web", 0, ""},
		{"a PID, systemd, cgroup v1", `{"pid": 104}`, "default/web/app", 0, ""},
		{"a PID, cgroupfs, cgroup v2", `{"pid": 105}`, "default/web/app", 0, ""},
		{"a cgroup line", `{"cgroupPath": "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod` + usc + `.slice/cri-containerd-` + findCID + `.scope"}`, "default/web/app", 0, ""},
		{"a cgroup path", `{"cgroupPath": "/kubepods/burstable/pod` + findUID + `/` + findCID + `"}`, "default/web/app", 0, ""},
		{"the caller", callerRequest, "default/web/app", 0, ""},
		{"a deleted pod with include_deleted", `{"ip": "` + gone.Status.PodIP + `", "includeDeleted": true}`, "default/gone (deleted)", 0, ""},
		{"a deleted pod without", `{"ip": "` + gone.Status.PodIP + `"}`, "", connect.CodeNotFound, errinfo.NoPodMatches},
		{"a deleted pod by container with include_deleted", `{"containerId": "` + store.TrimRuntime(gone.Status.ContainerStatuses[1].ContainerID) + `", "includeDeleted": true}`, "default/gone/log-shipper (deleted)", 0, ""},
		{"no key", `{}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"only include_deleted", `{"includeDeleted": true}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"caller false", `{"caller": false}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"an empty container ID", `{"containerId": "containerd://"}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"a container ID with a space", `{"containerId": "ab cd"}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"an unknown container ID", `{"containerId": "` + strings.Repeat("f", 64) + `"}`, "", connect.CodeNotFound, errinfo.NoPodMatches},
		{"a prefix under 12 digits", `{"containerId": "` + findCID[:11] + `"}`, "", connect.CodeNotFound, errinfo.NoPodMatches},
		{"an ambiguous prefix", `{"containerId": "000000000000"}`, "", connect.CodeInvalidArgument, errinfo.AmbiguousContainerID},
		{"not an IP", `{"ip": "10.0.0"}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"an unknown IP", `{"ip": "10.0.0.1"}`, "", connect.CodeNotFound, errinfo.NoPodMatches},
		{"a negative PID", `{"pid": -1}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"no such process", `{"pid": 999999}`, "", connect.CodeNotFound, errinfo.ProcessNotFound},
		{"a process outside any pod", `{"pid": 103}`, "", connect.CodeNotFound, errinfo.NoPodMatches},
		{"not a cgroup", `{"cgroupPath": "hello"}`, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"a cgroup of no pod", `{"cgroupPath": "0::/system.slice/containerd.service"}`, "", connect.CodeNotFound, errinfo.NoPodMatches},
		{"a cgroup of a pod not on the node", `{"cgroupPath": "/kubepods/pod0b0b0b0b-0000-4000-8000-000000000000"}`, "", connect.CodeNotFound, errinfo.NoPodMatches},
	}
}

// TestFindPodsGrpcurl finds pods by each key with grpcurl's means alone:
// reflection, JSON and the socket.
func TestFindPodsGrpcurl(t *testing.T) {
	web, gone, host := findPods()
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{HostProc: hostProc(t), Registry: reg, Limits: server.LimitsConfig{QPS: -1}}, false, append([]*corev1.Pod{web, gone}, host...)...)
	f.Store.Delete(gone.UID)
	g := podstest.NewGrpcurl(t, f.Socket)
	for _, tc := range findCases(web, gone) {
		t.Run(tc.name, func(t *testing.T) {
			out, err := g.Call(t, "FindPods", tc.request)
			if tc.code != 0 {
				if podstest.ErrorCode(err) != tc.code || podstest.ErrorReason(err) != tc.reason {
					t.Fatalf("FindPods(%s) = %v (%s); want %v, reason %s", tc.request, err, podstest.ErrorReason(err), tc.code, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("FindPods(%s): %v", tc.request, err)
			}
			if got := findMatches(t, out); got != tc.want {
				t.Errorf("FindPods(%s) = %s, want %s", tc.request, got, tc.want)
			}
		})
	}

	// A field mask trims the pods and keeps their identity.
	out, err := g.Call(t, "FindPods", `{"pid": 100}`, "x-kubernetes-fieldmask: status.phase")
	if err != nil {
		t.Fatal(err)
	}
	if got := findMatches(t, out); got != "default/web/app" || strings.Contains(out, "containerStatuses") || !strings.Contains(strings.Join(strings.Fields(out), ""), `"phase":"Running"`) {
		t.Errorf("FindPods with a mask = %s", out)
	}
	// FindPods is counted in the seed's metrics, with their labels.
	if n := podstest.MetricValue(t, reg, "kubelet_pod_requests_total", map[string]string{"server_api_version": "v1alpha1", "status_code": "NotFound"}); n < 5 {
		t.Errorf("kubelet_pod_requests_total{status_code=NotFound} = %v, want the NOT_FOUND calls counted", n)
	}
	// The deleted pod kept findable is in the gauges.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gauges := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			gauges[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	if gauges["podsapi_deleted_pods"] != 1 || gauges["podsapi_deleted_pods_bytes"] <= 512 {
		t.Errorf("podsapi_deleted_pods = %v, podsapi_deleted_pods_bytes = %v; want 1 and its bytes", gauges["podsapi_deleted_pods"], gauges["podsapi_deleted_pods_bytes"])
	}
}

// TestFindPodsCallerRealProc finds the caller through the real /proc: the
// test process is in no pod of the store (whether or not the test runs in
// a pod), so FindPods reads its cgroups and answers NOT_FOUND, never an
// internal error.
func TestFindPodsCallerRealProc(t *testing.T) {
	web, _, _ := findPods()
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, web)
	_, err := podstest.NewGrpcurl(t, f.Socket).Call(t, "FindPods", callerRequest)
	if podstest.ErrorCode(err) != connect.CodeNotFound || podstest.ErrorReason(err) != errinfo.NoPodMatches {
		t.Fatalf("FindPods of the caller = %v (%s), want NOT_FOUND, NO_POD_MATCHES", err, podstest.ErrorReason(err))
	}
}
