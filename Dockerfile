# mirai: build on the Rust image, run on slim Debian as a non-root user.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY spec ./spec
COPY benches ./benches
# The sandbox's JavaScript engine, prebuilt and committed (guest/build.sh):
# the image needs no WebAssembly toolchain.
COPY guest ./guest
RUN cargo build --release --locked --bin mirai

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*
# The default user; compose may run as the host user instead (MIRAI_UID/MIRAI_GID),
# so a bind-mounted ./notes stays owned by whoever owns it on the host.
RUN groupadd --gid 10001 mirai \
    && useradd --uid 10001 --gid 10001 --home-dir /home/mirai --create-home --shell /usr/sbin/nologin mirai \
    && mkdir -p /notes && chown mirai:mirai /notes
COPY --from=build /src/target/release/mirai /usr/local/bin/mirai
ENV NOTES_ROOT=/notes \
    HOST=0.0.0.0 \
    PORT=4567 \
    HOME=/home/mirai \
    RUST_LOG=info
USER mirai
WORKDIR /notes
EXPOSE 4567
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD curl -fsS http://127.0.0.1:4567/health || exit 1
ENTRYPOINT ["/usr/local/bin/mirai"]
CMD ["serve"]
