package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/pflag"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/socket"
)

// Probe is `podsapi-server probe`: a gRPC health check of the server on
// --socket, for exec probes (Kubernetes gRPC probes need TCP). It succeeds
// when the server answers; with --serving, only when it reports SERVING
// (its pod source has synced).
func Probe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("podsapi-server probe", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	sock := fs.String("socket", socket.DefaultPath, "the server's UNIX socket")
	serving := fs.Bool("serving", false, "succeed only when the server reports SERVING (synced), not merely answering")
	timeout := fs.Duration("timeout", 3*time.Second, "bound of the check")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: podsapi-server probe [--socket PATH] [--serving] [--timeout DURATION]\n\n"+
			"Checks the gRPC health of the server on --socket, for exec probes: exits 0\n"+
			"when it answers (with --serving, only when it reports SERVING), 1 otherwise.\n\nFlags:\n")
		fmt.Fprint(fs.Output(), fs.FlagUsages())
	}
	if err := parse(fs, args, stdout); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err, probeHint}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args()), probeHint}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	httpClient := h2c.NewClient(h2c.SocketPath(*sock))
	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](
		httpClient, h2c.BaseURL+"/grpc.health.v1.Health/Check", connect.WithGRPC())
	resp, err := client.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		return fmt.Errorf("health check of %s: %w", *sock, err)
	}
	status := resp.Msg.GetStatus()
	fmt.Fprintln(stdout, status)
	if *serving && status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health check of %s: %s", *sock, status)
	}
	return nil
}
