// Package docscheck runs the shell blocks of the README and of docs/ as
// written, against a temporary podsapi-server serving the example pods, so
// that every command the documentation shows keeps working (make
// docs-check; CI runs it). Its tests are the whole package.
//
// Every ```sh block of README.md and docs/*.md runs with bash -e -o
// pipefail from the repository's root, with the commands of this checkout
// (make build's podsapi-server, podsapi-conformance and podsctl, and the
// pinned grpcurl) first on PATH, and the default socket path
// /var/lib/kubelet/pods-api/pods-api.sock replaced with the temporary
// server's socket (also PODSAPI_SOCKET). A ```console block is a session:
// each "$ " line runs likewise and its output must be the lines after it
// (ages, which depend on the day, are compared as "<age>"). The blocks that
// cannot run here (a cluster, a long benchmark, make test itself) are
// listed, each with its reason, in skips; a listed block that no longer
// exists fails the check, so that the list stays current. As root, each
// block runs in a mount namespace of its own where all but the checkout, a
// temporary directory and the caches is read-only, so that a block which
// would change the system fails instead (TestConfined).
//
// Two checks need no server of their own and run in make test too:
// TestLinks (every relative link of the repository's Markdown resolves,
// #anchors included) and TestSnippetsSelectExamplePods (every pod selection
// the README and docs/ show, podsctl's or the Go client's, selects at least
// one pod of examples/manifests, through the real client).
package docscheck
