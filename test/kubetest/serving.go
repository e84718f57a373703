package kubetest

import (
	"net"
	"path/filepath"
	"testing"
)

// ServingCert writes into dir a CA of its own and a serving certificate
// signed by it for 127.0.0.1, ::1 and localhost (serving.crt, serving.key,
// serving-ca.crt), for a server other than the API server (podsapi's
// Kubernetes API), and returns their paths and the CA's PEM.
func ServingCert(t testing.TB, dir string) (certFile, keyFile string, caPEM []byte) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	caPEM = writeServing(t, "podsapi-test-serving-ca", "podsapi", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		filepath.Join(dir, "serving-ca.crt"), certFile, keyFile)
	return certFile, keyFile, caPEM
}

// Token returns the bearer token of user (AdminUser or one given to
// Start).
func (c *ControlPlane) Token(user string) string { return c.tokens[user] }
