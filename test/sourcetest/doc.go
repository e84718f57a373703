// Package sourcetest holds test helpers shared by the pod sources' tests: a
// Recorder that implements their Sink interface and lets a test wait for the
// state it expects, and FakeKubelet, an in-process fake of the Pods API that
// kubelets serve on their own UNIX socket (package v1alpha1), which a test can
// change pods in, drop streams on and restart.
//
// The helpers wait on channels with timeouts and never sleep, so tests that
// use them are deterministic and bounded.
package sourcetest
