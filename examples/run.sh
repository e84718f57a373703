#!/usr/bin/env bash
# Copyright 2026 The podsapi Authors.
# SPDX-License-Identifier: Apache-2.0
#
# make examples: generate the TypeScript and Python example clients offline
# (local buf plugins only), run each against a temporary podsapi-server on a
# temporary UNIX socket, and check what they print against what the Go client
# (podsctl) lists. Exits non-zero on any failure; every step is bounded in
# time.
#
# What it needs: node (>= 18.14.1) and npm; protoc and grpc_python_plugin;
# /usr/bin/python3 with grpcio and protobuf. Run as root, it installs the
# missing ones from Debian (apt-get); otherwise it says what to install.
# BUF is the buf command (the Makefile passes its own).
set -euo pipefail
cd "$(dirname "$0")/.."

BUF=${BUF:-go tool -modfile=tools/go.mod buf}
# Debian's python3-grpcio and python3-protobuf install for the system Python,
# which is not necessarily the python3 first on PATH (pyenv, venvs).
PYTHON=/usr/bin/python3

step() { printf -- '--- examples: %s\n' "$*"; }
fail() { printf 'examples: FAIL: %s\n' "$*" >&2; exit 1; }

step "checking node, npm, protoc, grpc_python_plugin, $PYTHON with grpcio and protobuf"
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v protoc >/dev/null || missing+=(protobuf-compiler)
command -v grpc_python_plugin >/dev/null || missing+=(protobuf-compiler-grpc)
"$PYTHON" -c 'import grpc' 2>/dev/null || missing+=(python3-grpcio)
"$PYTHON" -c 'import google.protobuf' 2>/dev/null || missing+=(python3-protobuf)
if ((${#missing[@]})); then
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
		step "installing ${missing[*]} (apt-get)"
		timeout 300 apt-get update -q
		DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q "${missing[@]}"
	else
		fail "missing ${missing[*]}: run  sudo apt-get install -y ${missing[*]}  (Debian/Ubuntu), or make examples as root"
	fi
fi
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 18 || (a == 18 && b >= 14) ? 0 : 1)' ||
	fail "node $(node --version) is too old: the TypeScript example needs node >= 18.14.1"
echo "node $(node --version), npm $(npm --version), $(protoc --version), $("$PYTHON" --version)"

step "npm ci (the versions of examples/typescript/package-lock.json)"
(cd examples/typescript && timeout 600 npm ci --no-audit --no-fund)

step "buf generate (local plugins: protoc-gen-es, protoc's python, grpc_python_plugin)"
# Our typed API, and the kubelet's own (v1alpha1.Pods) from its published
# api.proto, which make protodeps copies from the k8s.io/kubelet module.
for lang in typescript python; do
	timeout 600 $BUF generate --template "examples/$lang/buf.gen.yaml" --path proto/kubelet/pods/v1alpha1/pods.proto \
		--path build/proto/k8s.io/kubelet/pkg/apis/pods/v1alpha1/api.proto
done

step "tsc (type-check and compile the TypeScript client)"
(cd examples/typescript && timeout 300 node_modules/.bin/tsc -p .)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/podsapi-examples.XXXXXX")
server_pid=
cleanup() {
	if [[ -n $server_pid ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

step "starting a temporary server on the example manifests"
go build -o "$tmp/podsapi-server" ./cmd/podsapi-server
go build -o "$tmp/podsctl" ./cmd/podsctl
socket=$tmp/pods.sock
"$tmp/podsapi-server" --socket "$socket" --manifest-dir examples/manifests --metrics-address '' \
	--log-level warn 2>"$tmp/server.log" &
server_pid=$!
# Wait until it serves: each probe is bounded (its --timeout), and so is the
# number of probes.
serving=
for _ in $(seq 100); do
	kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; fail "the server exited"; }
	if "$tmp/podsapi-server" probe --socket "$socket" --serving --timeout 2s >/dev/null 2>&1; then
		serving=1
		break
	fi
	sleep 0.1
done
[[ -n $serving ]] || { cat "$tmp/server.log" >&2; fail "the server did not report SERVING"; }

# The pods the Go client sees are the ones each example must print.
mapfile -t names < <(timeout 30 "$tmp/podsctl" list --socket "$socket" -o name | sed 's,.*/,,')
((${#names[@]})) || fail "podsctl lists no pods"
echo "podsctl lists ${#names[@]} pods: ${names[*]}"

# check NAME OUTPUT: the output of one example has a masked ListPods line and
# a WatchPods ADDED line for every pod, then INITIAL_SYNC_COMPLETE.
check() {
	local lang=$1 out=$2 name
	for name in "${names[@]}"; do
		grep -Eq "^list [^ /]+/$name [A-Za-z]+ \(no spec\)$" <<<"$out" ||
			fail "$lang: no masked ListPods line for pod $name"
		grep -Eq "^watch ADDED [^ /]+/$name " <<<"$out" ||
			fail "$lang: no WatchPods ADDED event for pod $name"
	done
	grep -qx "list: ${#names[@]} pods" <<<"$out" || fail "$lang: ListPods did not return ${#names[@]} pods"
	if [[ $lang == python ]]; then
		local sorted
		sorted=$(printf '%s\n' "${names[@]}" | LC_ALL=C sort | xargs)
		grep -qx "kubelet list: ${#names[@]} pods: $sorted" <<<"$out" ||
			fail "$lang: the kubelet wire's ListPods did not return the ${#names[@]} pods $sorted"
	fi
	! grep -q 'spec present' <<<"$out" || fail "$lang: the field mask was not applied"
	[[ $(tail -n 1 <<<"$out") == "watch INITIAL_SYNC_COMPLETE" ]] ||
		fail "$lang: the watch did not end its snapshot with INITIAL_SYNC_COMPLETE"
	echo "$lang: OK (ListPods with a mask: ${#names[@]} pods; WatchPods: snapshot and INITIAL_SYNC_COMPLETE)"
}

step "TypeScript client (connect-node over the UNIX socket)"
out=$(timeout 60 node examples/typescript/dist/src/client.js "$socket") || { printf '%s\n' "$out"; fail "typescript: the client failed"; }
printf '%s\n' "$out"
check typescript "$out"

step "Python client (grpcio over unix:)"
out=$(timeout 60 "$PYTHON" examples/python/client.py "$socket") || { printf '%s\n' "$out"; fail "python: the client failed"; }
printf '%s\n' "$out"
check python "$out"

step "all examples passed"
