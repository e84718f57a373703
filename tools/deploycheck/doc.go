// Package deploycheck renders the kustomizations of deploy/ (the default, the
// API-server variant and each component) with kustomize's own library and
// validates every object offline with kubectl-validate against the OpenAPI
// schemas of the Kubernetes release the project tests with (v1.37.2, read
// from the module cache), then checks what an operator relies on: probes
// that need a synced server, least-privilege RBAC, IPv6-safe arguments.
// `make deploy-check` runs its test.
//
// It is a module of its own, not part of tools/go.mod: kubectl-validate
// v0.0.4, its only release, is built against k8s.io/apiserver v0.30, whose
// CEL and OpenTelemetry dependencies do not build with the newer ones that
// buf pins in tools/go.mod.
package deploycheck
