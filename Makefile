# podsapi: the Kubelet Pods API. Run `make help` for the targets.

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

# SOCKET is the UNIX socket `make run` serves on.
SOCKET ?= /var/lib/kubelet/pods-api/pods-api.sock
# MANIFESTS is the static pod manifest directory `make run` serves.
MANIFESTS ?= examples/manifests
# METRICS is the address `make run` serves Prometheus metrics on; empty
# serves none.
METRICS ?= 127.0.0.1:10265
# NODE_NAME is the node `make run` says its pods run on: node-1, that of
# the example manifests (and of the README's sample outputs).
NODE_NAME ?= node-1
# Further flags of make run's server, such as --watch-queue 16 for the
# conformance suite's features file.
SERVER_ARGS ?=

# BUILD_VERSION is the version make build, make run and make image stamp
# on the binaries (--version, podsctl version, the server's
# X-Podsapi-Version header): git describe of the checkout.
BUILD_VERSION ?= $(or $(shell git describe --tags --always --dirty 2>/dev/null),unknown)
LDFLAGS := -X github.com/podsapi/podsapi/internal/buildinfo.Version=$(BUILD_VERSION)
# STATIC, the environment of a go command, builds as the image ships
# podsapi's programs: static (CGO_ENABLED=0) and with the paths trimmed.
# Every build of them that is not a race build uses it, the tests' too
# (test/childproc.Build), and so do the agents' test binaries, which need no
# cgo either: the binaries the checks run are the image's, and a run
# compiles the packages they share once, for the checks and make
# image-bin's linux/amd64 alike.
STATIC := CGO_ENABLED=0 GOFLAGS='-trimpath $(GOFLAGS)'
# STRIP links a binary without its symbol table and DWARF (-s -w), as
# upstream's release builds do (hack/lib/golang.sh unless DBG=1): the
# image's binaries, and those the checks only run (the Kubernetes binaries,
# e2e_node.test, the agents' and the fuzz test binaries). No
# test reads either, and DWARF is about half of a link's time
# (golang/go#26318).
STRIP := -s -w
# PREFIX and DESTDIR are where make install puts the binaries:
# $(DESTDIR)$(PREFIX)/bin.
PREFIX ?= /usr/local
DESTDIR ?=
COMMANDS := podsapi-server podsapi-conformance podsctl
# VET_FLAGS are go vet's build flags: those of make test's go test -race, so
# that vet type-checks against the packages the race build compiles rather
# than compiling every dependency a second time without the race detector
# (on a new machine about a third of make test's compiling).
VET_FLAGS := -race
# in_parallel runs the shell function $(1) once for each word of $(2), side
# by side, and fails when one of them fails, after all have ended: for
# builds that share no compiles (one per platform) or little more than their
# link, whose sequential ends would leave a core idle.
in_parallel = { pids=(); for arg in $(2); do $(1) "$$arg" & pids+=($$!); done; rc=0; \
	for pid in "$${pids[@]}"; do wait "$$pid" || rc=1; done; exit $$rc; }

BUF := go tool -modfile=tools/go.mod buf
K8S_PROTOS := \
	k8s.io/api/core/v1/generated.proto \
	k8s.io/apimachinery/pkg/api/resource/generated.proto \
	k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto \
	k8s.io/apimachinery/pkg/runtime/generated.proto \
	k8s.io/apimachinery/pkg/runtime/schema/generated.proto \
	k8s.io/apimachinery/pkg/util/intstr/generated.proto
# KUBELET_PROTO is the kubelet's own Pods API (v1alpha1.Pods), the wire of
# kubelets with the PodsAPI gate, which podsapi serves too. make protodeps puts
# it at build/proto/$(KUBELET_PROTO), the path other languages generate that
# wire from (examples/ does). Go code uses the kubelet's published package,
# k8s.io/kubelet/pkg/apis/pods/v1alpha1; only its connect stubs are generated,
# from build/kubelet-go/$(KUBELET_PROTO_GO): the path the kubelet compiled it
# under (in the Kubernetes repository), which names the descriptor
# (File_staging_src_..._api_proto) the stubs refer to.
KUBELET_PROTO := k8s.io/kubelet/pkg/apis/pods/v1alpha1/api.proto
KUBELET_PROTO_GO := staging/src/$(KUBELET_PROTO)

.PHONY: help
help: ## Describe the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build podsapi-server, podsapi-conformance and podsctl into bin/, stamped with BUILD_VERSION (git describe).
	$(STATIC) go build -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(COMMANDS))

.PHONY: install
install: build ## Install the three commands into DESTDIR/PREFIX/bin (PREFIX=/usr/local by default, DESTDIR empty).
	install -d '$(DESTDIR)$(PREFIX)/bin'
	install -m 0755 $(addprefix bin/,$(COMMANDS)) '$(DESTDIR)$(PREFIX)/bin/'

.PHONY: run
run: ## Build and run the server on the example manifests (SOCKET=..., MANIFESTS=..., METRICS=..., NODE_NAME=..., SERVER_ARGS=... more flags).
	$(STATIC) go build -ldflags '$(LDFLAGS)' -o bin/podsapi-server ./cmd/podsapi-server
	@# The server names its flags when the socket or the metrics address is
	@# taken; a make user changes the variables instead.
	./bin/podsapi-server --manifest-dir "$(MANIFESTS)" --socket "$(SOCKET)" --metrics-address "$(METRICS)" --node-name "$(NODE_NAME)" $(SERVER_ARGS) || { \
		rc=$$?; [ $$rc -ne 1 ] || echo "make run: if the socket or the metrics address is taken (another make run?), give this one its own:" \
			"make run SOCKET=/tmp/pods-2.sock METRICS=127.0.0.1:10266 (METRICS= serves no metrics)" >&2; exit $$rc; }

.PHONY: test
test: ## Run go vet and every test with the race detector.
	@# go vet runs every analyzer, those go test would run among them.
	go vet $(VET_FLAGS) ./...
	go test -race -vet=off ./...

.PHONY: test-busy
test-busy: ## Run make test twice in a row while two busy loops hold both cores, as on a shared CI machine.
	@pids=""; trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	for i in 1 2; do sh -c 'while :; do :; done' & pids="$$pids $$!"; done; \
	echo "busy loops: $$pids"; \
	$(MAKE) --no-print-directory test && $(MAKE) --no-print-directory test

.PHONY: bench
bench: ## Measure ours against the baselines over real sockets and write docs/benchmarks.md (about 6 minutes).
	$(STATIC) go run ./test/cmd/bench --json docs/bench-results.json --svg docs/bench-list-latency.svg --md docs/benchmarks.md

.PHONY: bench-quick
bench-quick: ## The same measurements with small sizes (about a minute and a half), written to build/.
	@mkdir -p build
	$(STATIC) go run ./test/cmd/bench --quick --json build/bench-results.json --svg build/bench-list-latency.svg --md build/benchmarks.md

.PHONY: bench-ab
bench-ab: ## Measure the tree against BASE (a git revision), interleaved: the bench of each, built apart, run in turn BENCH_AB_ROUNDS times (default 3, about 2 minutes a round on 2 cores), each measurement as new ÷ old with its spread.
	@test -n '$(BASE)' || { echo 'make bench-ab needs BASE=<revision>'; exit 2; }
	$(STATIC) go run ./test/cmd/benchab --base '$(BASE)' --rounds $(or $(BENCH_AB_ROUNDS),3) $(BENCH_AB_ARGS)

.PHONY: bench-kubelet
bench-kubelet: kubelet-tools ## Measure podsapi side by side with a real kubelet (110 static pods, about 3 minutes) into test/bench/kubelet.md, which make bench puts in docs/benchmarks.md.
	PODSAPI_KUBE_BIN="$(KUBELET_BIN)" PODSAPI_BENCH_KUBELET="$(CURDIR)/test/bench/kubelet.md" \
		$(STATIC) go test -count=1 -timeout 20m -run '^TestSideBySide$$' ./test/realkubelet/

.PHONY: bench-nri
bench-nri: kube-bin kubelet-tools ## Measure how long after a container's creation FindPods finds it, with and without NRI, through kubelet-grpc and apiserver in one run on a real node (namespaces of its own; Linux, root; about 3 minutes) into test/bench/nri-window.md, which make bench puts in docs/benchmarks.md.
	PODSAPI_KUBE_BIN='$(KUBE_BIN)' PODSAPI_KUBELET_BIN='$(KUBELET_BIN)' PODSAPI_BENCH_NRI='$(CURDIR)/test/bench/nri-window.md' \
		$(STATIC) go test -count=1 -v -timeout 20m -run '^TestNRIWindow$$' ./test/e2enode

.PHONY: bench-findwait
bench-findwait: ## Measure FindPods that waits against agents polling FindPods every 500 ms and every 50 ms: the answer's delay after the container became known, and the calls made (about 1 minute), into test/bench/findwait.md, which make bench puts in docs/benchmarks.md.
	PODSAPI_BENCH_FINDWAIT='$(CURDIR)/test/bench/findwait.md' \
		$(STATIC) go test -count=1 -v -timeout 10m -run '^TestFindWaitAgainstPolling$$' ./test/bench

.PHONY: bench-micro
bench-micro: ## Run the Go micro-benchmarks of every package.
	$(STATIC) go test -run '^$$' -bench . -benchmem ./...

.PHONY: conformance
conformance: ## Run the conformance suite against our server, started and restarted by the runner, on both wires.
	@mkdir -p build
	$(STATIC) go build -o bin/podsapi-server ./cmd/podsapi-server
	$(STATIC) go run ./cmd/podsapi-conformance \
		--server-cmd 'bin/podsapi-server --socket {socket} --manifest-dir {manifests} --metrics-address {metrics} --watch-queue 16 --log-level warn' \
		--features conformance/features/podsapi-server.yaml --junit build/conformance.xml --json build/conformance.json
	$(STATIC) go run ./cmd/podsapi-conformance --wire kubelet \
		--server-cmd 'bin/podsapi-server --socket {socket} --manifest-dir {manifests} --metrics-address {metrics} --watch-queue 16 --log-level warn' \
		--features conformance/features/podsapi-server-kubelet.yaml --known-failing conformance/features/podsapi-server-kubelet.known-failing \
		--junit build/conformance-kubelet.xml --json build/conformance-kubelet.json

# CACHE is where the targets that build slow, rarely changing binaries keep
# them between runs (make kube-bin, kubelet-tools, e2e-node-bin,
# integrations): a directory per key, so that a change builds them again and
# a warm run only runs them.
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/podsapi

# cache_build is the recipe of a target that builds executables into a
# directory of CACHE: $(call cache_build,DIR,FILES,WHAT,COMMAND) says that DIR
# is up to date when it holds every one of FILES, and otherwise runs COMMAND,
# timed, which builds them into "$$tmp", a new directory beside DIR (mktemp:
# two makes never write into one), renamed to DIR when COMMAND succeeds, so
# that DIR appears whole or not at all.
define cache_build
@dir='$(1)'; ok=1; for f in $(2); do [ -x "$$dir/$$f" ] || ok=; done; \
if [ -n "$$ok" ]; then echo "$(3): cached in $$dir"; else \
	echo "building $(3) into $$dir"; \
	mkdir -p "$$(dirname "$$dir")" && tmp=$$(mktemp -d "$$dir.XXXXXX") && trap 'rm -rf "$$tmp"' EXIT && \
	time ( $(4) ) && rm -rf "$$dir" && mv "$$tmp" "$$dir"; \
fi
endef

# tools/kube is the one module of the Kubernetes binaries the tests run:
# kube-apiserver, kubectl and etcd (make kube-bin), the kubelet and fakecri
# (make kubelet-tools) and upstream's node e2e test binary (make
# e2e-node-bin), so that they share one set of dependency versions
# (k8s.io/kubernetes v1.37.2's own) and the packages they have in common
# compile once per Go build cache.
# KUBE_VERSION is the version of k8s.io/kubernetes that tools/kube pins;
# KUBE_LDFLAGS stamp it on kube-apiserver and kubectl as Kubernetes' own
# builds do (hack/lib/version.sh), so that their /version and `kubectl
# version` say v1.37.2 rather than an unparsable v0.0.0-master.
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2; exit }' tools/kube/go.mod 2>/dev/null)
# KUBE_LDFLAGS stamp make kube-bin's binaries with the version and, as
# upstream's release builds do (hack/lib/golang.sh unless DBG=1), leave out
# the symbol table and DWARF (STRIP). make kubelet-tools and e2e-node-bin
# strip theirs too.
KUBE_LDFLAGS := $(STRIP) $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=$(patsubst v%,%,$(word 1,$(subst ., ,$(KUBE_VERSION)))) \
	-X $(p).gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) -X $(p).gitTreeState=clean)
# KUBE_KEY keys the caches of all three targets: a hash of tools/kube's
# go.mod, go.sum and Go sources and of KUBE_LDFLAGS.
KUBE_KEY := $(shell { cat tools/kube/go.mod tools/kube/go.sum $(sort $(wildcard tools/kube/*/*.go)); echo '$(KUBE_LDFLAGS)'; } 2>/dev/null | sha256sum | cut -c1-16)
# KUBE_BIN is where make kube-bin caches kube-apiserver, etcd and kubectl
# (about 8 minutes cold on 2 cores, seconds warm).
KUBE_BIN ?= $(CACHE)/kube-$(KUBE_KEY)

.PHONY: kube-bin
kube-bin: ## Build kube-apiserver, etcd and kubectl v1.37.2 (tools/kube) once, cached in KUBE_BIN by the hash of tools/kube.
	$(call cache_build,$(KUBE_BIN),kube-apiserver etcd kubectl,kube-apiserver etcd and kubectl,\
		cd tools/kube && go build -ldflags '$(KUBE_LDFLAGS)' -o "$$tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd)

.PHONY: kube-bin-dir
kube-bin-dir: ## Print KUBE_BIN, the directory of make kube-bin's binaries (for PODSAPI_KUBE_BIN=$(make -s kube-bin-dir)).
	@echo '$(KUBE_BIN)'

.PHONY: test-apiserver
test-apiserver: kube-bin ## Run the tests against a real kube-apiserver and etcd (started on loopback by the tests, stopped by PID), and those of an unchanged kubectl v1.37.2.
	PODSAPI_KUBE_BIN='$(KUBE_BIN)' go test -race -vet=off -count=1 -timeout 20m -run 'APIServer|Kubectl' -v ./test/kubetest ./source/apiserver ./kubeapi ./kubeapi/door ./cmd/podsapi-server ./workload

# INTEG_BIN is where make integrations-bin caches podsapi-server and the test
# binaries of the integrations module (go test -c, one per package; without
# the race detector, which make test runs on podsapi's own code: here it
# would only double the compilation of the agents' dependency trees; and
# stripped, STRIP):
# a directory per hash of the Go sources of both modules and of their go.mod
# and go.sum, so that a warm run only runs them. Computed
# when used (a recursive variable), not at every make.
INTEG_KEY = $(shell cat $$(git ls-files '*.go' go.mod go.sum integrations/go.mod integrations/go.sum | LC_ALL=C sort) 2>/dev/null | sha256sum | cut -c1-16)
INTEG_BIN ?= $(CACHE)/integrations-$(INTEG_KEY)
# INTEG_RESULTS is where the tests write the API server's cost they measure,
# which docs/integrations.md embeds.
INTEG_RESULTS ?= $(CURDIR)/integrations/results.md

.PHONY: integrations-bin
integrations-bin: ## Build podsapi-server and the integrations' test binaries (go test -c of every package of integrations/ with tests) once, cached in INTEG_BIN.
	$(call cache_build,$(INTEG_BIN),podsapi-server,podsapi-server and the integrations' test binaries,\
		$(STATIC) go build -o "$$tmp/podsapi-server" ./cmd/podsapi-server && cd integrations && \
		$(STATIC) go test -c -ldflags='$(STRIP)' -o "$$tmp/" $$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...))

.PHONY: integrations
integrations: kube-bin integrations-bin ## Run real agents (integrations/: controller-runtime, the kubelet's Pods API client, ...) against a real API server and podsapi-server, directly and through podsapi; binaries cached in INTEG_BIN.
	@bin='$(INTEG_BIN)'; : > '$(INTEG_RESULTS).tmp'; status=0; \
	for pkg in $$(cd integrations && go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...); do \
		echo "--- $$pkg"; \
		(cd "$$pkg" && PODSAPI_KUBE_BIN='$(KUBE_BIN)' PODSAPI_SERVER_BIN="$$bin/podsapi-server" PODSAPI_INTEG_RESULTS='$(INTEG_RESULTS).tmp' \
			"$$bin/$$(basename $$pkg).test" -test.v -test.count=1 -test.timeout=15m) || status=1; \
	done; \
	if [ $$status = 0 ]; then sort '$(INTEG_RESULTS).tmp' > '$(INTEG_RESULTS)'; fi; rm -f '$(INTEG_RESULTS).tmp'; exit $$status

.PHONY: grpcurl-bin
grpcurl-bin: ## Build the real grpcurl (pinned in tools/grpcurl/go.mod, with the main module's grpc and protobuf) into bin/, as podsapi's programs are built (STATIC), so that it shares their compiled packages.
	$(STATIC) go build -modfile=tools/grpcurl/go.mod -o bin/grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl

.PHONY: test-grpcurl
test-grpcurl: grpcurl-bin ## Run FindPods through the real grpcurl over the socket (issue 22), and health as a denied and an allowed user (issue 36).
	PODSAPI_GRPCURL='$(CURDIR)/bin/grpcurl' go test -race -count=1 -timeout 10m -run 'RealGrpcurl' -v ./server ./service

.PHONY: docs
docs: ## Rewrite the tables of docs/ that the code defines: the flags of docs/server.md, the metrics of docs/metrics.md, the image's files (make test fails when they drift).
	$(STATIC) go test -count=1 -run '^TestDocs' ./cmd/podsapi-server -update

.PHONY: docs-check
docs-check: grpcurl-bin ## Run the shell blocks of the README and docs/ as written against a temporary server, make run twice and make install (test/docscheck; CI runs it).
	PODSAPI_DOCS_CHECK=1 PODSAPI_GRPCURL='$(CURDIR)/bin/grpcurl' $(STATIC) go test -count=1 -timeout 20m -v ./test/docscheck

# BENCH_APISERVER_ARGS sizes make bench-apiserver down, or up: the test's
# flags -apiserver-agents (default 10,50), -apiserver-fleet-nodes (50; 0
# skips the fleet), -apiserver-fleet-agents (4), -apiserver-fleet-pods (4)
# and -apiserver-fleet-updates (500).
BENCH_APISERVER_ARGS ?=

.PHONY: bench-apiserver
bench-apiserver: kube-bin ## Measure the API server's load, 10 and 50 agents direct, through podsapi or through its front door, and a fleet of 50 nodes (BENCH_APISERVER_ARGS sizes it down), into test/bench/apiserver.md (docs/benchmarks.md embeds it; about 4 minutes).
	PODSAPI_KUBE_BIN='$(KUBE_BIN)' $(STATIC) go test -count=1 -timeout 20m -run '^TestAPIServerLoad$$' -v ./test/bench \
		-args -apiserver-load='$(CURDIR)/test/bench/apiserver.md' $(BENCH_APISERVER_ARGS)

# BENCH_NODEVIEW_ARGS sizes make bench-nodeview down, or up: the test's
# flags -nodeview-feeds (direct,full,node), -nodeview-agents (10),
# -nodeview-pods (110), -nodeview-replicasets (2000), -nodeview-churn (100/s),
# -nodeview-churn-duration (10s), -nodeview-big-replicasets (50000; 0 skips),
# -nodeview-fleet-nodes (50; 0 skips), -nodeview-fleet-agents (5),
# -nodeview-fleet-pods (6), -nodeview-fleet-replicasets (500),
# -nodeview-fleet-churn (10/s) and -nodeview-server-args.
BENCH_NODEVIEW_ARGS ?=

.PHONY: bench-nodeview
bench-nodeview: kube-bin ## Measure k8sattributes-like agents directly, through the door's full view and its node view, side by side on a real API server: one node of 10 agents, ReplicaSet churn on other nodes, a metadata informer among 50,000 ReplicaSets, a fleet of 50 nodes x 5 agents (BENCH_NODEVIEW_ARGS sizes it), into test/bench/nodeview.md (docs/benchmarks.md embeds it; about 10 minutes).
	PODSAPI_KUBE_BIN='$(KUBE_BIN)' $(STATIC) go test -count=1 -timeout 40m -run '^TestNodeView$$' -v ./test/bench \
		-args -nodeview='$(CURDIR)/test/bench/nodeview.md' $(BENCH_NODEVIEW_ARGS)

# KUBELET_BIN is where make kubelet-tools caches the kubelet (k8s.io/kubernetes
# v1.37.2 cmd/kubelet) and fakecri, by KUBE_KEY (a cold build takes 5-12
# minutes of both cores, less after make kube-bin, whose packages it shares;
# a warm one a few seconds).
KUBELET_BIN ?= $(CACHE)/kubelet-$(KUBE_KEY)
# CONFORMANCE_RUN, when set, selects the cases of make conformance-kubelet by
# ID (a regular expression).
CONFORMANCE_RUN ?=

.PHONY: kubelet-tools
kubelet-tools: ## Build the real kubelet v1.37.2 and fakecri (upstream's fake CRI on a socket) from tools/kube once, cached in KUBELET_BIN by the hash of tools/kube.
	$(call cache_build,$(KUBELET_BIN),kubelet fakecri,the kubelet and fakecri,\
		cd tools/kube && go build -ldflags '$(STRIP)' -o "$$tmp/" k8s.io/kubernetes/cmd/kubelet ./fakecri)

.PHONY: conformance-kubelet
conformance-kubelet: kubelet-tools ## Judge a real kubelet v1.37.2 (standalone, fake CRI, confined with unshare; Linux, root) with the suite, and podsapi over it through both kubelet sources (CONFORMANCE_RUN=regexp).
	@# In the package's directory, so that go test streams the progress.
	cd test/realkubelet && PODSAPI_KUBE_BIN="$(KUBELET_BIN)" CONFORMANCE_RUN='$(CONFORMANCE_RUN)' \
		$(STATIC) go test -count=1 -timeout 40m

# E2E_NODE_BIN is where make e2e-node-bin caches upstream's node end-to-end
# test binary (k8s.io/kubernetes v1.37.2 test/e2e_node, built unchanged from
# the module cache in tools/kube, whose e2enode package pins its test
# imports), by KUBE_KEY (a cold build takes about 10 minutes of both cores,
# less after make kubelet-tools, whose packages it shares; a warm one
# seconds).
E2E_NODE_BIN ?= $(CACHE)/e2enode-$(KUBE_KEY)

.PHONY: e2e-node-bin
e2e-node-bin: ## Build upstream's node e2e test binary (k8s.io/kubernetes v1.37.2 test/e2e_node, from tools/kube) once, cached in E2E_NODE_BIN by the hash of tools/kube.
	$(call cache_build,$(E2E_NODE_BIN),e2e_node.test,upstream's node e2e test binary,\
		cd tools/kube && go test -c -ldflags '$(STRIP)' -o "$$tmp/e2e_node.test" k8s.io/kubernetes/test/e2e_node)

# E2E_NODE_TARGET, when set, selects the targets of make e2e-node (a
# regular expression over kubelet, podsapi-kubelet-grpc,
# podsapi-kubelet-http and podsapi-apiserver).
E2E_NODE_TARGET ?=

.PHONY: e2e-node
e2e-node: kube-bin kubelet-tools e2e-node-bin ## Run upstream's node e2e "Kubelet Pods API" specs, unchanged, on a real node (kube-apiserver, etcd, a registered kubelet; in namespaces of its own; Linux, root) against the kubelet, then podsapi through each source; output in build/e2e-node (E2E_NODE_TARGET=regexp).
	@mkdir -p build/e2e-node
	@# In the package's directory, so that go test streams the progress.
	cd test/e2enode && PODSAPI_E2E_NODE_BIN='$(E2E_NODE_BIN)' PODSAPI_KUBE_BIN='$(KUBE_BIN)' \
		PODSAPI_KUBELET_BIN='$(KUBELET_BIN)' PODSAPI_E2E_NODE_OUT='$(CURDIR)/build/e2e-node' \
		$(STATIC) go test -count=1 -v -timeout 60m -run '^TestUpstreamPodsAPI$$/$(E2E_NODE_TARGET)'

# SOAK is how long make soak-kubelet keeps podsapi's kubelet-grpc
# connections to a real kubelet open (a duration).
SOAK ?= 1h

.PHONY: soak-kubelet
soak-kubelet: kubelet-tools ## Keep two podsapi-servers on a real kubelet through --source=kubelet-grpc for SOAK (1h): no GOAWAY, no reconnect, and an image change still arrives at the end.
	cd test/realkubelet && PODSAPI_KUBE_BIN="$(KUBELET_BIN)" PODSAPI_SOAK='$(SOAK)' \
		$(STATIC) go test -count=1 -v -timeout 0 -run '^TestKubeletGRPCSoak$$'

# SOAK_DOOR and SOAK_DOOR_INFORMERS are how long make soak-door churns the
# node's pods and how many informers watch them through the door.
SOAK_DOOR ?= 5m
SOAK_DOOR_INFORMERS ?= 20

.PHONY: soak-door
soak-door: kube-bin ## Keep SOAK_DOOR_INFORMERS (20) client-go informers on the front door for SOAK_DOOR (5m) while the node's pods change, without the race detector: one watch each, the events as made, goroutines and RSS flat (docs/benchmarks.md).
	PODSAPI_KUBE_BIN='$(KUBE_BIN)' PODSAPI_SOAK_DOOR='$(SOAK_DOOR)' PODSAPI_SOAK_DOOR_INFORMERS='$(SOAK_DOOR_INFORMERS)' \
		$(STATIC) go test -count=1 -v -timeout 3h -run '^TestDoorAPIServerSoak$$' ./kubeapi/door

# FUZZTIME, when set, is every target's -fuzztime (a duration, or a count such
# as 5000x). Unset, each target runs a count of inputs that takes 30 s or less
# on a 2-core machine: counts, not durations, because Go 1.26's fuzzing
# coordinator can fail a duration-bound run at its deadline with "context
# deadline exceeded" and no failing input (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?=
# FUZZ_TARGETS are make fuzz's targets, PACKAGE:TARGET:COUNT each.
FUZZ_TARGETS := \
	fieldmask:FuzzParse:5000x \
	fieldmask:FuzzProject:10000x \
	fieldmask:FuzzFromHeader:50000x \
	server:FuzzRequest:8000x \
	source/manifest:FuzzDecodeFile:2500x \
	store:FuzzWatchPromise:20000x \
	podcgroup:FuzzParse:50000x \
	podcgroup:FuzzFromRuntime:50000x \
	test/fuzz:FuzzServeHTTP:20000x
FUZZ_PACKAGES := $(sort $(foreach t,$(FUZZ_TARGETS),$(firstword $(subst :, ,$(t)))))
# FUZZ_FIRST is the package of FUZZ_PACKAGES whose instrumented dependencies
# hold nearly all of the others': make fuzz-bin builds it first, then the
# others side by side, which then compile little more than their own package
# and link.
FUZZ_FIRST := source/manifest
# fuzz_bin is the fuzz-instrumented test binary of the package in the shell
# variable pkg, in a recipe.
fuzz_bin = '$(CURDIR)'/build/fuzz/$${pkg//\//_}.test

.PHONY: print-fuzz-packages
print-fuzz-packages: # The packages of make fuzz-bin's binaries, in the order it builds them (for .ci/compiles).
	@echo $(FUZZ_FIRST) $(filter-out $(FUZZ_FIRST),$(FUZZ_PACKAGES))

.PHONY: fuzz-bin
fuzz-bin: ## Build the fuzz-instrumented test binary of each package of FUZZ_TARGETS into build/fuzz (go test -c -fuzz), one for all of the package's targets.
	@mkdir -p build/fuzz && build() { local pkg=$$1; echo "go test -c -fuzz . ./$$pkg"; go test -c -fuzz . -ldflags='$(STRIP)' -o $(fuzz_bin) "./$$pkg"; } && \
		build $(FUZZ_FIRST) && $(call in_parallel,build,$(filter-out $(FUZZ_FIRST),$(FUZZ_PACKAGES)))

.PHONY: fuzz
fuzz: fuzz-bin ## Run each fuzz target for a count of inputs (30 s or less each on a busy 2-core machine), or for FUZZTIME; from make fuzz-bin's binaries, in the package's directory and with the fuzz cache of go test -fuzz.
	@set -e; for t in $(FUZZ_TARGETS); do IFS=: read -r pkg target count <<< "$$t"; \
		echo "fuzz $$target ./$$pkg"; \
		cache="$$(go env GOCACHE)/fuzz/$$(go list "./$$pkg")"; \
		(cd "$$pkg" && $(fuzz_bin) -test.run '^$$' -test.fuzz "^$$target\$$" \
			-test.fuzztime $(or $(FUZZTIME),$$count) -test.fuzzcachedir "$$cache" -test.timeout 10m); \
	done

STRESS_FLAGS ?=
.PHONY: stress
stress: ## Attack a child server (flood, stalled watchers, churn, garbage, lockout, two root clients, snapshot loop, resume herd of 1000, distinct masks, distinct-mask CPU, unread lists) under a 256 MiB limit, a second root client (the victim) served beside each attack: a table, exit 1 on a violated invariant (STRESS_FLAGS=-duration=10s ...).
	$(STATIC) go run ./test/cmd/stress $(STRESS_FLAGS)

.PHONY: examples
examples: protodeps ## Generate the TypeScript and Python example clients, run them against a temporary server, check their output.
	BUF='$(BUF)' examples/run.sh

# copy_protos copies K8S_PROTOS and KUBELET_PROTO, at the versions that the
# go.mod $(1) pins, from the module cache to the directory $(2).
define copy_protos
go mod download -modfile=$(1) k8s.io/api k8s.io/apimachinery k8s.io/kubelet
rm -rf $(2) && set -e; for f in $(K8S_PROTOS) $(KUBELET_PROTO); do \
	mod=$${f%%/pkg/*}; mod=$${mod%%/core/*}; \
	dir=$$(go list -modfile=$(1) -m -f '{{.Dir}}' "$$mod"); \
	install -D -m 0644 "$$dir/$${f#$$mod/}" "$(2)/$$f"; \
done
endef

.PHONY: protodeps
protodeps: ## Copy the Kubernetes .proto files, the kubelet's Pods API among them, from the module cache (versions pinned in go.mod) to build/proto.
	@$(call copy_protos,go.mod,build/proto)
	@rm -rf build/kubelet-go && install -D -m 0644 build/proto/$(KUBELET_PROTO) build/kubelet-go/$(KUBELET_PROTO_GO)

.PHONY: generate
generate: protodeps ## Generate the Go code in gen/ from proto/ with buf and local plugins, and the connect stubs of the kubelet's published package.
	$(BUF) generate --exclude-path build/proto/$(KUBELET_PROTO)
	$(BUF) generate build/kubelet-go --template buf.gen.kubelet.yaml

.PHONY: checkgenerate
checkgenerate: generate ## Fail when gen/ differs from what `make generate` produces.
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
		git status --porcelain -- gen; git diff --stat -- gen; \
		echo "gen/ is stale: run make generate and commit the result" >&2; exit 1; fi

.PHONY: lint
lint: protodeps ## Run gofmt, go vet, buf lint and buf format.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt -w these files:"; echo "$$unformatted"; exit 1; fi
	go vet $(VET_FLAGS) ./...
	$(BUF) lint proto
	$(BUF) format -d --exit-code proto

# TIDY_E lists the modules tidied with -e: integrations/, whose agents'
# own tests import modules the Go module proxy refuses (the collector's
# internal/statusutil v0.164.0, contrib's pkg/semconvtest v0.164.1); tidy
# cannot record those, and no test of ours needs them.
TIDY_E := integrations

.PHONY: mod-download
mod-download: ## Download the modules of every go.mod of the repository (git ls-files '*go.mod') into the module cache, which every later build and go mod tidy reads (.ci/run starts it first, beside the builds).
	@for mod in $$(git ls-files '*go.mod'); do echo "go mod download in $$(dirname "$$mod")"; (cd "$$(dirname "$$mod")" && go mod download) || exit 1; done

.PHONY: tidy-check
tidy-check: ## Fail when go mod tidy would change a go.mod or go.sum of any module of the repository (git ls-files '*go.mod'), without changing them.
	@status=0; for mod in $$(git ls-files '*go.mod'); do dir=$$(dirname "$$mod"); \
		e=; case " $(TIDY_E) " in *" $$dir "*) e=-e;; esac; \
		(cd "$$dir" && go mod tidy $$e -diff >/dev/null 2>&1) || { (cd "$$dir" && go mod tidy $$e -diff); \
		echo "$$dir: go mod tidy $$e changes it: run go mod tidy $$e in $$dir and commit the result" >&2; status=1; }; \
	done; exit $$status

.PHONY: breaking
BREAKING_AGAINST ?= main
breaking: protodeps ## Check proto/ (our API) and the Kubernetes protos, the kubelet's wire among them, for breaking changes against the main branch (BREAKING_AGAINST=ref to change).
	@rm -rf build/against && mkdir -p build/against
	git archive "$(BREAKING_AGAINST)" buf.yaml proto go.mod go.sum | tar -x -C build/against
	@# The Kubernetes protos at the versions the ref's go.mod pins.
	@$(call copy_protos,build/against/go.mod,build/against/build/proto)
	@# Until the kubelet's published api.proto replaced it, proto/v1alpha1/api.proto
	@# was a copy of it (the same package, names and numbers, with our comments):
	@# the ref's published one stands for it.
	rm -rf build/against/proto/v1alpha1
	$(BUF) breaking --against build/against

# VERSION is the version make image stamps on the image; deploy/ names the
# same tag (go test ./deploy checks it).
VERSION ?= 0.1.0
# IMAGE is the reference make image names the image by in its archive.
IMAGE ?= ghcr.io/podsapi/podsapi:$(VERSION)
IMAGE_ARCHIVE := build/podsapi-image.tar
IMAGE_PLATFORMS := linux/amd64 linux/arm64
# REVISION and SOURCE_DATE_EPOCH (every timestamp of the image) come from git.
REVISION ?= $(or $(shell git rev-parse HEAD 2>/dev/null),unknown)
SOURCE_DATE_EPOCH ?= $(or $(shell git log -1 --format=%ct 2>/dev/null),0)
# IMAGE_LICENSES is the SPDX expression of the licenses label: that of
# LICENSE and of the sources' SPDX headers.
IMAGE_LICENSES ?= Apache-2.0

.PHONY: image-bin
image-bin: ## Cross-build the image's binaries (podsapi-server, podsctl, podsapi-conformance; static) for each of IMAGE_PLATFORMS into build/image/OS_ARCH.
	@build() { local p=$$1 d=build/image/$${1/\//_}; echo "go build $$p -> $$d"; \
		GOOS=$${p%%/*} GOARCH=$${p#*/} $(STATIC) go build -ldflags='$(STRIP) $(LDFLAGS)' -o $$d/ ./cmd/podsapi-server ./cmd/podsctl ./cmd/podsapi-conformance; } && \
		$(call in_parallel,build,$(IMAGE_PLATFORMS))

.PHONY: image
image: image-bin ## Build the OCI image archive build/podsapi-image.tar (linux/amd64, linux/arm64; the binaries of make image-bin) offline, without Docker.
	go -C tools run ./imagebuild -ref '$(IMAGE)' -created '$(SOURCE_DATE_EPOCH)' \
		-layout '$(CURDIR)/build/image/oci' -archive '$(CURDIR)/$(IMAGE_ARCHIVE)' \
		-entrypoint /podsapi-server \
		-label org.opencontainers.image.title=podsapi \
		-label 'org.opencontainers.image.description=podsapi-server, podsctl and podsapi-conformance: the Kubelet Pods API on a node-local UNIX socket' \
		-label org.opencontainers.image.source=https://github.com/podsapi/podsapi \
		-label 'org.opencontainers.image.version=$(VERSION)' \
		-label 'org.opencontainers.image.revision=$(REVISION)' \
		-label 'org.opencontainers.image.licenses=$(IMAGE_LICENSES)' \
		$(foreach p,$(IMAGE_PLATFORMS),-platform $(p)='$(CURDIR)/build/image/$(subst /,_,$(p))')
	@ls -l $(IMAGE_ARCHIVE)

# REGISTRY is where make image-push pushes the image of make image, as
# $(REGISTRY)/podsapi:$(VERSION) (REGISTRY=ghcr.io/podsapi publishes it).
REGISTRY ?=
# CRANE_FLAGS are given to crane push (--insecure for a registry over http).
CRANE_FLAGS ?=

.PHONY: image-push
image-push: ## Push the image index of make image (both platforms, the digest make image printed) to REGISTRY=host/path as podsapi:VERSION, with crane (tools/go.mod); credentials as docker login or crane auth login writes them.
	@test -n '$(REGISTRY)' || { echo 'make image-push: set REGISTRY, for example REGISTRY=registry.example/podsapi' >&2; exit 2; }
	@test -f build/image/oci/index.json || { echo 'make image-push: no build/image/oci: run make image first' >&2; exit 2; }
	go tool -modfile=tools/go.mod crane push $(CRANE_FLAGS) build/image/oci '$(REGISTRY)/podsapi:$(VERSION)'
	@echo 'pushed $(REGISTRY)/podsapi:$(VERSION): set it in the images entry of deploy/base/kustomization.yaml (newName: $(REGISTRY)/podsapi, newTag: $(VERSION))'

.PHONY: image-check
image-check: ## Check the archive of make image: platforms, entry point, labels, static binaries, --help and the suite from the layer, make image-push to a loopback registry.
	go -C tools test -count=1 ./imagebuild
	go build -modfile=tools/go.mod -o bin/crane github.com/google/go-containerregistry/cmd/crane
	PODSAPI_IMAGE_ARCHIVE='$(CURDIR)/$(IMAGE_ARCHIVE)' PODSAPI_IMAGE='$(IMAGE)' PODSAPI_IMAGE_REVISION='$(REVISION)' \
		PODSAPI_CRANE='$(CURDIR)/bin/crane' $(STATIC) go test -count=1 -run '^TestImage' -v ./deploy

.PHONY: deploy-check
deploy-check: kube-bin ## Render deploy/ (default, apiserver variant, each component) with kubectl kustomize and have a real kube-apiserver v1.37.2 judge it (server-side dry run, strict field validation), then run the other deploy/ tests (probes against a server that never syncs, the systemd unit).
	PODSAPI_KUBE_BIN='$(KUBE_BIN)' $(STATIC) go test -count=1 -timeout 10m ./deploy

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf bin build
