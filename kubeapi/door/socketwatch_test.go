package door_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// socketTransport returns a transport of the door's UNIX socket speaking
// HTTP/1.1 or, when h2c is set, HTTP/2 with prior knowledge, over one
// connection.
func socketTransport(socket string, h2c bool) *http.Transport {
	p := new(http.Protocols)
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	return &http.Transport{
		Protocols:       p,
		MaxConnsPerHost: 1,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
}

// TestDoorSocketWatchesLast keeps a watch over HTTP/1.1 and one over h2c
// on the door's UNIX socket idle for longer than every timer of the door
// (write timeouts shorter than the bookmark interval), on the real clock
// and with no API server: each stays open on its single request and
// carries the change made after. An HTTP/1.1 connection whose watch ended
// serves its next request after the write timeout has passed (net/http
// clears the deadline that bounded the end of the watch).
func TestDoorSocketWatchesLast(t *testing.T) {
	st := store.New()
	st.Upsert(podstest.Pod("a", "pa-0", 0))
	st.MarkSynced()
	local := kubeapi.New(st, nodeName, kubeapi.WithWriteTimeout(shortWrite), kubeapi.WithBookmarkInterval(shortBookmark))
	d := door.New(local, door.WithPeerPolicy(&guard.AccessPolicy{UIDs: []uint32{uint32(os.Geteuid())}}))
	var watches atomic.Int32
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			watches.Add(1)
		}
		d.ServeHTTP(w, r)
	})
	s := serve(t, counted, door.Config{
		Socket:            filepath.Join(t.TempDir(), "kube.sock"),
		ReadHeaderTimeout: shortIdle, IdleTimeout: shortIdle, WriteTimeout: shortWrite,
	})
	watchURL := "http://podsapi/api/v1/namespaces/a/pods?watch=true&allowWatchBookmarks=true&fieldSelector=" + pinned

	type stream struct {
		name   string
		events chan string
		body   io.Closer
	}
	var streams []stream
	for _, h2c := range []bool{false, true} {
		tr := socketTransport(s.socket, h2c)
		t.Cleanup(tr.CloseIdleConnections)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, watchURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2c] {
			t.Fatalf("watch: %s over %s", resp.Status, resp.Proto)
		}
		events := make(chan string, 64)
		go func() {
			defer close(events)
			dec := json.NewDecoder(resp.Body)
			for {
				var ev struct {
					Type   string
					Object struct{ Metadata struct{ Name string } }
				}
				if dec.Decode(&ev) != nil {
					return
				}
				events <- ev.Type + " " + ev.Object.Metadata.Name
			}
		}()
		streams = append(streams, stream{name: resp.Proto, events: events, body: resp.Body})
	}
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	// next returns the next event that is not a bookmark.
	next := func(s stream) string {
		t.Helper()
		for {
			select {
			case ev, ok := <-s.events:
				if !ok {
					t.Fatalf("%s: the watch ended", s.name)
				}
				if ev != "BOOKMARK " {
					return ev
				}
			case <-deadline:
				t.Fatalf("%s: no event", s.name)
			}
		}
	}
	for _, s := range streams {
		if ev := next(s); ev != "ADDED pa-0" {
			t.Fatalf("%s: %q, want ADDED pa-0", s.name, ev)
		}
	}
	time.Sleep(idleFor) // the idle period is what is tested, not a synchronisation
	st.Upsert(podstest.Pod("a", "pa-1", 1))
	for _, s := range streams {
		if ev := next(s); ev != "ADDED pa-1" {
			t.Fatalf("%s after %v idle: %q, want ADDED pa-1", s.name, idleFor, ev)
		}
	}
	if n := watches.Load(); n != 2 {
		t.Errorf("%d watch requests, want 2 (one per client)", n)
	}

	t.Run("an HTTP/1.1 connection after a watch", func(t *testing.T) {
		// A door whose idle timeout outlasts the wait below by far.
		s := serve(t, d, door.Config{Socket: filepath.Join(t.TempDir(), "kube.sock"), IdleTimeout: time.Minute})
		tr := socketTransport(s.socket, false)
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		if a := get(t, c, watchURL+"&timeoutSeconds=1", ""); a.code != http.StatusOK {
			t.Fatalf("watch: %d %s", a.code, a.body)
		}
		time.Sleep(2 * shortWrite) // past the deadline the end of the watch was written under
		var reused bool
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podsapi/api/v1/namespaces/a/pods?fieldSelector="+pinned, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("the list after the watch, on its connection: %v", err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the list after the watch: %s, %v", resp.Status, err)
		}
		if !reused {
			t.Error("the list did not reuse the watch's connection: the test proves nothing")
		}
	})
}
