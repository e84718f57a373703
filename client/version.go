package client

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/podsapi/podsapi/internal/buildinfo"
	"github.com/podsapi/podsapi/internal/h2c"
)

// healthCheckProcedure is the gRPC health check, which podsapi serves to any
// peer that can open the socket and which costs no rate-limit token.
const healthCheckProcedure = "/grpc.health.v1.Health/Check"

// ServerVersion returns the version the server sends in the response header
// X-Podsapi-Version, read from a gRPC health check. It is "" for a server
// that sends none: a kubelet (which has no health service either), or a
// podsapi older than the header. It fails only when the server cannot be
// reached, or answers the check with another error.
func (c *Client) ServerVersion(ctx context.Context) (string, error) {
	hc := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](
		c.http, h2c.BaseURL+healthCheckProcedure, connect.WithGRPC())
	res, err := hc.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			if v := ce.Meta().Get(buildinfo.Header); v != "" {
				return v, nil
			}
			if ce.Code() == connect.CodeUnimplemented {
				return "", nil
			}
		}
		return "", wrapError(err, false)
	}
	return res.Header().Get(buildinfo.Header), nil
}
