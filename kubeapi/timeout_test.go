package kubeapi_test

import (
	"bufio"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/podsapi/podsapi/kubeapi"
)

// TestWatchTimeout ends watches at their timeoutSeconds, capped by
// WithWatchTimeout, and sends bookmarks every WithBookmarkInterval, on
// synctest's clock.
func TestWatchTimeout(t *testing.T) {
	tests := []struct {
		name      string
		timeout   string // timeoutSeconds
		bookmarks bool
		want      time.Duration
		wantBooks int // bookmarks after the initial events' end
	}{
		{name: "timeoutSeconds", timeout: "5", want: 5 * time.Second},
		{name: "capped", timeout: "3600", want: 20 * time.Second},
		{name: "none: the handler's", want: 20 * time.Second},
		{name: "bookmarks every 3s", timeout: "10", bookmarks: true, want: 10 * time.Second, wantBooks: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := handler(newStore(pod("default", "web-1", 1)), kubeapi.WithWatchTimeout(20*time.Second), kubeapi.WithBookmarkInterval(3*time.Second))
				target := "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&watch=true"
				if tt.timeout != "" {
					target += "&timeoutSeconds=" + tt.timeout
				}
				if tt.bookmarks {
					target += "&allowWatchBookmarks=true"
				}
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
				if took := time.Since(start); took != tt.want {
					t.Errorf("the watch lasted %v, want %v", took, tt.want)
				}
				var types []string
				sc := bufio.NewScanner(strings.NewReader(w.Body.String()))
				for sc.Scan() {
					var ev struct{ Type string }
					if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
						t.Fatal(err)
					}
					types = append(types, ev.Type)
				}
				want := []string{"ADDED"}
				if tt.bookmarks {
					want = append(want, "BOOKMARK") // the end of the initial events
				}
				for range tt.wantBooks {
					want = append(want, "BOOKMARK")
				}
				if strings.Join(types, " ") != strings.Join(want, " ") {
					t.Errorf("events %v, want %v", types, want)
				}
			})
		})
	}
}
