package realkubelet_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/podsapi/podsapi/conformance"
	"github.com/podsapi/podsapi/test/realkubelet"
)

// TestConformance runs the whole suite against a real kubelet, on its own
// wire, with its profile (conformance/features/kubelet-v1.37.yaml): its
// static pod directory as the driver, its restart as the lifecycle, its
// read-only port's /metrics. Every case applicable to the profile passes
// or is in kubelet-v1.37.known-failing, with the evidence.
func TestConformance(t *testing.T) {
	k := start(t, realkubelet.Options{})
	f, err := conformance.LoadFeatures(filepath.Join(repoRoot, "conformance/features/kubelet-v1.37.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := conformance.Config{
		Endpoint:    "unix://" + k.Socket,
		Wire:        conformance.WireKubelet,
		ManifestDir: k.ManifestDir,
		Lifecycle:   k.Lifecycle(),
		MetricsURL:  k.ReadOnlyURL + "/metrics",
		// The runner's default timeouts, as the documented command of
		// docs/conformance.md runs: the features file carries the longer
		// ones a kubelet needs (caseTimeout, startTimeout).
		Features:     f.WithNodeName(k.NodeName),
		RerunCommand: "CONFORMANCE_RUN=... make conformance-kubelet",
		Log:          os.Stderr,
		Verbose:      testing.Verbose(),
	}
	cfg.KnownFailing, cfg.KnownIntermittent, err = conformance.ReadKnownFailing(filepath.Join(repoRoot, "conformance/features/kubelet-v1.37.known-failing"))
	if err != nil {
		t.Fatal(err)
	}
	if r := os.Getenv("CONFORMANCE_RUN"); r != "" {
		cfg.Run = regexp.MustCompile(r)
	}
	conformance.Run(t, cfg)
}
