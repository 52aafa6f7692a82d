#!/usr/bin/env bash
# Profiles kernels_bench cases on the GPU host: one launch of our kernel and one of its CUB
# peer under Nsight Compute (throughput, warp stalls, instruction mix, shared-memory
# wavefronts), and the SASS of our kernels. For finding what limits a kernel; the timings in
# bench/results/ come from run.sh, not from here (ncu replays each launch many times).
#
# usage: bench/kernels/profile.sh [BUNDLE_OR_BUILD_BIN_DIR]
# env: OUT (default ./profile-out) receives ncu-<case>-<who>.txt and sass.txt.gz;
#      PROFILE_CASES: comma-separated kernels_bench case ids (default: the ops below their
#      copy-limit targets, softmax,standardize,l2normalize,cumsum,topk,convolve);
#      PROFILE_SASS=0 skips the disassembly.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-./profile-out}
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bin=$(bench_find_binary kernels_bench "${1:-}") || exit 1
ncu_bin=$(command -v ncu || true)
[ -z "$ncu_bin" ] && [ -x /usr/local/cuda/bin/ncu ] && ncu_bin=/usr/local/cuda/bin/ncu

# Kernel name patterns: ours, then CUB's (empty: no CUB peer).
ours_of() {
  case $1 in
    histogram) echo HistogramKernel ;;
    convolve) echo 'Convolve(ShortTaps|Tiles)Kernel' ;;
    cumsum) echo '(Streamed)?LookbackKernel' ;;
    softmax | standardize | l2normalize) echo 'RowMultipass[A-Za-z]*Kernel' ;;
    topk) echo 'Topk(Warp|Radix)Kernel' ;;
    sum-row | sum-rows) echo ReduceBlockKernel ;;
    *) echo "$1" ;;
  esac
}
cub_of() {
  case $1 in
    histogram) echo DeviceHistogramSweepKernel ;;
    cumsum) echo DeviceScanKernel ;;
    sum-row) echo 'DeviceReduceKernel' ;;
    sum-rows) echo DeviceSegmentedReduceKernel ;;
    *) echo "" ;;
  esac
}

sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats
          --section InstructionStats --section Occupancy --section LaunchStats)
IFS=, read -r -a cases <<< "${PROFILE_CASES:-softmax,standardize,l2normalize,cumsum,topk,convolve}"
for c in "${cases[@]}"; do
  for who in ours cub; do
    pattern=$("${who}_of" "$c")
    [ -n "$pattern" ] || continue
    [ -n "$ncu_bin" ] || { echo "ncu not found" > "$OUT/ncu-$c-$who.txt"; continue; }
    # Skip the warm-up launch; profile the next one.
    timeout 120 "$ncu_bin" --clock-control none -k "regex:$pattern" --launch-skip 1 \
      --launch-count 1 "${sections[@]}" "$bin" --cases "$c" --dtypes float32 --reps 10 \
      --warmup 1 > "$OUT/ncu-$c-$who.txt" 2>&1
    echo "profile.sh: ncu $c $who exit $?" >&2
  done
done

if [ "${PROFILE_SASS:-1}" != 0 ]; then
  cuobjdump_bin=$(command -v cuobjdump || true)
  [ -z "$cuobjdump_bin" ] && [ -x /usr/local/cuda/bin/cuobjdump ] && cuobjdump_bin=/usr/local/cuda/bin/cuobjdump
  if [ -n "$cuobjdump_bin" ]; then
    # Our kernels only (gpupipe's namespace), compressed: the whole binary's SASS, CUB's
    # included, runs to tens of megabytes.
    "$cuobjdump_bin" --dump-sass "$bin" 2> "$OUT/cuobjdump.stderr" \
      | awk '/Function : / {keep = /gpupipe/} keep' | gzip -9 > "$OUT/sass.txt.gz"
    echo "profile.sh: cuobjdump exit ${PIPESTATUS[0]}" >&2
  fi
fi
