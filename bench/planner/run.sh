#!/usr/bin/env bash
# Runs the planner benchmark on the GPU host and writes a Markdown report.
#
# usage: bench/planner/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
#   BUNDLE_OR_BUILD_BIN_DIR: a bundle (.bundle, holding bin/planner_bench) or a directory holding
#   planner_bench itself (build/bin); default: the first of .bundle, build/bin, build-bench/bin.
# env: OUT (default ./bench-out) receives every raw output and planner-h200.md;
#      GPUPIPE_COMMIT names the commit where git cannot (the device copy has no .git);
#      PLANNER_BENCH_ARGS, TORCH_PEERS_ARGS: extra arguments (e.g. --reps 100).
#
# Steps: planner_bench (every case and mode), planner_bench --isolated under Nsight Compute
# (the chain's kernels' own durations), torch_peers.py, then report.py. About a minute of
# device time; the targets table is printed last.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bin=$(bench_find_binary planner_bench "${1:-}") || exit 1
echo "run.sh: $bin, output in $OUT" >&2

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
bench_write_meta "$OUT/meta.json" "$bin"

start=$SECONDS
echo "run.sh: planner_bench ..." >&2
# shellcheck disable=SC2086
"$bin" ${PLANNER_BENCH_ARGS:-} > "$OUT/planner_bench.out" 2> "$OUT/planner_bench.stderr"
echo "run.sh: planner_bench exit $? after $((SECONDS - start)) s" >&2

# Nsight Compute times each chain kernel alone. --cache-control none: in the chain each kernel
# reads what the previous one just wrote into L2, and --isolated runs them in that order, so
# flushing caches before each (ncu's default) would time them colder than they run.
ncu_bin=$(command -v ncu || true)
for c in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [ -z "$ncu_bin" ] && [ -x "$c" ] && ncu_bin=$c
done
if [ -n "$ncu_bin" ]; then
  echo "run.sh: $ncu_bin planner_bench --isolated ..." >&2
  t=$SECONDS
  timeout 240 "$ncu_bin" --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum --csv \
      "$bin" --isolated --isolated-json "$OUT/isolated-kernels.json" \
      > "$OUT/ncu.csv" 2> "$OUT/ncu.stderr"
  echo "run.sh: ncu exit $? after $((SECONDS - t)) s" >&2
else
  echo "run.sh: ncu not found; kernel durations fall back to event timing" >&2
  echo "ncu not found" > "$OUT/ncu.stderr"
fi

echo "run.sh: torch_peers.py ..." >&2
t=$SECONDS
# shellcheck disable=SC2086
python3 "$here/torch_peers.py" ${TORCH_PEERS_ARGS:-} > "$OUT/torch_peers.jsonl" 2> "$OUT/torch_peers.stderr"
echo "run.sh: torch_peers exit $? after $((SECONDS - t)) s; total $((SECONDS - start)) s" >&2

# planner_bench's own table stays in $OUT/planner_bench.out; the targets table ends the output.
tail -5 "$OUT/planner_bench.stderr" "$OUT/torch_peers.stderr" 2>/dev/null | grep -v '^$' >&2
echo
python3 "$here/report.py" "$OUT"
