// Package printer prints pods for people, the way kubectl does: tables with
// kubectl's columns and status reasons, Kubernetes JSON and YAML, and names.
package printer
