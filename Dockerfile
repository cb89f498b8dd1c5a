# syntax=docker/dockerfile:1
# Sprout's image: a static binary on distroless, run as a non-root user.
# Build it with `make image` (IMAGE=<registry>/sprout:<tag> to name it).

# The builder runs on the build machine's platform and cross-compiles: the
# binary is pure Go, so CGO is off and any TARGETARCH builds without
# emulation. go-git speaks HTTPS and SSH itself; only file:// Git URLs run
# the git-upload-pack binary, which this image does not have (in a cluster,
# mount the folder and use --policy-dir instead). The flags are the
# Makefile's SPROUT_BUILD_FLAGS, with the stamp `sprout version` prints:
# `make image` passes VERSION, COMMIT and DATE. The stamp replaces Go's VCS
# stamp, which a build from a copied tree may not have (-buildvcs=false).
# `make release` builds the release image without Docker, on an empty base
# with the same user, entrypoint and command (docs/decisions.md).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT
ARG DATE
ENV GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.date=$DATE" \
      -o /out/sprout ./cmd/sprout

# No shell, no package manager, CA certificates for HTTPS Git remotes.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/sprout /sprout
# The nonroot user of distroless, by number, so runAsNonRoot can check it.
USER 65532:65532
ENTRYPOINT ["/sprout"]
CMD ["run"]
