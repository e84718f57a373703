# The podsapi image, for people who build with Docker (BuildKit):
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/podsapi/podsapi:0.1.0 .
#
# It builds what `make image` builds without a container engine (static
# podsapi-server, podsctl and podsapi-conformance on an empty base, the server as entry point,
# the same labels); `make image` is the build that CI runs and checks. This
# file is not built in CI (no Docker engine there); go test ./deploy checks
# that it keeps the entry point, files, labels and version of make image.

# The build stage runs on the build machine and cross-compiles.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false -ldflags='-s -w' -o /out/ ./cmd/podsapi-server ./cmd/podsctl ./cmd/podsapi-conformance

# Nothing but the three binaries. The server runs as root: its socket is
# root-only, like the kubelet's (see deploy/base/daemonset.yaml).
FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title=podsapi \
      org.opencontainers.image.description="podsapi-server, podsctl and podsapi-conformance: the Kubelet Pods API on a node-local UNIX socket" \
      org.opencontainers.image.source=https://github.com/podsapi/podsapi \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /out/podsapi-server /podsapi-server
COPY --from=build /out/podsctl /podsctl
COPY --from=build /out/podsapi-conformance /podsapi-conformance
ENTRYPOINT ["/podsapi-server"]
