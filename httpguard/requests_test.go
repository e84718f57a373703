package httpguard

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// served is a server of h behind Track with timeouts to, on a Listener on
// loopback speaking HTTP/1.1 and HTTP/2 without TLS.
type served struct {
	addr   string
	closed chan struct{} // receives a value when a connection is closed
}

func serveTracked(t *testing.T, h http.Handler, to RequestTimeouts) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{addr: ln.Addr().String(), closed: make(chan struct{}, 16)}
	l := NewListener(ln, 0, NewConnMetrics(MetricNames{Prefix: "test"}, nil), "test", slog.New(slog.DiscardHandler),
		WithEvents(nil, func() { s.closed <- struct{}{} }))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: Track(h, to), Protocols: protocols, ConnContext: WithConn, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return s
}

// h2cClient returns a client speaking HTTP/2 without TLS, over one
// connection.
func h2cClient(t *testing.T) *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: protocols}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A request that declares a body and never sends it is ended by the body
// deadline: a handler that reads it gets ErrBodyTimeout, and one that
// answers without reading it has its HTTP/1.1 connection closed after
// answering, not held waiting for the body, on the real clock.
func TestTrackBodyDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	readErr := make(chan error, 1)
	s := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			_, err := io.ReadAll(r.Body)
			readErr <- err
		}
		w.WriteHeader(http.StatusTooManyRequests)
	}), RequestTimeouts{Body: timeout})
	for _, path := range []string{"/read", "/ignore"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			rd := bufio.NewReader(c)
			resp, err := http.ReadResponse(rd, nil)
			if err == nil {
				resp.Body.Close()
			}
			if _, err := rd.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the answer: %v, want the connection closed", err)
			}
			if d := time.Since(start); d < timeout {
				t.Fatalf("closed after %v, before the body deadline %v", d, timeout)
			}
			<-s.closed
			if path == "/read" {
				if err := <-readErr; !errors.Is(err, ErrBodyTimeout) {
					t.Fatalf("the handler's read: %v, want ErrBodyTimeout", err)
				}
			}
		})
	}
	// A body that arrives is read whole, and its connection kept.
	resp, err := http.Post("http://"+s.addr+"/read", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-readErr; err != nil {
		t.Fatalf("a body sent whole: %v", err)
	}
}

// GoAway: an unauthenticated request on an HTTP/2 connection stops new
// streams on it; after the grace, a connection with an authenticated
// caller's request in flight keeps it, and only its other requests are
// ended; one without is closed. On the real clock, outliving the grace.
func TestGoAwaySparesAuthenticated(t *testing.T) {
	const grace = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		watch bool
	}{{"with an authenticated watch", true}, {"without", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ended := make(chan string, 4)
			release := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/anonymous":
					GoAway(w, r, grace)
					w.WriteHeader(http.StatusUnauthorized)
				case "/watch", "/held":
					if r.URL.Path == "/watch" {
						Authenticated(r.Context())
					}
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					select {
					case <-r.Context().Done():
						ended <- r.URL.Path
					case <-release:
						_, _ = io.WriteString(w, "done")
					}
				}
			})
			s := serveTracked(t, h, RequestTimeouts{})
			c := h2cClient(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			open := func(path string) *http.Response {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+path, nil)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			var watch *http.Response
			if tc.watch {
				watch = open("/watch")
				defer watch.Body.Close()
			}
			held := open("/held")
			defer held.Body.Close()
			start := time.Now()
			if resp := open("/anonymous"); resp.StatusCode != http.StatusUnauthorized || resp.ProtoMajor != 2 {
				t.Fatalf("anonymous: %s %s", resp.Proto, resp.Status)
			}
			// The unauthenticated request held is ended after the grace.
			if got := <-ended; got != "/held" {
				t.Fatalf("%s ended, want /held", got)
			}
			if d := time.Since(start); d < grace {
				t.Fatalf("/held ended %v after the GOAWAY, before the grace %v", d, grace)
			}
			if !tc.watch {
				<-s.closed
				return
			}
			// The watch outlives the grace three times over, then
			// finishes with its answer, and the connection closes.
			time.Sleep(3 * grace)
			select {
			case got := <-ended:
				t.Fatalf("%s ended, want the watch open", got)
			case <-s.closed:
				t.Fatal("the connection carrying the watch was closed")
			default:
			}
			close(release)
			body, err := io.ReadAll(watch.Body)
			if err != nil || string(body) != "done" {
				t.Fatalf("the watch's answer: %q, %v", body, err)
			}
			<-s.closed
		})
	}
}

// The end of a response that its client does not read (an HTTP/2 receive
// window of zero) is bounded by the tail deadline once the handler has
// returned: its stream is reset, on the real clock, outliving it.
func TestTrackTailDeadline(t *testing.T) {
	const tail = 300 * time.Millisecond
	s := serveTracked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "an answer nobody reads")
	}), RequestTimeouts{Tail: tail})
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	start := time.Now()
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hbuf.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v, want the stream reset", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			t.Fatal("the server sent data beyond a zero window")
		case *http2.RSTStreamFrame:
			if d := time.Since(start); d < tail {
				t.Fatalf("the stream was reset %v after the request, before the tail deadline %v", d, tail)
			}
			return
		}
	}
}
