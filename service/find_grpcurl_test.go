package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// grpcurlStatusOffset is what grpcurl adds to a call's gRPC code to make
// its exit status (statusCodeOffset in cmd/grpcurl).
const grpcurlStatusOffset = 64

// grpcurlRun is one run of the real grpcurl: what it printed and its exit
// status.
type grpcurlRun struct {
	stdout, stderr string
	exit           int
}

// runGrpcurl calls kubelet.pods.v1alpha1.Pods/FindPods on the socket with the
// real grpcurl binary bin, the JSON request and the headers ("name: value").
// When started is not nil, grpcurl reads its request from stdin (-d @), and
// started is called with grpcurl's PID before the request is written: grpcurl
// dials and learns the method by reflection first, but calls FindPods only
// once it has read the request, so whatever started does is done before the
// server handles the call.
func runGrpcurl(t *testing.T, bin, socket, request string, started func(pid int), headers ...string) grpcurlRun {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), podstest.GrpcurlTimeout)
	defer cancel()
	data := request
	if started != nil {
		data = "@"
	}
	args := []string{"-plaintext", "-unix", "-d", data}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	args = append(args, socket, "kubelet.pods.v1alpha1.Pods/FindPods")
	cmd := exec.CommandContext(c, bin, args...)
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var stdin io.WriteCloser
	if started != nil {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("grpcurl: %v", err)
	}
	if started != nil {
		started(cmd.Process.Pid)
		_, err := io.WriteString(stdin, request)
		if cerr := stdin.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Errorf("writing the request to grpcurl: %v", err)
		}
	}
	err := cmd.Wait()
	if c.Err() != nil {
		t.Fatalf("grpcurl %s did not end within %v: %s", strings.Join(args, " "), podstest.GrpcurlTimeout, stderr.String())
	}
	run := grpcurlRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		run.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("grpcurl: %v", err)
	}
	return run
}

// check compares a run of grpcurl with a case of findCases: the matches of
// its JSON output, or its exit status, the code it printed and the
// ErrorInfo reason among the details it printed.
func (r grpcurlRun) check(t *testing.T, tc findCase) {
	t.Helper()
	if tc.code != 0 {
		code := codes.Code(tc.code)
		if r.exit != grpcurlStatusOffset+int(code) || !strings.Contains(r.stderr, "Code: "+code.String()+"\n") || !strings.Contains(r.stderr, fmt.Sprintf(`"reason": %q`, tc.reason)) {
			t.Fatalf("grpcurl FindPods %s: exit status %d, stderr:\n%s\nwant exit status %d, Code: %s and reason %q", tc.request, r.exit, r.stderr, grpcurlStatusOffset+int(code), code, tc.reason)
		}
		return
	}
	if r.exit != 0 {
		t.Fatalf("grpcurl FindPods %s: exit status %d, stderr:\n%s", tc.request, r.exit, r.stderr)
	}
	if got := findMatches(t, r.stdout); got != tc.want {
		t.Errorf("grpcurl FindPods %s = %s, want %s", tc.request, got, tc.want)
	}
}

// TestFindPodsRealGrpcurl finds pods by each key with the real grpcurl over
// the socket alone (issue 22): the cases of TestFindPodsGrpcurl, run by the
// grpcurl binary in PODSAPI_GRPCURL. The caller is grpcurl's own process,
// put in web's app container of the fake --host-proc once its PID is known.
func TestFindPodsRealGrpcurl(t *testing.T) {
	bin := podstest.RealGrpcurl(t)
	web, gone, host := findPods()
	proc := hostProc(t)
	f := start(t, server.Config{HostProc: proc, Registry: prometheus.NewRegistry(), Limits: server.LimitsConfig{QPS: -1}}, false, append([]*corev1.Pod{web, gone}, host...)...)
	f.Store.Delete(gone.UID)
	inWeb := func(pid int) {
		if _, err := podstest.WriteHostProc(proc, map[int]string{pid: podstest.SystemdCgroup(findUID, findCID) + "\n"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range findCases(web, gone) {
		t.Run(tc.name, func(t *testing.T) {
			var started func(int)
			if tc.request == callerRequest {
				started = inWeb
			}
			runGrpcurl(t, bin, f.Socket, tc.request, started).check(t, tc)
		})
	}

	t.Run("a field mask", func(t *testing.T) {
		r := runGrpcurl(t, bin, f.Socket, `{"pid": 100}`, nil, "x-kubernetes-fieldmask: status.phase")
		r.check(t, findCase{request: `{"pid": 100}`, want: "default/web/app"})
		if strings.Contains(r.stdout, "containerStatuses") || !strings.Contains(strings.Join(strings.Fields(r.stdout), ""), `"phase":"Running"`) {
			t.Errorf("grpcurl FindPods with a mask = %s, want status.phase alone besides the identity", r.stdout)
		}
	})
}

// TestFindPodsRealGrpcurlCallerRealProc finds the real grpcurl's process
// through the real /proc: it is in no pod of the store (whether or not the
// test runs in a pod), so FindPods answers NOT_FOUND, NO_POD_MATCHES, the
// documented answer for a process outside any pod.
func TestFindPodsRealGrpcurlCallerRealProc(t *testing.T) {
	bin := podstest.RealGrpcurl(t)
	web, _, _ := findPods()
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, web)
	runGrpcurl(t, bin, f.Socket, callerRequest, nil).check(t, findCase{request: callerRequest, code: connect.CodeNotFound, reason: errinfo.NoPodMatches})
}
