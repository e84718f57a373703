//go:build !linux

package manifest

import "os"

// pseudoFileSystem reports whether the open file f is on a kernel pseudo
// file system. Outside Linux it knows none: the size cap still bounds the
// read.
func pseudoFileSystem(*os.File) (string, bool) { return "", false }
