package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestWatchResume checks that a watch resumed from a revision gets only the
// changes made since, then Synced, then live events; and that a revision of
// another server instance fails with ErrRevisionTooOld.
func TestWatchResume(t *testing.T) {
	pods := samplePods()
	st := newStore(false, pods...)
	c := startClient(t, st, server.Config{})
	ctx := testCtx(t)

	w, err := c.Watch(ctx, client.WithNamespace("default"))
	if err != nil {
		t.Fatal(err)
	}
	var rev string
	for {
		ev := next(t, w)
		if ev.Type == client.Synced {
			rev = ev.Revision
			break
		}
	}
	w.Close()
	if rev == "" {
		t.Fatal("Synced without a revision")
	}

	st.Upsert(withRV(pods[1], "2", corev1.PodFailed))
	st.Upsert(withRV(pods[2], "2", corev1.PodFailed)) // not selected
	st.Delete(pods[0].UID)
	w, err = c.Watch(ctx, client.WithNamespace("default"), client.WithResumeFrom(rev))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var got []string
	for {
		ev := next(t, w)
		if ev.Type == client.Synced {
			break
		}
		got = append(got, ev.Type.String()+" "+key(ev.Pod))
	}
	if want := []string{"MODIFIED default/web-2", "DELETED default/web-1"}; !slices.Equal(got, want) {
		t.Fatalf("resumed with %q, want %q", got, want)
	}

	// A revision of another store (a restarted server) is too old.
	other := startClient(t, newStore(false, pods...), server.Config{})
	_, err = other.Watch(ctx, client.WithResumeFrom(rev))
	if !errors.Is(err, client.ErrRevisionTooOld) || connect.CodeOf(err) != connect.CodeOutOfRange {
		t.Fatalf("resume on another server: %v, want OUT_OF_RANGE wrapping ErrRevisionTooOld", err)
	}
	// The kubelet's wire has no revisions.
	kubelet := dialWire(t, podstest.Start(t, newStore(false, pods...), server.Config{}).SocketPath(), client.WireKubelet)
	if _, err := kubelet.Watch(ctx, client.WithResumeFrom(rev)); !errors.Is(err, client.ErrRevisionTooOld) {
		t.Fatalf("resume on the kubelet wire: %v, want ErrRevisionTooOld", err)
	}
}

// TestCacheResumes runs a cache across a restart of the server of one
// store, whose revisions stay valid: the cache resumes, getting the changes
// made while it was away in the order they were made, rather than a
// snapshot it would reconcile (deletions first, then additions and updates
// by name).
func TestCacheResumes(t *testing.T) {
	pods := samplePods() // default/web-1, default/web-2, kube-system/dns-0
	web2, dns0 := pods[1], pods[2]
	socket := podstest.SocketPath(t)
	st := newStore(false, pods...)
	srv := serve(t, st, socket)

	rec := newRecorder()
	cache := client.NewCache(dial(t, socket), client.WithBackoff(time.Millisecond, 20*time.Millisecond), client.WithErrorHandler(rec.onError))
	rec.register(cache)
	runCache(t, cache)
	rec.expectCalls(t, "add default/web-1", "add default/web-2", "add kube-system/dns-0")
	st.Upsert(withRV(web2, "2", corev1.PodRunning))
	rec.expectCalls(t, "update default/web-2 1->2")

	srv.stop(t)
	rec.expectError(t, "the shutdown", func(err error) bool { return connect.CodeOf(err) == connect.CodeUnavailable })
	st.Upsert(withRV(web2, "3", corev1.PodFailed))
	st.Delete(dns0.UID)
	st.Upsert(podstest.Pod("default", "api-0", 9))
	serve(t, st, socket)
	// A snapshot would give: delete dns-0, add api-0, update web-2.
	rec.expectCalls(t, "update default/web-2 2->3", "delete kube-system/dns-0", "add default/api-0")

	st.Delete(pods[0].UID)
	rec.expectCalls(t, "delete default/web-1")
	if got := names(cache.List()); !slices.Equal(got, []string{"default/api-0", "default/web-2"}) {
		t.Fatalf("List = %q", got)
	}
	select {
	case call := <-rec.calls:
		t.Fatalf("unexpected handler call %q", call)
	default:
	}
}

// TestCacheSelectors checks a cache of selected pods: pods that start to
// match are added, those that stop are deleted.
func TestCacheSelectors(t *testing.T) {
	pods := selectorPods() // web-1 tier=web, web-2 tier=cache, dns-0 tier=web
	st := newStore(false, pods...)
	c := startClient(t, st, server.Config{})
	rec := newRecorder()
	cache := client.NewCache(c, client.WithLabelSelector("tier=web"), client.WithNamespace("default"))
	rec.register(cache)
	runCache(t, cache)
	rec.expectCalls(t, "add default/web-1")
	in := pods[1].DeepCopy()
	in.ResourceVersion, in.Labels["tier"] = "2", "web"
	st.Upsert(in)
	rec.expectCalls(t, "add default/web-2")
	out := pods[0].DeepCopy()
	out.ResourceVersion, out.Labels["tier"] = "2", "cache"
	st.Upsert(out)
	rec.expectCalls(t, "delete default/web-1")
	if got := names(cache.List()); !slices.Equal(got, []string{"default/web-2"}) {
		t.Fatalf("List = %q", got)
	}
}
