// Package archtest checks the import rules of docs/architecture.md: which
// packages of the module each package must never import.
package archtest
