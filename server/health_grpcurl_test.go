package server_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestRealGrpcurlHealthDenied pins what docs/server.md ("Health probe")
// tells a user the server denies: health stays open, reflection does not,
// so the real grpcurl, which resolves grpc.health.v1.Health/Check by
// reflection, is refused PERMISSION_DENIED, while an allowed user's grpcurl
// gets SERVING. (podsapi-server probe, which needs no reflection, answers
// SERVING to the denied user: TestProbeDeniedUser in cmd/podsapi-server.)
func TestRealGrpcurlHealthDenied(t *testing.T) {
	bin := podstest.RealGrpcurl(t)
	for _, tc := range []struct {
		name   string
		access server.AccessConfig
		ok     bool
		want   string
	}{
		{"denied", server.AccessConfig{AllowedUIDs: []uint32{4242}}, false, "PermissionDenied"},
		{"allowed", server.AccessConfig{AllowAnyPeer: true}, true, `"status": "SERVING"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.New()
			st.MarkSynced()
			srv := podstest.Start(t, st, server.Config{Access: tc.access})
			ctx, cancel := context.WithTimeout(t.Context(), podstest.GrpcurlTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "-plaintext", "-unix", srv.SocketPath(), "grpc.health.v1.Health/Check")
			cmd.WaitDelay = time.Second
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if (err == nil) != tc.ok {
				t.Fatalf("grpcurl health check: %v, want success %v\nstdout: %s\nstderr: %s", err, tc.ok, stdout.String(), stderr.String())
			}
			if out := stdout.String() + stderr.String(); !strings.Contains(out, tc.want) {
				t.Errorf("grpcurl printed %q, want %s", out, tc.want)
			}
		})
	}
}
