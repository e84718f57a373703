// Package h2c dials the Pods API socket: HTTP/2 with prior knowledge (h2c)
// over a UNIX socket, as gRPC clients speak it.
package h2c

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// BaseURL is the URL connect clients use with the client of NewClient: the
// socket, not the host, decides where requests go.
const BaseURL = "http://localhost"

// SocketPath returns the socket path of endpoint, which is either a path or a
// unix:// URL (unix:///run/x.sock or unix:/run/x.sock).
func SocketPath(endpoint string) string {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		return strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "unix:"):
		return strings.TrimPrefix(endpoint, "unix:")
	default:
		return endpoint
	}
}

// NewClient returns an HTTP client that speaks h2c to the socket at path,
// whatever host the request names.
func NewClient(path string) *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols: protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}
