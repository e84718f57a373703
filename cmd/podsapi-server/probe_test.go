package main

import (
	"bytes"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestProbeDeniedUser is the health check of docs/server.md as a user the
// server denies runs it: the Pods API answers PERMISSION_DENIED, health
// still answers SERVING to `podsapi-server probe`, which, unlike grpcurl,
// needs no reflection (reflection is behind the access check).
func TestProbeDeniedUser(t *testing.T) {
	st := store.New()
	st.Upsert(podstest.Pod("default", "web-1", 1))
	st.MarkSynced()
	srv := podstest.Start(t, st, server.Config{Access: server.AccessConfig{AllowedUIDs: []uint32{4242}}})
	sock := srv.SocketPath()

	c, err := client.New(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.List(t.Context()); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("List as a denied user = %v, want PERMISSION_DENIED", err)
	}
	var out, errs bytes.Buffer
	if err := Probe(t.Context(), []string{"--socket", sock, "--serving"}, &out, &errs); err != nil || strings.TrimSpace(out.String()) != "SERVING" {
		t.Fatalf("probe --serving as a denied user = %v, %q (stderr %q), want SERVING", err, out.String(), errs.String())
	}
}
