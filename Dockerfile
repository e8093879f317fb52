# mirai: build on the Rust image, run on slim Debian. The container starts as
# root only long enough for docker/entrypoint.sh to choose the service user;
# mirai itself then runs as that user with no capabilities.

FROM rust:1.95-bookworm AS build
# git2's https and ssh transports link the system's OpenSSL and libssh2
# (.cargo/config.toml makes libssh2-sys use pkg-config instead of a vendored copy).
RUN apt-get update \
    && apt-get install -y --no-install-recommends pkg-config libssl-dev libssh2-1-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, in their own layer: the manifest and lock file with an
# empty main, lib and one empty file per declared test, bench and example
# target (cargo wants them all to exist). A change to mirai's own code reuses
# this layer and compiles only the mirai crate.
COPY Cargo.toml Cargo.lock ./
COPY .cargo ./.cargo
RUN set -eu; \
    mkdir -p src; echo 'fn main() {}' > src/main.rs; : > src/lib.rs; \
    awk -F'"' ' \
      function flush() { \
        if (kind == "") return; \
        if (path == "") path = (kind == "bench" ? "benches/" : kind == "test" ? "tests/" : "examples/") name ".rs"; \
        print path; kind = "" } \
      /^\[\[(test|bench|example)\]\]/ { flush(); kind = $0; gsub(/[][]/, "", kind); name = ""; path = ""; next } \
      /^\[/ { flush(); next } \
      kind != "" && /^name *=/ { name = $2 } \
      kind != "" && /^path *=/ { path = $2 } \
      END { flush() }' Cargo.toml \
    | while read -r stub; do mkdir -p "$(dirname "$stub")"; echo 'fn main() {}' > "$stub"; done; \
    cargo build --release --locked --bin mirai; \
    rm -rf src spec benches guest tests examples
COPY src ./src
COPY spec ./spec
COPY benches ./benches
# The web page's static files, embedded by src/http/ui.rs.
COPY ui ./ui
# The sandbox's JavaScript engine, prebuilt and committed (guest/build.sh):
# the image needs no WebAssembly toolchain.
COPY guest ./guest
# COPY keeps the sources' own (older) mtimes: touch the crate roots so cargo
# rebuilds mirai instead of trusting the empty stubs' fingerprints.
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin mirai

FROM debian:bookworm-slim
# curl for the HEALTHCHECK; setpriv (util-linux) is already in the base image;
# libssl3 and libssh2-1 for git2's https and ssh transports (linked dynamically).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl libssl3 libssh2-1 \
    && rm -rf /var/lib/apt/lists/*
# /notes is mounted from the host and owned by whoever owns it there; when
# MIRAI_UID names another user, libgit2's repository-owner check must still
# accept it (libgit2 reads safe.directory from /etc/gitconfig; nothing else is
# trusted). HOME and the module cache belong to the service user, chosen at start.
RUN printf '[safe]\n\tdirectory = /notes\n' > /etc/gitconfig \
    && mkdir -p /notes /home/mirai /var/cache/mirai \
    && chmod 0700 /var/cache/mirai
COPY --from=build /src/target/release/mirai /usr/local/bin/mirai
COPY docker/entrypoint.sh /usr/local/bin/mirai-entrypoint
ENV NOTES_ROOT=/notes \
    HOST=0.0.0.0 \
    PORT=4567 \
    HOME=/home/mirai \
    MIRAI_CACHE_DIR=/var/cache/mirai \
    RUST_LOG=info
WORKDIR /notes
EXPOSE 4567
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD curl -fsS http://127.0.0.1:4567/health || exit 1
ENTRYPOINT ["/usr/local/bin/mirai-entrypoint"]
CMD ["serve"]
