#!/usr/bin/env bash
# Runs the RPC benchmark (1 GiB through Run against a plain gRPC echo) and writes a Markdown
# report. Well under two minutes: 4 x 3 streams of 1 GiB over loopback.
#
# usage: bench/rpc/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
#   BUNDLE_OR_BUILD_BIN_DIR: a bundle (holding bin/rpc_bench) or a directory holding rpc_bench
#   itself (build/bin); default: the first of .bundle, build/bin, build-bench/bin.
# env: OUT (default ./bench-out) receives rpc_bench.out, rpc_bench.stderr and rpc-h200.md;
#      GPUPIPE_COMMIT names the commit where git cannot (the device copy has no .git);
#      RPC_BENCH_ARGS: extra arguments (e.g. --bytes 268435456 --reps 5 --backend cpu).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bin=$(bench_find_binary rpc_bench "${1:-}") || exit 1
echo "run.sh: $bin, output in $OUT" >&2

bench_write_meta "$OUT/rpc-meta.json" "$bin"

start=$SECONDS
# shellcheck disable=SC2086
timeout 110 "$bin" ${RPC_BENCH_ARGS:-} > "$OUT/rpc_bench.out" 2> "$OUT/rpc_bench.stderr"
echo "run.sh: rpc_bench exit $? after $((SECONDS - start)) s" >&2
cat "$OUT/rpc_bench.stderr" >&2
python3 "$here/report.py" "$OUT"
