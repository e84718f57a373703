// Package buildinfo is the build information of podsapi's programs: their
// version, stamped by the
// build: by the linker for make build and make image (-X Version=, from git
// describe), else read from the build information the go command records
// (the module version for go install ...@v0.1.0, the commit for a build in a
// checkout).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Header is the response header in which podsapi-server sends its version on
// every response of its socket, so that a client learns it without a call of
// its own (podsctl version reads it from a gRPC health check).
const Header = "X-Podsapi-Version"

// Version is the version the linker stamps:
// -ldflags "-X github.com/podsapi/podsapi/internal/buildinfo.Version=v0.1.0".
// Empty, Get reads the build information instead.
var Version string

// Get returns the version of the running program: Version when stamped, else
// the main module's version from the build information (v0.1.0 for go
// install ...@v0.1.0, a pseudo-version of the commit for a build in a
// checkout), else the commit the go command recorded, else "unknown".
func Get() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo returns the version bi records.
func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case len(rev) > 12:
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "devel-" + rev
}

// String returns the line --version prints for program: its name, version,
// Go version and platform, as in "podsapi-server v0.1.0 (go1.26.0 linux/amd64)".
func String(program string) string {
	return fmt.Sprintf("%s %s (%s %s/%s)", program, Get(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
