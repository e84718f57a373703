// Package otel runs the OpenTelemetry collector's k8sattributes processor
// (opentelemetry-collector-contrib's processor/k8sattributesprocessor),
// unchanged and configured from YAML as its users configure it, against a
// real kube-apiserver directly and through podsapi's front door in the
// same test, and compares what it adds to the same spans.
//
// It holds tests only: see k8sattributes_test.go and docs/integrations.md.
package otel
