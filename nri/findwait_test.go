package nri_test

import (
	"errors"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestFindWaitsForTheRuntime asks, through the real client, for a
// container the runtime has not created yet, waiting up to an hour: once
// the call waits, NRI's runtime side runs the sandbox and creates the
// container, and the call answers with what the runtime told, long before
// its bound, with no pod source involved.
func TestFindWaitsForTheRuntime(t *testing.T) {
	pod := newTestPod(3)
	app := containerID(3)
	socket := nriSocket(t)
	rt := startRuntime(t, socket, nil, nil)
	var waited *podstest.Waited
	p := startPodsapi(t, socket, t.TempDir(), func(st *store.Store) server.Pods {
		waited = podstest.NewWaited(st)
		return waited
	})
	rt.waitSynced(t)
	ctx := t.Context()

	type result struct {
		ms  []client.Match
		err error
	}
	done := make(chan result, 1)
	go func() {
		ms, _, err := p.client.FindPods(ctx, client.ByContainerID("containerd://"+app), client.WithWait(time.Hour))
		done <- result{ms, err}
	}()
	waited.WaitFor(t, 1)
	select {
	case r := <-done:
		t.Fatalf("FindPods answered %v, %v before the runtime created the container", r.ms, r.err)
	default:
	}
	if err := rt.RunPodSandbox(ctx, &adaptation.RunPodSandboxRequest{Pod: pod.sandbox()}); err != nil {
		t.Fatal(err)
	}
	if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: pod.sandbox(), Container: pod.container(app, "app", 0)}); err != nil {
		t.Fatal(err)
	}
	near, stop := podstest.NearDeadline(t)
	defer stop()
	select {
	case r := <-done:
		if r.err != nil || len(r.ms) != 1 || r.ms[0].Pod.Name != "web-3" || r.ms[0].Container != "app" {
			t.Fatalf("FindPods = %v, %v; want web-3/app", r.ms, r.err)
		}
	case <-near:
		t.Fatal("FindPods did not answer once the runtime created the container")
	}

	// A key the runtime never tells of ends NOT_FOUND at its bound.
	_, _, err := p.client.FindPods(ctx, client.ByContainerID(containerID(4)), client.WithWait(50*time.Millisecond))
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("FindPods of a container never created = %v, want ErrNotFound", err)
	}
}
