#!/usr/bin/env bash
# Rebuilds guest/mirai-guest.wasm, the pre-initialized JavaScript engine that
# mirai embeds (src/sandbox/). The .wasm is committed (so building mirai needs
# only Rust); run this after changing anything under guest/, and commit the result.
#
#   bash guest/build.sh            rebuild guest/mirai-guest.wasm
#   bash guest/build.sh --check    rebuild into a temp file, fail if it differs
#
# Needs: rustup's wasm32-wasip1 target, and Debian's clang (with llvm-ar) and
# wasi-libc as the C toolchain of rquickjs-sys. Paths and clock are fixed so
# the bytes are the same on every machine with the same toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
committed=guest/mirai-guest.wasm

check=false
if [ "${1:-}" = "--check" ]; then check=true; fi

missing=()
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1 || missing+=("rustup target add wasm32-wasip1")
command -v clang >/dev/null || missing+=("apt-get install clang")
command -v llvm-ar >/dev/null || missing+=("apt-get install llvm (llvm-ar)")
[ -f /usr/include/wasm32-wasi/stdlib.h ] || missing+=("apt-get install wasi-libc")
if [ ${#missing[@]} -gt 0 ]; then
  echo "guest/build.sh: the guest's toolchain is incomplete. Run:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi

work=${MIRAI_GUEST_TARGET_DIR:-${CARGO_TARGET_DIR:-$root/target}/guest}
mkdir -p "$work/sysroot"
# Clang 14 with the wasm32-wasip1 triple does not look in Debian's wasi-libc
# folders on its own; a sysroot of two links points it there.
ln -sfn /usr/include/wasm32-wasi "$work/sysroot/include"
ln -sfn /usr/lib/wasm32-wasi "$work/sysroot/lib"

cargo_home=${CARGO_HOME:-$HOME/.cargo}
# The nested build must not inherit an outer cargo's settings.
clean_env=(env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u RUSTC_WRAPPER -u RUSTC_WORKSPACE_WRAPPER
  -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET -u MAKEFLAGS -u CARGO_MAKEFLAGS)
"${clean_env[@]}" \
  RQUICKJS_SYS_NO_WASI_SDK=1 \
  CC_wasm32_wasip1=clang \
  AR_wasm32_wasip1=llvm-ar \
  CFLAGS_wasm32_wasip1="--sysroot=$work/sysroot -ffile-prefix-map=$work=/build -ffile-prefix-map=$cargo_home=/cargo -ffile-prefix-map=$root=/mirai" \
  CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="--remap-path-prefix=$work=/build --remap-path-prefix=$cargo_home=/cargo --remap-path-prefix=$root=/mirai" \
  cargo build --quiet --locked --release --target wasm32-wasip1 \
    --manifest-path guest/Cargo.toml --target-dir "$work/cargo"

raw="$work/cargo/wasm32-wasip1/release/mirai_guest.wasm"
out=$committed
if $check; then out="$work/mirai-guest.check.wasm"; fi
cargo run --quiet --locked --example guest-preinit -- "$raw" "$out"

if $check; then
  if cmp -s "$out" "$committed"; then
    echo "guest/build.sh: $committed matches its source ($(wc -c <"$committed") bytes)"
  else
    echo "guest/build.sh: $committed differs from a rebuild of guest/ ($(wc -c <"$committed") committed, $(wc -c <"$out") rebuilt)." >&2
    echo "  Run 'bash guest/build.sh' and commit guest/mirai-guest.wasm. Toolchain: $(rustc --version); $(clang --version | head -1)" >&2
    exit 1
  fi
else
  echo "guest/build.sh: wrote $committed ($(wc -c <"$committed") bytes)"
fi
