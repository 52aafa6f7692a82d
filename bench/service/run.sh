#!/usr/bin/env bash
# Runs the small-job throughput benchmark (metrics and stats on against off) and writes a
# Markdown report. About two minutes with the defaults: 5 repetitions x 2 modes x (daemon
# start, 1 s warm-up, 5 s measured).
#
# usage: bench/service/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
#   BUNDLE_OR_BUILD_BIN_DIR: a bundle (holding bin/small_jobs_bench and bin/gpupiped) or a
#   directory holding them (build/bin); default: the first of .bundle, build/bin, build-bench/bin.
# env: OUT (default ./bench-out) receives small_jobs_bench.out, small_jobs_bench.stderr and
#      service-h200.md; GPUPIPE_COMMIT names the commit where git cannot;
#      SMALL_JOBS_BENCH_ARGS: extra arguments (e.g. --backend cpu --threads 8 --reps 3).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bin=$(bench_find_binary small_jobs_bench "${1:-}") || exit 1
daemon="$(dirname "$bin")/gpupiped"
[ -x "$daemon" ] || { echo "run.sh: no gpupiped beside $bin" >&2; exit 1; }
echo "run.sh: $bin against $daemon, output in $OUT" >&2

bench_write_meta "$OUT/service-meta.json" "$bin"

start=$SECONDS
# shellcheck disable=SC2086
timeout 300 "$bin" --daemon "$daemon" ${SMALL_JOBS_BENCH_ARGS:-} \
  > "$OUT/small_jobs_bench.out" 2> "$OUT/small_jobs_bench.stderr"
echo "run.sh: small_jobs_bench exit $? after $((SECONDS - start)) s" >&2
tail -20 "$OUT/small_jobs_bench.stderr" >&2
python3 "$here/report.py" "$OUT"
