package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/socket"
)

// Probe is `podsapi-server probe`: a gRPC health check of the server on
// --socket, for exec probes (Kubernetes gRPC probes need TCP). It succeeds
// when the server answers; with --serving, only when it reports SERVING
// (its pod source has synced).
func Probe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("podsapi-server probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", socket.DefaultPath, "the server's UNIX socket")
	serving := fs.Bool("serving", false, "succeed only when the server reports SERVING (synced), not merely answering")
	timeout := fs.Duration("timeout", 3*time.Second, "bound of the check")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
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
