#!/usr/bin/env bash
# Runs the engine benchmark on the GPU host and writes a Markdown report.
#
# usage: bench/engine/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
#   BUNDLE_OR_BUILD_BIN_DIR: a bundle (.bundle, holding bin/engine_bench) or a directory holding
#   engine_bench itself (build/bin); default: the first of .bundle, build/bin.
# env: OUT (default ./bench-out) receives engine_bench.out and engine-h200.md;
#      GPUPIPE_COMMIT names the commit where git cannot (the device copy has no .git);
#      ENGINE_BENCH_ARGS: extra arguments (e.g. --probes 200).
# Under a minute of device time on an H200; the targets table is printed last.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bin=$(bench_find_binary engine_bench "${1:-}") || exit 1
echo "run.sh: $bin, output in $OUT" >&2

bench_write_meta "$OUT/engine-meta.json" "$bin"

start=$SECONDS
# shellcheck disable=SC2086
timeout 170 "$bin" ${ENGINE_BENCH_ARGS:-} > "$OUT/engine_bench.out" 2> "$OUT/engine_bench.stderr"
echo "run.sh: engine_bench exit $? after $((SECONDS - start)) s" >&2
tail -5 "$OUT/engine_bench.stderr" >&2
echo
python3 "$here/report.py" "$OUT"
