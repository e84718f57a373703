// Package spire runs SPIRE agent's k8s workload attestor
// (github.com/spiffe/spire's pkg/agent/plugin/workloadattestor/k8s),
// unchanged and configured with HCL as its users configure it, against a
// kubelet `/pods` served by podsapi's front door and against the same
// node's pods as the API server holds them, and compares the selectors it
// attests a real process of a pod's cgroup with.
//
// It holds tests only: see k8s_test.go and docs/integrations.md.
package spire
