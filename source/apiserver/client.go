package apiserver

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// coreScheme is the scheme of the Source's requests: the types of core/v1
// only (client-go's kubernetes/scheme would link the types of every API
// group into the server), and its codecs. It is built when a Source first
// asks the API server, not when any podsapi-server starts.
type coreScheme struct {
	codecs         serializer.CodecFactory
	parameterCodec runtime.ParameterCodec
}

var schemeOnce = sync.OnceValue(func() coreScheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	return coreScheme{codecs: serializer.NewCodecFactory(scheme), parameterCodec: runtime.NewParameterCodec(scheme)}
})

// userAgent is the User-Agent of the Source's requests, so that the API
// server's audit log and metrics tell podsapi apart.
const userAgent = "podsapi-server"

// restConfig loads the client configuration: the kubeconfig file, or the
// in-cluster configuration when the path is empty, with the Source's rate
// limit, timeouts, encoding and response bound.
func (s *Source) restConfig() (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if s.kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	}
	if err != nil {
		where := "the in-cluster configuration"
		if s.kubeconfig != "" {
			where = "kubeconfig " + s.kubeconfig
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = schemeOnce().codecs.WithoutConversion()
	cfg.QPS = s.qps
	cfg.Burst = s.burst
	cfg.UserAgent = userAgent
	// Protobuf is what the API server encodes fastest and the smallest.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.WarningHandler = rest.NoWarnings{}
	dialer := &net.Dialer{Timeout: s.dialTimeout, KeepAlive: 30 * time.Second}
	cfg.Dial = dialer.DialContext
	maxBytes := s.maxResponse
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &boundedTransport{next: rt, max: maxBytes} })
	return cfg, nil
}

// boundedTransport bounds the size of the answers to every request but
// watches, whose events client-go's decoder bounds one by one.
type boundedTransport struct {
	next http.RoundTripper
	max  int64
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || isWatch(req) {
		return resp, err
	}
	if resp.ContentLength > t.max {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s %s: the answer has %d bytes, more than the %d allowed", req.Method, req.URL.Path, resp.ContentLength, t.max)
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

// isWatch says whether req is a watch.
func isWatch(req *http.Request) bool {
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return false
}

// boundedBody fails the read that goes beyond max bytes.
type boundedBody struct {
	io.ReadCloser
	left, max int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Read one more byte to tell an answer of exactly max bytes from a
		// longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("the answer is longer than the %d bytes allowed", b.max)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
