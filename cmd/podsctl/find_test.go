package main

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestFind runs podsctl find with each key against a server whose
// --host-proc is a fake tree holding process 4242 and podsctl itself.
func TestFind(t *testing.T) {
	const cid = "3f1e9b0c2d3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"
	web := podstest.Pod("default", "web-1", 1)
	web.Status.ContainerStatuses[0].ContainerID = "containerd://" + cid
	gone := podstest.Pod("default", "web-0", 9)
	proxy := podstest.Pod("kube-system", "kube-proxy", 0)
	proxy.Spec.HostNetwork = true
	proxy.Status.PodIPs = []corev1.PodIP{{IP: proxy.Status.HostIP}}
	cgroup := podstest.SystemdCgroup(web.UID, cid)
	proc, err := podstest.WriteHostProc(t.TempDir(), map[int]string{4242: cgroup + "\n", os.Getpid(): cgroup + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	st, sock := startServer(t, server.Config{HostProc: proc, Limits: server.LimitsConfig{QPS: -1}}, false, web, gone, proxy)
	st.Delete(gone.UID)

	table := "NAMESPACE   NAME    CONTAINER   READY   STATUS    RESTARTS   AGE\n" +
		"default     web-1   app         2/2     Running   1          3d4h\n"
	for _, tc := range []struct {
		name   string
		args   []string
		stdout string
		code   int
		stderr string
	}{
		{"--pid", []string{"--pid", "4242"}, table, 0, ""},
		{"--container", []string{"--container", "containerd://" + cid}, table, 0, ""},
		{"--container, 12 digits", []string{"--container", cid[:12]}, table, 0, ""},
		{"--ip", []string{"--ip", web.Status.PodIP, "-o", "name"}, "pod/web-1\n", 0, ""},
		{"--cgroup", []string{"--cgroup", cgroup}, table, 0, ""},
		{"--self", []string{"--self"}, table, 0, ""},
		{"--deleted", []string{"--ip", gone.Status.PodIP, "--deleted"},
			"NAMESPACE   NAME    CONTAINER   READY   STATUS              RESTARTS   AGE\n" +
				"default     web-0   <none>      2/2     Running (deleted)   1          3d4h\n", 0, ""},
		{"a deleted pod without --deleted", []string{"--ip", gone.Status.PodIP}, "", 1, "hint: find --deleted also finds"},
		{"the node's IP", []string{"--ip", proxy.Status.HostIP, "-o", "json"}, "", 0, ""},
		{"--wait, a key known already", []string{"--container", cid[:12], "--wait", "1h"}, table, 0, ""},
		{"--wait, a key never known", []string{"--ip", "10.99.0.1", "--wait", "50ms"}, "", 1, "NOT_FOUND: ip: no pod with this IP"},
		{"--wait, not a duration", []string{"--ip", "10.99.0.1", "--wait", "soon"}, "", 2, "invalid argument"},
		{"no key", nil, "", 2, "find takes one of"},
		{"two keys", []string{"--pid", "1", "--self"}, "", 2, "find takes one of"},
		{"a bad IP", []string{"--ip", "10.0"}, "", 2, "invalid --ip"},
		{"no such process", []string{"--pid", "4243"}, "", 1, "no process 4243"},
		{"an ambiguous prefix", []string{"--container", "000000000000"}, "", 1, "ambiguous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, append([]string{"--socket", sock, "find"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, stderr, tc.code, tc.stderr)
			}
			if tc.name == "the node's IP" {
				if !strings.Contains(stdout, `"podsapi.io/find-host-network": "true"`) || !strings.Contains(stdout, `"kind": "List"`) {
					t.Errorf("stdout %s: want a List of the pods of the host network, annotated", stdout)
				}
				return
			}
			if stdout != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tc.stdout)
			}
		})
	}
}
