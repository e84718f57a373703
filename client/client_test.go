package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestListDecodesStoredPods checks that the pods a client lists are the pods
// the server stored, field for field.
func TestListDecodesStoredPods(t *testing.T) {
	want := samplePods()
	c := startClient(t, newStore(false, want...), server.Config{})
	got, err := c.List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("List returned %d pods, want %d", len(got), len(want))
	}
	for i := range want {
		if d := podDiff(got[i], want[i]); d != "" {
			t.Error(d)
		}
	}
}

func TestListEmpty(t *testing.T) {
	c := startClient(t, newStore(false), server.Config{})
	got, err := c.List(testCtx(t))
	if err != nil || len(got) != 0 {
		t.Fatalf("List = %v, %v; want no pods", got, err)
	}
}

func TestGet(t *testing.T) {
	want := samplePods()
	c := startClient(t, newStore(false, want...), server.Config{})
	got, err := c.Get(testCtx(t), want[1].UID)
	if err != nil {
		t.Fatal(err)
	}
	if d := podDiff(got, want[1]); d != "" {
		t.Fatal(d)
	}
}

// TestFieldMask checks that WithFields reaches the server on every call.
func TestFieldMask(t *testing.T) {
	pods := samplePods()
	c := startClient(t, newStore(false, pods...), server.Config{})
	ctx := testCtx(t)
	mask := client.WithFields("metadata.name", "status.phase", "status.podIPs")
	check := func(name string, got, p *corev1.Pod) {
		t.Helper()
		w := &corev1.Pod{}
		// Masked pods always carry namespace, name and uid, as watch
		// events do.
		w.Name, w.Namespace, w.UID = p.Name, p.Namespace, p.UID
		w.Status.Phase = p.Status.Phase
		w.Status.PodIPs = p.Status.PodIPs
		if d := podDiff(got, w); d != "" {
			t.Errorf("%s: masked %s", name, d)
		}
	}

	list, err := c.List(ctx, mask)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range list {
		check("List", p, pods[i])
	}
	got, err := c.Get(ctx, pods[0].UID, mask)
	if err != nil {
		t.Fatal(err)
	}
	check("Get", got, pods[0])
	w, err := c.Watch(ctx, mask)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range pods {
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		check("Watch", ev.Pod, pods[i])
	}
}

// TestErrors checks the codes and sentinel errors of failed calls.
func TestErrors(t *testing.T) {
	pods := samplePods()
	unsynced := startClient(t, newStore(true, pods...), server.Config{})
	synced := startClient(t, newStore(false, pods...), server.Config{})
	limited := startClient(t, newStore(false, pods...), server.Config{Limits: server.LimitsConfig{QPS: 0.001, Burst: 1, RateLimitDelay: -1}})
	oneWatch := startClient(t, newStore(false, pods...), server.Config{Limits: server.LimitsConfig{MaxWatchers: 1}})
	ctx := testCtx(t)
	if _, err := limited.List(ctx); err != nil { // uses the only token
		t.Fatal(err)
	}
	w, err := oneWatch.Watch(ctx) // takes the only watch
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Next(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		call     func() error
		code     connect.Code
		sentinel error
	}{
		{"ListNotSynced", func() error { _, err := unsynced.List(ctx); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"GetNotSynced", func() error { _, err := unsynced.Get(ctx, pods[0].UID); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"WatchNotSynced", func() error { _, err := unsynced.Watch(ctx); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"GetUnknownUID", func() error { _, err := synced.Get(ctx, "no-such-uid"); return err }, connect.CodeNotFound, client.ErrNotFound},
		{"GetEmptyUID", func() error { _, err := synced.Get(ctx, ""); return err }, connect.CodeInvalidArgument, nil},
		{"BadFieldMask", func() error { _, err := synced.List(ctx, client.WithFields("status.nope")); return err }, connect.CodeInvalidArgument, nil},
		{"ListRateLimited", func() error { _, err := limited.List(ctx); return err }, connect.CodeResourceExhausted, client.ErrRateLimited},
		{"GetRateLimited", func() error { _, err := limited.Get(ctx, pods[0].UID); return err }, connect.CodeResourceExhausted, client.ErrRateLimited},
		{"TooManyWatches", func() error {
			w, err := oneWatch.Watch(ctx)
			if err == nil {
				defer w.Close()
				_, err = w.Next()
			}
			return err
		}, connect.CodeResourceExhausted, client.ErrTooManyWatches},
		{"ClientReadLimit", func() error {
			// RESOURCE_EXHAUSTED raised by the client itself: not the
			// server's rate limit.
			small, err := client.New(synced.Socket(), client.WithReadMaxBytes(16))
			if err != nil {
				t.Fatal(err)
			}
			defer small.Close()
			_, err = small.List(ctx)
			return err
		}, connect.CodeResourceExhausted, nil},
		{"ClientCancelled", func() error {
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			_, err := synced.List(cancelled)
			return err
		}, connect.CodeCanceled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if got := connect.CodeOf(err); got != tt.code {
				t.Fatalf("error %v has code %v, want %v", err, got, tt.code)
			}
			for _, s := range []error{client.ErrNotSynced, client.ErrNotFound, client.ErrRateLimited, client.ErrFellBehind, client.ErrTooManyWatches, client.ErrPermissionDenied} {
				if errors.Is(err, s) != (s == tt.sentinel) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, !(s == tt.sentinel))
				}
			}
		})
	}
}

// TestMissingSocket checks that calls to a socket nobody serves fail with
// UNAVAILABLE and the dial error.
func TestMissingSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "podsapi")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c := dial(t, filepath.Join(dir, "missing.sock"))
	_, err = c.List(testCtx(t))
	if connect.CodeOf(err) != connect.CodeUnavailable || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("List = %v, want UNAVAILABLE wrapping ENOENT", err)
	}
	if _, err := c.Watch(testCtx(t)); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Watch = %v, want UNAVAILABLE", err)
	}
}

// TestNewSocket checks the socket forms New accepts.
func TestNewSocket(t *testing.T) {
	tests := []struct {
		name, socket, want string
		wantErr            bool
	}{
		{"Default", "", client.DefaultSocket, false},
		{"Path", "/run/pods.sock", "/run/pods.sock", false},
		{"UnixURL", "unix:///run/pods.sock", "/run/pods.sock", false},
		{"UnixOpaque", "unix:/run/pods.sock", "/run/pods.sock", false},
		{"TCP", "tcp://127.0.0.1:80", "", true},
		{"EmptyURL", "unix://", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(tt.socket)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New(%q) error = %v, want error %v", tt.socket, err, tt.wantErr)
			}
			if err == nil && c.Socket() != tt.want {
				t.Fatalf("New(%q).Socket() = %q, want %q", tt.socket, c.Socket(), tt.want)
			}
		})
	}
}

// TestLargeList lists 1000 whole pods, about 5.6 MB: more than grpc-go's
// default limit of 4 MiB, and more than a client with a 1 MiB limit takes.
func TestLargeList(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	var pods []*corev1.Pod
	for i := range 1000 {
		pods = append(pods, podstest.Pod("default", fmt.Sprintf("pod-%04d", i), i))
	}
	c := startClient(t, newStore(false, pods...), server.Config{})
	got, err := c.List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pods) {
		t.Fatalf("List returned %d pods, want %d", len(got), len(pods))
	}
	small, err := client.New(c.Socket(), client.WithReadMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	_, err = small.List(testCtx(t))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || errors.Is(err, client.ErrRateLimited) {
		t.Fatalf("List over the read limit = %v, want RESOURCE_EXHAUSTED that is not ErrRateLimited", err)
	}
}
