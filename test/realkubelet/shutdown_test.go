package realkubelet_test

import (
	"errors"
	"testing"
	"time"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/test/realkubelet"
)

// TestShutdownIsServerGone watches a real kubelet with the client and stops
// the kubelet (SIGTERM): the kubelet ends the watch with RESOURCE_EXHAUSTED
// "watch client channel closed", as when it drops a slow watcher, or exits
// before it does (the stream breaks), and either way the client reports
// that the server went away (ErrServerGone), not that it fell behind.
func TestShutdownIsServerGone(t *testing.T) {
	k := start(t, realkubelet.Options{})
	c, err := client.New(k.Socket, client.WithWire(client.WireKubelet))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var w *client.Watcher
	for {
		if w, err = c.Watch(t.Context()); err == nil {
			break
		}
		if !errors.Is(err, client.ErrNotSynced) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // a retry, not a synchronisation
	}
	defer w.Close()
	for {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("before the sync marker: %v", err)
		}
		if ev.Type == client.Synced {
			break
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- k.StopKubelet() }()
	_, err = w.Next()
	if serr := <-stopped; serr != nil {
		t.Errorf("stop the kubelet: %v", serr)
	}
	t.Logf("the watch ended with %v", err)
	if !errors.Is(err, client.ErrServerGone) || errors.Is(err, client.ErrFellBehind) {
		t.Fatalf("the watch ended with %v, want an error wrapping ErrServerGone only", err)
	}
}
