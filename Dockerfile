# The reconcile-host image: one static binary (x86_64-unknown-linux-musl) on distroless/static,
# running as a non-root user. The binary writes nothing outside the directories the Deployment
# mounts (deploy/base), so the root filesystem can be read-only.
#
#   docker build -t reconcile-host:0.1.0 .
#
# The build stage runs scripts/build-static.sh, the script `make static` runs outside Docker.

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN scripts/build-static.sh

# CA certificates (for API servers outside the cluster), /etc/passwd with `nonroot` (65532), no
# shell, no libc.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/static/reconcile-host /usr/local/bin/reconcile-host
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/reconcile-host"]
CMD ["run"]
