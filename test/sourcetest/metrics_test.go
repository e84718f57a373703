package sourcetest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// TestSourcesShareMetrics checks that sources of both kinds, and several of
// one kind, register into one registry and export their metrics side by
// side.
func TestSourcesShareMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	kubelethttp.New(kubelethttp.WithRegisterer(reg))
	kubeletgrpc.New(kubeletgrpc.WithRegisterer(reg))
	kubeletgrpc.New(kubeletgrpc.WithRegisterer(reg))
	tests := []struct {
		name   string
		labels map[string]string
	}{
		{name: "http request errors", labels: map[string]string{"source": "kubelet-http", "reason": "request"}},
		{name: "http decode errors", labels: map[string]string{"source": "kubelet-http", "reason": "decode"}},
		{name: "grpc connect errors", labels: map[string]string{"source": "kubelet-grpc", "reason": "connect"}},
		{name: "grpc stream errors", labels: map[string]string{"source": "kubelet-grpc", "reason": "stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, ok := sourcetest.MetricValue(t, reg, "podsapi_source_errors_total", tt.labels); !ok || v != 0 {
				t.Errorf("podsapi_source_errors_total%v = %v (exported %v), want 0", tt.labels, v, ok)
			}
		})
	}
}
