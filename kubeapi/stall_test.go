package kubeapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestStalledWatcherFreed opens a watch from a client that never reads and
// changes pods until the handler can no longer write: the write timeout
// ends the watch, which frees its goroutine and its store watcher.
func TestStalledWatcherFreed(t *testing.T) {
	st := newStore(pod("default", "web-1", 1))
	h := handler(st, kubeapi.WithWriteTimeout(100*time.Millisecond), kubeapi.WithWatchQueue(1<<20))
	returned := make(chan struct{})
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		defer close(returned)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096) // a small window, filled sooner
	}
	fmt.Fprintf(conn, "GET /api/v1/pods?fieldSelector=spec.nodeName%%3Dnode-1&watch=true HTTP/1.1\r\nHost: node\r\n\r\n")
	<-started
	// Read the response's head only, then nothing.
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	big := pod("default", "web-1", 1)
	big.Annotations["padding"] = strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		select {
		case <-returned:
			return // the write timed out: the watch ended
		case <-deadline:
			t.Fatalf("the watch of a client that does not read is still served after %d changes", i)
		default:
		}
		big.Labels["n"] = fmt.Sprint(i)
		st.Upsert(big)
		if i%64 == 63 {
			select {
			case <-returned:
				return
			case <-time.After(10 * time.Millisecond): // give the handler the CPU; the loop ends on the event, not the time
			}
		}
	}
}
