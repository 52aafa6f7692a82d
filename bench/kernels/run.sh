#!/usr/bin/env bash
# Runs the kernels benchmark on the GPU host and writes a Markdown report.
#
# usage: bench/kernels/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
#   BUNDLE_OR_BUILD_BIN_DIR: a bundle (.bundle, holding bin/kernels_bench) or a directory holding
#   kernels_bench itself (build/bin); default: the first of .bundle, build/bin, build-bench/bin.
# env: OUT (default ./bench-out) receives every raw output and kernels-h200.md;
#      GPUPIPE_COMMIT names the commit where git cannot (the device copy has no .git);
#      KERNELS_BENCH_ARGS, TORCH_PEERS_ARGS: extra arguments (e.g. --reps 100, --cases softmax;
#      kernels_bench also --only sum,topk (ops), --dtypes float32,float16, --sweep-reps 20).
#
# Steps: kernels_bench (our kernels in every staging strategy, CUB and cudaMemcpy peers on the
# float32 2^28 cases, then the float64 / float16 / int32 sweep on 2^26 elements; writes samples
# of its float32 outputs), torch_peers.py (PyTorch on the same input, checked against those
# samples), cuobjdump --dump-resource-usage of kernels_bench (registers, stack, local memory of
# our kernels), report.py (kernels-h200.md with the tree's hand-written sections after the
# measured ones, auto-staging.json), then make_staging_table.py on a
# copy of kernels/cuda/tuning/staging_table.h ($OUT/staging_table.h: the `auto` table as this
# run measured it, to review and copy into the tree). About a minute and a half of device time;
# the timeouts keep the whole run under 4 minutes.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT/samples"
OUT=$(cd "$OUT" && pwd)

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bin=$(bench_find_binary kernels_bench "${1:-}") || exit 1
echo "run.sh: $bin, output in $OUT" >&2

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
bench_write_meta "$OUT/meta.json" "$bin"

start=$SECONDS
echo "run.sh: kernels_bench ..." >&2
# shellcheck disable=SC2086
timeout 140 "$bin" --samples "$OUT/samples" ${KERNELS_BENCH_ARGS:-} \
    > "$OUT/kernels_bench.jsonl" 2> "$OUT/kernels_bench.stderr"
echo "run.sh: kernels_bench exit $? after $((SECONDS - start)) s" >&2

echo "run.sh: torch_peers.py ..." >&2
t=$SECONDS
# shellcheck disable=SC2086
timeout 90 python3 "$here/torch_peers.py" --samples "$OUT/samples" ${TORCH_PEERS_ARGS:-} \
    > "$OUT/torch_peers.jsonl" 2> "$OUT/torch_peers.stderr"
echo "run.sh: torch_peers exit $? after $((SECONDS - t)) s; total $((SECONDS - start)) s" >&2

cuobjdump_bin=$(command -v cuobjdump || true)
[ -z "$cuobjdump_bin" ] && [ -x /usr/local/cuda/bin/cuobjdump ] && cuobjdump_bin=/usr/local/cuda/bin/cuobjdump
if [ -n "$cuobjdump_bin" ]; then
  "$cuobjdump_bin" --dump-resource-usage "$bin" > "$OUT/resource-usage.txt" 2> "$OUT/cuobjdump.stderr"
  echo "run.sh: cuobjdump exit $?" >&2
else
  echo "cuobjdump not found" > "$OUT/cuobjdump.stderr"
fi

# kernels_bench's own table stays in $OUT/kernels_bench.stderr; the targets table ends the output.
tail -3 "$OUT/kernels_bench.stderr" "$OUT/torch_peers.stderr" 2>/dev/null | grep -v '^$' >&2
echo
python3 "$here/report.py" "$OUT" --keep-notes "$repo/bench/results/kernels-h200.md"

# The `auto` staging table as this run measured it (the tree's header is left alone).
if [ -f "$OUT/auto-staging.json" ] && [ -f "$repo/kernels/cuda/tuning/staging_table.h" ]; then
  cp "$repo/kernels/cuda/tuning/staging_table.h" "$OUT/staging_table.h"
  chmod u+w "$OUT/staging_table.h"
  python3 "$here/make_staging_table.py" "$OUT/auto-staging.json" --header "$OUT/staging_table.h" \
      > "$OUT/make_staging_table.txt" 2>&1
  echo "make_staging_table.py exit $?: $OUT/staging_table.h (see $OUT/make_staging_table.txt)"
fi
