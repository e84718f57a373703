package kubelethttp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/internal/retry"
	"github.com/podsapi/podsapi/source/internal/sourcelog"
	"github.com/podsapi/podsapi/source/internal/sourcemetrics"
)

// Source polls the kubelet's /pods endpoint. Make one with New and start it
// with Run.
type Source struct {
	options
	urlErr  error // The URL and the host do not make a URL.
	log     *slog.Logger
	warn    *sourcelog.Warner // The upstream's faults, rate-limited.
	metrics *sourcemetrics.Metrics
}

// New returns a Source configured by opts. It registers the Source's
// metrics if WithRegisterer is given, and panics if that registerer holds a
// different metric of the same name.
func New(opts ...Option) *Source {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxBody <= 0 {
		o.maxBody = budget.Share(budget.Limit(), MaxBodyShare, MinMaxBodyBytes, DefaultMaxBodyBytes)
	}
	s := &Source{options: o, metrics: newMetrics(o.Registerer)}
	s.url, s.urlErr = resolveURL(o.url, o.host)
	s.log = o.Logger.With("source", s.Name())
	s.warn = sourcelog.New(s.log)
	return s
}

// Name returns "kubelet-http:" followed by the URL, to tell the Source
// apart in logs.
func (s *Source) Name() string {
	return "kubelet-http:" + s.url
}

// Run polls the kubelet and sends its pods to sink, calling
// sink.MarkSynced after the first successful poll, until ctx is cancelled;
// see the package documentation. It calls sink from its own goroutine only
// and assumes sink starts without any of this Source's pods.
//
// Run returns nil when ctx is cancelled. It returns an error, at once, only
// for a configuration that cannot work: a URL that is not http or https, a
// CA file or client certificate that cannot be loaded. A kubelet that does
// not answer is retried forever: until the first successful poll the sink
// stays unsynced, afterwards it keeps the last known pods.
func (s *Source) Run(ctx context.Context, sink Sink) error {
	if s.urlErr != nil {
		return s.urlErr
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return fmt.Errorf("kubelethttp: the kubelet URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("kubelethttp: the kubelet URL %q is not an http or https URL", s.url)
	}
	client, err := s.newClient()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	if s.insecureSkipVerify && u.Scheme == "https" {
		s.log.Warn("not verifying the kubelet's serving certificate (insecure-skip-verify)")
	}

	st := newState(s, sink)
	bo := retry.NewBackoff(s.MinBackoff, s.MaxBackoff)
	for {
		pods, perr := s.fetch(ctx, client)
		if ctx.Err() != nil {
			return nil
		}
		wait := s.interval
		if perr != nil {
			st.fail(perr)
			wait = bo.Next()
		} else {
			bo.Reset()
			s.metrics.Success(time.Now())
			st.apply(pods)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// resolveURL returns rawURL with its host replaced by host (see WithHost),
// or rawURL itself when host is empty.
func resolveURL(rawURL, host string) (string, error) {
	if host == "" {
		return rawURL, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL, fmt.Errorf("kubelethttp: the kubelet URL: %w", err)
	}
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if h == "" || strings.ContainsAny(h, "/?#@[] ") {
		return rawURL, fmt.Errorf("kubelethttp: the kubelet host %q is not a host name or an IP address", host)
	}
	if port := u.Port(); port != "" {
		u.Host = net.JoinHostPort(h, port)
	} else if strings.Contains(h, ":") {
		u.Host = "[" + h + "]"
	} else {
		u.Host = h
	}
	return u.String(), nil
}
