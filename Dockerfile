# syntax=docker/dockerfile:1
# Sprout's image: a static binary on distroless, run as a non-root user.
# Build it with `make image` (IMAGE=<registry>/sprout:<tag> to name it).

# The builder runs on the build machine's platform and cross-compiles: the
# binary is pure Go, so CGO is off and any TARGETARCH builds without
# emulation. go-git speaks HTTPS and SSH itself; only file:// Git URLs run
# the git-upload-pack binary, which this image does not have (in a cluster,
# mount the folder and use --policy-dir instead). The flags are the
# Makefile's SPROUT_BUILD_FLAGS.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ENV GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/sprout ./cmd/sprout

# No shell, no package manager, CA certificates for HTTPS Git remotes.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/sprout /sprout
# The nonroot user of distroless, by number, so runAsNonRoot can check it.
USER 65532:65532
ENTRYPOINT ["/sprout"]
CMD ["run"]
