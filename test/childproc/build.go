package childproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Build builds the main package pkg (an import path, or a path relative to
// dir) into the file out, in dir ("" for the current directory), as make
// image-bin builds the image's programs: static (CGO_ENABLED=0) and with
// the paths trimmed (-trimpath). Every build of podsapi's programs that is
// not a race build does the same (the Makefile's STATIC), so that the
// binary a test runs is the one the image ships and its compiled packages
// are the image's: a cold run compiles them once. Its error carries the go
// command's output.
func Build(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
