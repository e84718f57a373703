// Package childproc runs this binary again as a child process in a role (a
// server under measurement, a load generator), for the harnesses of
// test/cmd/bench and test/cmd/stress, reads the child's resources from
// /proc, and builds podsapi's programs for the tests that run them.
//
// The parent starts a child with Start, talks to it on its stdin and reads
// its stdout line by line (Next, Expect), and ends it with Wait after
// CloseStdin or Signal, or with Kill. The child finds its role with Role,
// first thing in main or TestMain. Every wait is bounded: by a context, or
// by a timeout after which the child is killed.
//
// Build builds a program as the image does (static, paths trimmed), so that
// a test runs the binary that ships and a run compiles its packages once.
package childproc
