package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// Request is one request the API server's audit log recorded.
type Request struct {
	// Verb is the API server's verb: get, list, watch, create, ...
	Verb string
	// Resource is the resource asked for ("pods", "replicasets"), with
	// its subresource after a slash; empty for a non-resource URL.
	Resource string
	// URI is the request's path and query.
	URI string
	// Code is the response's status code.
	Code int
}

// maxAuditEvent bounds a line of the audit log: an event at level
// Metadata is a few KiB.
const maxAuditEvent = 4 << 20

// Requests returns what user (PodsapiUser, an Agent's User, or the admin)
// asked of the API server so far, in the order the API server answered: a
// watch once, when its response started (so that an open watch counts),
// every other request when its response was complete.
func (c *Cluster) Requests(t testing.TB, user string) []Request {
	t.Helper()
	f, err := os.Open(c.audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxAuditEvent)
	for sc.Scan() {
		var ev struct {
			Stage      string `json:"stage"`
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		want := "ResponseComplete"
		if ev.Verb == "watch" {
			want = "ResponseStarted"
		}
		if ev.User.Username != user || ev.Stage != want {
			continue
		}
		r := Request{Verb: ev.Verb, URI: ev.RequestURI}
		if ev.ObjectRef != nil {
			r.Resource = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				r.Resource += "/" + ev.ObjectRef.Subresource
			}
		}
		if ev.ResponseStatus != nil {
			r.Code = ev.ResponseStatus.Code
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return out
}

// Count returns how many of reqs are verb of resource.
func Count(reqs []Request, verb, resource string) int {
	n := 0
	for _, r := range reqs {
		if r.Verb == verb && r.Resource == resource {
			n++
		}
	}
	return n
}

// Tally counts requests by "verb resource" (by "verb path" for a
// non-resource URL, such as discovery's "get /apis").
type Tally map[string]int

// String prints the tally in a stable order, "none" when empty, for the
// tests' logs and the results table: "get /api 1, watch replicasets 2".
func (t Tally) String() string {
	if len(t) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(t))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, t[k]))
	}
	return strings.Join(parts, ", ")
}

// Asked returns what user asked the API server so far (Requests), counted
// by verb and resource (Summary).
func (c *Cluster) Asked(t testing.TB, user string) Tally {
	t.Helper()
	return Summary(c.Requests(t, user))
}

// Summary counts reqs by "verb resource" (by "verb path" for a
// non-resource URL), for logs and docs.
func Summary(reqs []Request) Tally {
	m := make(Tally)
	for _, r := range reqs {
		k := r.Verb + " " + r.Resource
		if r.Resource == "" {
			k = r.Verb + " " + strings.SplitN(r.URI, "?", 2)[0]
		}
		m[k]++
	}
	return m
}
