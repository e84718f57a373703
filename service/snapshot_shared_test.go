package service_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// snapshotWatch is one kind of watch of TestSnapshotShared.
type snapshotWatch struct {
	name    string
	path    string
	req     proto.Message
	mask    string
	newResp func() proto.Message
	synced  func(proto.Message) bool
}

func typedWatch(name string, req *podsv1alpha1.PodWatchRequest, mask string) snapshotWatch {
	return snapshotWatch{
		name: name, path: podsv1alpha1connect.PodsWatchPodsProcedure, req: req, mask: mask,
		newResp: func() proto.Message { return &podsv1alpha1.PodWatchResponse{} },
		synced: func(m proto.Message) bool {
			return m.(*podsv1alpha1.PodWatchResponse).GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE
		},
	}
}

func kubeletWatch(name, mask string) snapshotWatch {
	return snapshotWatch{
		name: name, path: v1alpha1connect.PodsWatchPodsProcedure, req: &v1alpha1.WatchPodsRequest{}, mask: mask,
		newResp: func() proto.Message { return &v1alpha1.WatchPodsEvent{} },
		synced: func(m proto.Message) bool {
			return m.(*v1alpha1.WatchPodsEvent).GetType() == v1alpha1.EventType_INITIAL_SYNC_COMPLETE
		},
	}
}

// snapshotWatches are the watches of TestSnapshotShared: both wires, whole
// and masked pods, and a selection. Each is a distinct shared snapshot. The
// masks keep the annotations, which TestSnapshotShared pads so that each
// snapshot is more than a holder's windows.
var snapshotWatches = []snapshotWatch{
	typedWatch("typed", &podsv1alpha1.PodWatchRequest{}, ""),
	typedWatch("typed-masked", &podsv1alpha1.PodWatchRequest{}, "status.phase, status.podIP, metadata.annotations"),
	typedWatch("typed-selected", &podsv1alpha1.PodWatchRequest{Namespace: "ns-1"}, ""),
	kubeletWatch("kubelet", ""),
	kubeletWatch("kubelet-masked", "status.phase, metadata.annotations"),
}

// TestSnapshotShared starts several watchers of each kind at once, with each
// protocol, and checks that every one receives, message for message and byte
// for byte, the snapshot the service sends one event at a time through
// connect when it is served without the server's transport; that the
// snapshot of each kind is built once for all its watchers of the binary
// protocols while a watcher holds it; that nothing is kept once no watcher
// is sending a snapshot; and that a watch whose snapshot was written in one
// piece still ends with its protocol's status.
//
// A snapshot is shared only while a watcher is writing it, so that the
// counts do not depend on how the watchers overlap, a holder of each kind,
// whose client has HTTP/2 windows of 64 KiB and does not read, keeps its
// snapshot in flight while the others start.
func TestSnapshotShared(t *testing.T) {
	const watchers = 3
	st := store.New()
	for i := range 400 {
		p := podstest.Pod(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("pod-%03d", i), i)
		p.Annotations = map[string]string{"example.com/padding": strings.Repeat("x", 1<<10)}
		st.Upsert(p)
	}
	st.MarkSynced()

	reg := prometheus.NewRegistry()
	sock := podstest.SocketPath(t)
	// The holders stop reading for the whole test: no stall guard.
	cfg := server.Config{Socket: sock, Registry: reg, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Limits: server.LimitsConfig{QPS: -1}, Transport: server.TransportConfig{WriteStallTimeout: -1}}
	f := podstest.Serve(t, st, cfg)
	events := f.Events
	ref := serveReference(t, st)

	type result struct {
		msgs [][]byte
		resp *http.Response
		err  error
	}
	type call struct {
		w snapshotWatch
		p podstest.Protocol
	}
	real, plain := podstest.HTTPClient(t, sock), podstest.HTTPClient(t, ref)
	var calls []call
	for _, w := range snapshotWatches {
		for _, p := range podstest.Protocols {
			calls = append(calls, call{w, p})
		}
	}
	want := make([][][]byte, len(calls))
	for i, c := range calls {
		msgs, resp, err := watchRaw(t.Context(), plain, c.w, c.p)
		if err != nil {
			t.Fatalf("%s %s from the plain handler: %v", c.w.name, c.p.Name, err)
		}
		resp.Body.Close()
		want[i] = msgs
	}

	// A holder of each kind keeps its snapshot in flight: the events after
	// the first are far more than its windows hold.
	holder := podstest.Protocols[0]
	var holders []*http.Response
	held := map[string]int{} // holders by procedure
	for i, c := range calls {
		if c.p != holder {
			continue
		}
		held[c.w.path]++
		if n := snapshotRest(want[i]); n < 2*holderWindow {
			t.Fatalf("%s: %d bytes of snapshot after the first event, want at least %d to hold it", c.w.name, n, 2*holderWindow)
		}
		resp, err := openWatch(t.Context(), holderClient(t, sock), c.w, c.p)
		if err != nil {
			t.Fatalf("%s holder: %v", c.w.name, err)
		}
		defer resp.Body.Close()
		holders = append(holders, resp)
	}
	kinds := len(snapshotWatches)
	if got := podstest.GaugeValue(t, reg, "podsapi_watch_snapshots"); got != float64(kinds) {
		t.Fatalf("%v snapshots in flight with a holder of each of the %d kinds", got, kinds)
	}

	// Every other watcher starts at once.
	got := make([][]result, len(calls))
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range calls {
		got[i] = make([]result, watchers)
		for j := range watchers {
			wg.Go(func() {
				<-begin
				r := &got[i][j]
				r.msgs, r.resp, r.err = watchRaw(t.Context(), real, c.w, c.p)
			})
		}
	}
	close(begin)
	wg.Wait()
	for i, c := range calls {
		for j, r := range got[i] {
			if r.err != nil {
				t.Fatalf("%s %s watcher %d: %v", c.w.name, c.p.Name, j, r.err)
			}
			defer r.resp.Body.Close()
			if len(r.msgs) != len(want[i]) {
				t.Fatalf("%s %s watcher %d: %d messages to the sync, want %d", c.w.name, c.p.Name, j, len(r.msgs), len(want[i]))
			}
			for k := range r.msgs {
				if !bytes.Equal(r.msgs[k], want[i][k]) {
					t.Fatalf("%s %s watcher %d: message %d differs from the one sent one event at a time:\n got %x\nwant %x", c.w.name, c.p.Name, j, k, r.msgs[k][:min(len(r.msgs[k]), 64)], want[i][k][:min(len(want[i][k]), 64)])
				}
			}
		}
	}

	// One snapshot per kind of watch, built for its holder and shared by
	// its watchers of the binary protocols.
	binary := 0
	for _, p := range podstest.Protocols {
		if p.Binary {
			binary++
		}
	}
	view := func(name string) float64 {
		return podstest.MetricValue(t, reg, name, map[string]string{"view": "snapshot"})
	}
	if computes, hits := view("podsapi_view_computes_total"), view("podsapi_view_cache_hits_total"); computes != float64(kinds) || hits != float64(kinds*binary*watchers) {
		t.Fatalf("snapshots built %v times and reused %v times, want %d and %d", computes, hits, kinds, kinds*binary*watchers)
	}

	// Once the holders leave, no snapshot is kept: the watches whose
	// clients left notice it when their writes fail, and return.
	for _, resp := range holders {
		resp.Body.Close()
	}
	for path, n := range held {
		events.WaitServed(t, path, n)
	}
	expectNoSnapshots(t, reg)

	// The server's shutdown ends the watches, after their snapshots, with
	// UNAVAILABLE in each protocol's way.
	f.Stop()
	for i, c := range calls {
		for j, r := range got[i] {
			if _, err := podstest.ExpectEnd(r.resp, c.p, 14, "unavailable"); err != nil {
				t.Fatalf("%s %s watcher %d: %v", c.w.name, c.p.Name, j, err)
			}
		}
	}
}

// serveReference serves the Pods handlers of both wires of st on a fresh
// socket, as connect alone serves them: without the server's transport, each
// watch sends its events one at a time. It returns the socket.
func serveReference(t *testing.T, st *store.Store) string {
	t.Helper()
	h := service.NewHandlers(st)
	opts := service.HandlerOptions(service.FieldMasks())
	mux := http.NewServeMux()
	mux.Handle(podsv1alpha1connect.NewPodsHandler(h.Pods, opts...))
	mux.Handle(v1alpha1connect.NewPodsHandler(h.Kubelet, opts...))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: protocols}
	sock := podstest.SocketPath(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return sock
}

// watchRaw calls w with protocol p and returns the messages of the response,
// each with its 5-byte prefix, up to and including INITIAL_SYNC_COMPLETE,
// and the response, whose body is left to read.
func watchRaw(ctx context.Context, c *http.Client, w snapshotWatch, p podstest.Protocol) ([][]byte, *http.Response, error) {
	resp, err := openWatch(ctx, c, w, p)
	if err != nil {
		return nil, nil, err
	}
	var msgs [][]byte
	for {
		msg, err := podstest.ReadEnvelope(resp.Body)
		if err != nil {
			resp.Body.Close()
			return nil, nil, fmt.Errorf("after %d messages: %w", len(msgs), err)
		}
		if msg[0] != 0 {
			resp.Body.Close()
			return nil, nil, fmt.Errorf("message %d has flags %#x before the sync", len(msgs), msg[0])
		}
		msgs = append(msgs, msg)
		synced, err := w.isSynced(msg, p)
		if err != nil {
			resp.Body.Close()
			return nil, nil, fmt.Errorf("message %d: %w", len(msgs)-1, err)
		}
		if synced {
			return msgs, resp, nil
		}
	}
}

// isSynced reports whether msg, with its prefix, is INITIAL_SYNC_COMPLETE.
func (w snapshotWatch) isSynced(msg []byte, p podstest.Protocol) (bool, error) {
	m := w.newResp()
	err := p.Unmarshal(msg, m)
	return err == nil && w.synced(m), err
}

// openWatch calls w with protocol p and returns the response, whose body is
// left to read.
func openWatch(ctx context.Context, c *http.Client, w snapshotWatch, p podstest.Protocol) (*http.Response, error) {
	return podstest.OpenWatch(ctx, c, h2c.BaseURL+w.path, w.req, w.mask, p)
}

// holderClient returns an HTTP/2 client of socket, on a connection of its
// own, whose flow-control windows hold holderWindow bytes: a watch of a
// larger snapshot that does not read keeps the server's write blocked, and
// the snapshot in flight.
func holderClient(t *testing.T, socket string) *http.Client {
	t.Helper()
	hc := podstest.HTTPClient(t, socket)
	hc.Transport.(*http.Transport).HTTP2 = &http.HTTP2Config{
		MaxReceiveBufferPerStream:     holderWindow,
		MaxReceiveBufferPerConnection: holderWindow,
	}
	return hc
}

// snapshotRest returns the bytes of the messages of a snapshot after the
// first one, without INITIAL_SYNC_COMPLETE: those a watch writes in chunks.
func snapshotRest(msgs [][]byte) int {
	n := 0
	for _, m := range msgs[1 : len(msgs)-1] {
		n += len(m)
	}
	return n
}

// expectNoSnapshots checks that no snapshot is in flight, nor any byte of
// one kept, once every watch that sent one has returned.
func expectNoSnapshots(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	if n, b := podstest.GaugeValue(t, reg, "podsapi_watch_snapshots"), podstest.GaugeValue(t, reg, "podsapi_watch_snapshots_bytes"); n != 0 || b != 0 {
		t.Fatalf("%v snapshots of %v bytes still kept once no watcher sends one", n, b)
	}
}
