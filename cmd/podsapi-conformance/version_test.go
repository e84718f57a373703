package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/conformance"
)

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"--version"}, &stdout, &stderr); err != nil {
		t.Fatalf("Run --version: %v\n%s", err, stderr.String())
	}
	if out := stdout.String(); !strings.HasPrefix(out, "podsapi-conformance ") || !strings.HasSuffix(out, ", suite "+conformance.Version+"\n") {
		t.Errorf("--version printed %q", out)
	}
}
