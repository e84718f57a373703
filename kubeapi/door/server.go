package door

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/httpguard"
	"github.com/podsapi/podsapi/socket"
)

// The defaults of Config.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes connections idle this long between
	// requests (the API server's own HTTP/1.1 idle timeout).
	DefaultIdleTimeout = 90 * time.Second
	// DefaultMaxHeaderBytes bounds a request's headers (the API server's
	// and Go's default).
	DefaultMaxHeaderBytes = 1 << 20
	// DefaultMaxConnections bounds the connections open at once on each
	// listener. At the bound a new connection takes the slot of one without
	// an authenticated caller's request in flight, those on which no caller
	// ever authenticated first, the idlest first, or is refused when every
	// connection has one (httpguard.Listener).
	DefaultMaxConnections = 1024
	// DefaultWriteTimeout is how long a write of a response may stay
	// blocked before its stream is reset (HTTP/2) or its connection closed
	// (HTTP/1.1), how long a write of a connection's frames may stay
	// blocked before the connection is closed (httpguard.StallGuard: a
	// client that does not read has its response ended and freed), and how
	// long the end of a response may take once the handler has returned. An
	// idle watch writes nothing and is not cut.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultBodyTimeout bounds the arrival of a request's body, from when
	// its headers were read: a request that declares a body and does not
	// send it within it is ended, its HTTP/1.1 connection closed
	// (httpguard.RequestTimeouts.Body). The API server's own request
	// timeout is 60 s; a request body is at most 3 MiB
	// (DefaultMaxRequestBytes).
	DefaultBodyTimeout = 30 * time.Second
	// DefaultUnauthenticatedGrace is how long an HTTP/2 connection lives
	// after a request on it was refused for lack of valid credentials, or
	// passed through with none, unless an authenticated caller's request is
	// in flight on it: as the API server, the door answers and sends GOAWAY
	// (Connection: close), so that the connection takes no new stream; after
	// this grace it is closed whatever its streams are doing (Go's HTTP/2
	// server alone would wait for streams held by a zero receive window for
	// ever), or, when an authenticated caller's request is in flight on it,
	// its other requests are ended and the authenticated ones finish
	// (httpguard.GoAway). Go's own delay between a GOAWAY and closing the
	// connection.
	DefaultUnauthenticatedGrace = time.Second
	// DefaultMaxStreams bounds the concurrent requests of one HTTP/2
	// connection (Go's and the API server's default).
	DefaultMaxStreams = 250
	// DefaultShutdownTimeout bounds a graceful shutdown: requests get half
	// of it to end, then watches and upgraded connections are ended, and
	// what is left is closed when it has passed.
	DefaultShutdownTimeout = 10 * time.Second
)

// Config is where the door listens and its bounds. Zero values mean the
// defaults.
type Config struct {
	// Address is the TCP host:port served over HTTPS (HTTP/2 and
	// HTTP/1.1); empty: none. CertFile and KeyFile are its serving
	// certificate and key (PEM), reloaded when they change.
	Address, CertFile, KeyFile string
	// ClientCertificates asks HTTPS clients for a certificate (verified by
	// the Auth's client CA, not by TLS).
	ClientCertificates bool
	// Socket is the path of a UNIX socket served over plain HTTP (HTTP/1.1
	// and HTTP/2 with prior knowledge); empty: none. SocketOptions set its
	// mode and group (package socket).
	Socket        string
	SocketOptions []socket.Option

	ReadHeaderTimeout time.Duration // Default DefaultReadHeaderTimeout.
	IdleTimeout       time.Duration // Default DefaultIdleTimeout.
	MaxHeaderBytes    int           // Default DefaultMaxHeaderBytes.
	MaxConnections    int           // Default DefaultMaxConnections, per listener.
	MaxStreams        int           // Default DefaultMaxStreams.
	WriteTimeout      time.Duration // Default DefaultWriteTimeout; negative: none.
	BodyTimeout       time.Duration // Default DefaultBodyTimeout; negative: none.
	// UnauthenticatedGrace: default DefaultUnauthenticatedGrace.
	UnauthenticatedGrace time.Duration
	ShutdownTimeout      time.Duration // Default DefaultShutdownTimeout.
	// Logger logs the listeners' errors (TLS handshakes at debug level).
	// Default: discarded.
	Logger *slog.Logger
	// Registerer receives the metrics of the connections and stalls
	// (podsapi_kube_api_connections_*, podsapi_kube_api_stalled_*). Default:
	// counted, registered nowhere.
	Registerer prometheus.Registerer
}

// connNames names the metrics of the door's connections and stalls.
var connNames = httpguard.MetricNames{
	Prefix: "podsapi_kube_api", What: "podsapi's Kubernetes API (--kube-api-address, --kube-api-socket)",
	ConnFlag: "its 1,024 connections per listener", StallFlag: "its 30 s write timeout",
}

// Server is the door's listeners.
type Server struct {
	cfg     Config
	tcp     net.Listener // nil: none
	unix    net.Listener // nil: none
	serving *reloaded[*tls.Certificate]
	stall   *httpguard.StallGuard // nil: no write timeout
}

// Listen opens the listeners cfg names (at least one) and loads the
// serving certificate, so that their errors come before Serve.
func Listen(cfg Config) (*Server, error) {
	if cfg.ReadHeaderTimeout == 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.UnauthenticatedGrace == 0 {
		cfg.UnauthenticatedGrace = DefaultUnauthenticatedGrace
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Address == "" && cfg.Socket == "" {
		return nil, errors.New("neither an address nor a socket to serve the Kubernetes API on")
	}
	s := &Server{cfg: cfg}
	var opts []httpguard.ListenerOption
	if cfg.WriteTimeout > 0 {
		s.stall = httpguard.NewStallGuard(cfg.WriteTimeout, connNames, cfg.Registerer, cfg.Logger)
		opts = append(opts, httpguard.WithStallGuard(s.stall))
	}
	// Both listeners count their connections in the same metrics.
	conns := httpguard.NewConnMetrics(connNames, cfg.Registerer)
	if cfg.Address != "" {
		if cfg.CertFile == "" || cfg.KeyFile == "" {
			return nil, errors.New("serving the Kubernetes API over HTTPS needs a certificate and its key")
		}
		var err error
		s.serving, err = newReloaded(parseKeyPair, cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		ln, err := net.Listen("tcp", cfg.Address)
		if err != nil {
			return nil, err
		}
		s.tcp = httpguard.NewListener(ln, cfg.MaxConnections, conns, "the Kubernetes API (HTTPS)", cfg.Logger, opts...)
	}
	if cfg.Socket != "" {
		ln, err := socket.Listen(cfg.Socket, cfg.SocketOptions...)
		if err != nil {
			if s.tcp != nil {
				_ = s.tcp.Close()
			}
			return nil, err
		}
		s.unix = httpguard.NewListener(ln, cfg.MaxConnections, conns, "the Kubernetes API (socket)", cfg.Logger, opts...)
	}
	return s, nil
}

// Addr returns the address of the HTTPS listener, or nil.
func (s *Server) Addr() net.Addr {
	if s.tcp == nil {
		return nil
	}
	return s.tcp.Addr()
}

// Close closes the listeners of a Server that will not Serve (Serve closes
// them itself), and removes the socket file.
func (s *Server) Close() {
	for _, l := range []net.Listener{s.tcp, s.unix} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// Serve serves h on the listeners until ctx is done, then shuts down
// gracefully within the shutdown timeout, and closes the listeners.
func (s *Server) Serve(ctx context.Context, h http.Handler) error {
	// Requests are children of base: cancelling it ends the watches and
	// upgraded connections, which a graceful shutdown would wait for.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	var servers []*http.Server
	errs := make(chan error, 2)
	if s.stall != nil {
		h = s.stall.Wrap(h)
		stop := make(chan struct{})
		reaped := make(chan struct{})
		go func() { defer close(reaped); s.stall.Run(stop) }()
		defer func() { close(stop); <-reaped }()
	}
	h = httpguard.Track(h, httpguard.RequestTimeouts{Body: max(s.cfg.BodyTimeout, 0), Tail: max(s.cfg.WriteTimeout, 0)})
	base = withGrace(base, s.cfg.UnauthenticatedGrace)
	newServer := func() *http.Server {
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
			IdleTimeout:       s.cfg.IdleTimeout,
			MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
			HTTP2: &http.HTTP2Config{
				MaxConcurrentStreams: s.cfg.MaxStreams,
				// No WriteByteTimeout: the stall guard closes a connection
				// whose writes stay blocked.
			},
			BaseContext: func(net.Listener) context.Context { return base },
			ConnContext: httpguard.WithConn,
			ErrorLog:    slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		}
		servers = append(servers, srv)
		return srv
	}
	if s.tcp != nil {
		srv := newServer()
		srv.TLSConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			NextProtos:     []string{"h2", "http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.serving.get(), nil },
		}
		if s.cfg.ClientCertificates {
			srv.TLSConfig.ClientAuth = tls.RequestClientCert
		}
		go func() { errs <- srv.ServeTLS(s.tcp, "", "") }()
	}
	if s.unix != nil {
		srv := newServer()
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			return peerContext(httpguard.WithConn(ctx, c), c)
		}
		go func() { errs <- srv.Serve(s.unix) }()
	}
	var err error
	pending := len(servers)
	select {
	case <-ctx.Done():
	case err = <-errs: // A listener failed: stop the other.
		pending--
	}
	s.shutdown(servers, cancelBase)
	// Each Serve has closed its listener (and removed the socket file) when
	// it returns.
	for ; pending > 0; pending-- {
		<-errs
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// shutdown stops servers gracefully: new connections are refused at once,
// requests have half the shutdown timeout to end, then watches and
// upgraded connections are ended (cancel), and whatever is left is closed
// when the timeout has passed.
func (s *Server) shutdown(servers []*http.Server, cancel context.CancelFunc) {
	ctx, stop := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer stop()
	drain := time.AfterFunc(s.cfg.ShutdownTimeout/2, cancel)
	defer drain.Stop()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			if srv.Shutdown(ctx) != nil {
				_ = srv.Close()
			}
		})
	}
	wg.Wait()
}

// parseKeyPair parses a serving certificate and its key.
func parseKeyPair(data [][]byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(data[0], data[1])
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// peerContext gives the requests of a UNIX-socket connection its peer, as
// the kernel describes it (SO_PEERCRED): the door allows the peers its
// policy allows, with no credentials.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	p := &guard.Peer{}
	if cred, err := socket.PeerCred(unwrapConn(c)); err == nil {
		p.Known, p.PID, p.UID, p.GID, p.Groups = true, cred.PID, cred.UID, cred.GID, cred.Groups
	}
	return guard.WithPeer(ctx, p)
}

// unwrapConn returns the socket connection below the listener's.
func unwrapConn(c net.Conn) net.Conn {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = u.NetConn()
	}
}
