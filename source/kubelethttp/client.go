package kubelethttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// newClient returns the HTTP client of the polls: no proxy (the kubelet is
// node-local), TLS as configured, connections kept between polls.
func (s *Source) newClient() (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case s.insecureSkipVerify:
		// Asked for: kubelet serving certificates are often self-signed.
		tlsConfig.InsecureSkipVerify = true
	case s.caFile != "":
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("kubelethttp: read the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kubelethttp: the CA file %s holds no PEM certificate", s.caFile)
		}
		tlsConfig.RootCAs = pool
	}
	if s.certFile != "" || s.keyFile != "" {
		if s.certFile == "" || s.keyFile == "" {
			return nil, errors.New("kubelethttp: a client certificate needs both a certificate and a key file")
		}
		// Fail now on a bad pair; later, read them again at each handshake
		// so that rotated certificates are used.
		if _, err := tls.LoadX509KeyPair(s.certFile, s.keyFile); err != nil {
			return nil, fmt.Errorf("kubelethttp: load the client certificate: %w", err)
		}
		certFile, keyFile := s.certFile, s.keyFile
		tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("load the client certificate: %w", err)
			}
			return &cert, nil
		}
	}
	dialer := &net.Dialer{Timeout: s.timeout, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: s.timeout,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        2,
			IdleConnTimeout:     max(90*time.Second, 3*s.interval),
		},
		// The kubelet does not redirect /pods; a redirect would carry the
		// token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}
