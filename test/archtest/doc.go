// Package archtest checks the import rules of docs/architecture.md: which
// packages of the module each package must never import, and which heavy
// dependency trees podsapi-server, which runs on every node, must never
// link (TestServerWeight).
package archtest
