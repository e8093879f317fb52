#!/bin/sh
# Peak RSS (VmHWM) of `mirai serve` before and after one 50 MiB raw-body
# files.write, and (REPLACE=1) after a second 50 MiB upload replacing it.
# usage: benches/upload_rss.sh [BINARY] [PORT]   (default: target/debug/mirai, 4701)
# Prints the figures docs/src/attachments.md quotes; needs curl and Linux /proc.
set -e
BIN=${1:-${CARGO_TARGET_DIR:-target}/debug/mirai}; PORT=${2:-4701}
V=$(mktemp -d); head -c $((50*1024*1024)) /dev/urandom > "$V.bin"
MIRAI_ALLOW_ROOT=1 NOTES_ROOT="$V/notes" "$BIN" serve --port "$PORT" >"$V.log" 2>&1 &
PID=$!
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do sleep 0.2; done
sleep 1
echo "idle    $(grep VmHWM /proc/$PID/status)"
send() {
  curl -s -o /dev/null -w "$1 HTTP %{http_code} in %{time_total}s\n" -X POST --data-binary @"$V.bin" \
    -H 'Content-Type: application/pdf' "http://127.0.0.1:$PORT/mcp/files/write?path=big.pdf"
  echo "$1 $(grep VmHWM /proc/$PID/status)"
}
send upload
cmp "$V.bin" "$V/notes/big.pdf" && echo "upload  bytes on disk match"
if [ -n "$REPLACE" ]; then head -c $((50*1024*1024)) /dev/urandom > "$V.bin"; send replace; fi
kill $PID; wait $PID 2>/dev/null || true
rm -rf "$V" "$V.bin" "$V.log"
