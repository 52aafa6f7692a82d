#!/usr/bin/env bash
# Runs on a GPU host from a bundle (scripts/make-bundle.sh): the gpu-labelled tests, the kernel
# tests under compute-sanitizer memcheck, racecheck and synccheck (and the engine tests under
# memcheck), and an end-to-end CLI job against `gpupiped --backend cuda`. Logs go to $OUT
# (default ./gpu-check-out); a summary is printed last.
#
# usage: scripts/gpu-check.sh [BUNDLE_DIR]    (default .bundle)
set -uo pipefail
bundle=$(cd "${1:-.bundle}" && pwd)
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
export GPUPIPE_BIN_DIR=$bundle/bin GPUPIPE_TEST_DATA=$bundle/testdata
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/device.txt" 2>&1
note "device: $(cat "$out/device.txt")"

# GPU_TESTS, SANITIZE_TOOLS: the test binaries and sanitizer tools to run (set empty to skip
# a part, e.g. to run the sanitizers and the tests as two processes at once); E2E=0 skips the
# end-to-end job.
gpu_tests=(${GPU_TESTS-kernels_cuda_test kernels_cuda_scan_hist_test convolve_arrangement_test
           pipeline_commit_probe_test server_cuda_test server_cuda_chunked_test
           server_cuda_region_test server_cuda_batching_test hot_path_test rpc_cuda_test
           integration_cuda_test cuda_ipc_test})
for t in "${gpu_tests[@]}"; do
  [ -x "$bundle/bin/$t" ] || { note "$t: missing from the bundle"; continue; }
  "$bundle/bin/$t" --gtest_brief=1 > "$out/$t.log" 2>&1
  rc=$?
  note "$t: rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.log" | tr '\n' ' ')"
done

# One sanitized gtest process: `tool` over test `name` of `bin`; appends a result line to
# `results` ("name rc=.. ..s <summary line> <gtest verdicts>") and keeps the log in `dir`.
# Exported for the job pool (xargs) of sanitize().
sanitize_one() {
  local tool=$1 bin=$2 name=$3 dir=$4 results=$5
  local log start=$SECONDS limit=0
  log=$dir/$(printf '%s' "$name" | tr '/' '_').log
  if [ "${SANITIZE_DEADLINE:-0}" -gt 0 ]; then
    limit=$((SANITIZE_DEADLINE - ($(date +%s) - SANITIZE_START)))
    if [ "$limit" -lt 10 ]; then echo "$name NOT_STARTED" >> "$results"; return; fi
  fi
  local extra=()
  # See the synccheck note in sanitize().
  [ "$tool" = synccheck ] && extra=(--kernel-name-exclude kns=StagingE1E)
  timeout --kill-after=20 "$limit" compute-sanitizer --tool "$tool" "${extra[@]}" \
    --error-exitcode 99 "$bin" --gtest_brief=1 --gtest_filter="$name" > "$log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - start))s" \
    "$(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 | sed 's/^=* *//')" \
    "$(grep -hE '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')" >> "$results"
}
export -f sanitize_one

if command -v compute-sanitizer >/dev/null; then
  # memcheck, racecheck and synccheck over the kernel tests, which run every staging strategy
  # (direct, pipeline, pipeline-thread, primitives, bulk) at stages 1, 2, 4 and 8, and memcheck
  # over the engine tests too. Every test runs in its own sanitized process, SANITIZE_JOBS
  # (default 8) at a time, the slowest-looking ones first (reference checks over every type or
  # strategy and the staged-strategy tests, then the rest, the *Large* and *LongRow* ones
  # last), so a time limit cuts the cheap end of the list. The tools run one after another:
  # the GPU time-slices between processes, so a tool alone finishes sooner. On the H200,
  # racecheck of kernels_cuda_test (88 tests) takes about 16 minutes of device time, more than
  # one call: with 16 jobs, 50 of its tests ran in 545 s, the slowest
  # RowReduceMatchesReference/pipeline (453 s), RowReduceStagedLargeRaggedTail (438 s) and
  # TwoWindowsEqualOneCall/float64 (420 s); the four ElementwiseStagedLargeRaggedTail tests
  # take 190-260 s each. Split the list with SANITIZE_FILTER; sharded runs of whole binaries
  # never finished it.
  # Knobs: SANITIZE_TOOLS narrows the tools (e.g. SANITIZE_TOOLS=racecheck); SANITIZE_TESTS
  # replaces the list of test binaries; SANITIZE_FILTER is a gtest filter that picks the tests
  # (default: all); SANITIZE_DEADLINE (seconds, default 0: none) ends every process that far
  # from the start of the sanitizers and starts none after it, so a run under a time limit
  # still reports what finished, and lists what did not.
  # synccheck reports libcu++'s own block-scope producer_commit: pipeline_commit_probe_test
  # shows it with no gpupipe code (a flagged kernel ends the process, so each probe runs
  # alone). The synccheck runs of the kernel tests therefore leave out the 8 kernels
  # instantiated for the `pipeline` strategy (Staging 1: "StagingE1E" in the mangled name).
  # Wall-clock seconds: each pool job is a new shell, whose $SECONDS starts at 0.
  SANITIZE_START=$(date +%s)
  export SANITIZE_START SANITIZE_DEADLINE=${SANITIZE_DEADLINE:-0}
  sanitize() {
    local tool=$1 notes=$out/$1.notes
    : > "$notes"
    local tests=(kernels_cuda_test kernels_cuda_scan_hist_test convolve_arrangement_test)
    [ "$tool" = memcheck ] && tests+=(server_cuda_test)
    [ -n "${SANITIZE_TESTS:-}" ] && read -r -a tests <<< "$SANITIZE_TESTS"
    if [ "$tool" = synccheck ]; then
      for probe in PartitionedBlockPipelineCopies/0 NoincMbarrierProtocolCopies/2; do
        local log="$out/synccheck-probe-${probe%%/*}.log"
        compute-sanitizer --tool synccheck "$bundle/bin/pipeline_commit_probe_test" \
          --gtest_filter="*${probe}" > "$log" 2>&1
        echo "synccheck probe $probe: $(grep 'ERROR SUMMARY' "$log" | tail -1)," \
          "$(grep -c 'Missing wait' "$log") 'Missing wait' at" \
          "$(grep -o 'producer_commit()[^ ]* in pipeline:[0-9]*' "$log" | sed 's/.* in //' | sort -u)" \
          >> "$notes"
      done
    fi
    for t in "${tests[@]}"; do
      local bin=$bundle/bin/$t dir=$out/$tool-$t results=$out/$tool-$t.results
      mkdir -p "$dir"
      : > "$results"
      "$bin" --gtest_list_tests --gtest_filter="${SANITIZE_FILTER:-*}" \
        | awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}' | grep -v DISABLED_ > "$dir/all.txt"
      local heavy='MatchesReference|PerType|PerFloatType|PerStaging|TwoWindows|Staged|ElementwiseOpcodes'
      local large='Large|LongRow'
      { grep -E "$heavy" "$dir/all.txt" | grep -vE "$large"
        grep -vE "$heavy|$large" "$dir/all.txt"
        grep -E "$large" "$dir/all.txt"; } > "$dir/order.txt"
      tr '\n' '\0' < "$dir/order.txt" \
        | xargs -0 -P "${SANITIZE_JOBS:-8}" -I{} \
            bash -c 'sanitize_one "$@"' _ "$tool" "$bin" {} "$dir" "$results"
      # Totals: errors (memcheck, synccheck), hazards (racecheck), tests. A process with no
      # kernel launch (a host-only test) ends with no summary; it counts as passed when gtest
      # says so.
      echo "$tool $t: $(wc -l < "$dir/order.txt") tests:" \
        "$(awk 'match($0, /ERROR SUMMARY: [0-9]+/) {e += substr($0, RSTART + 15, RLENGTH - 15); s++}
                match($0, /RACECHECK SUMMARY: [0-9]+/) {h += substr($0, RSTART + 19, RLENGTH - 19); s++}
                / NOT_STARTED$/ {ns++} / rc=124 / || / rc=137 / {to++}
                /\[  PASSED  \] 1 test/ {p++} /\[  FAILED  \]/ {f++}
                END {printf "%d passed, %d failed, %d past the deadline, %d not started; " \
                            "%d sanitizer summaries: %d errors, %d hazards",
                            p, f, to, ns, s, e, h}' "$results")" >> "$notes"
      awk '/\[  FAILED  \]/ || / rc=(124|137) / || / NOT_STARTED$/ || (/ rc=99 /) {
             printf "    %s\n", $0}' "$results" >> "$notes"
      # The first few reports, with the kernel and the source line, right in the summary.
      grep -h -m 3 -A 4 -E 'Barrier error|Race reported|Invalid .* access' "$dir"/*.log \
        2>/dev/null | head -30 | sed 's/^/    /' >> "$notes"
    done
  }
  tools=(${SANITIZE_TOOLS-memcheck racecheck synccheck})
  for tool in "${tools[@]}"; do sanitize "$tool"; done
  for tool in "${tools[@]}"; do
    while IFS= read -r line; do note "$line"; done < "$out/$tool.notes"
  done
else
  note "compute-sanitizer: not found"
fi

if [ "${E2E:-1}" != 0 ]; then
# End to end: the daemon on the GPU, a job from the CLI, checked against NumPy.
work=$(mktemp -d)
"$bundle/bin/gpupiped" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --backend cuda 2> "$out/e2e-daemon.log" &
daemon=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\).*/\1/p' "$out/e2e-daemon.log")
  [ -n "$port" ] && break
  sleep 0.1
done
python3 -c "
import numpy as np
np.save('$work/x.npy', np.random.default_rng().standard_normal((1024, 4096), dtype=np.float32))"
{
  "$bundle/bin/gpupipe" --target "127.0.0.1:$port" describe
  echo
  echo "\$ gpupipe submit --input x.npy --ops 'affine(alpha=2,beta=1) | relu | softmax' --output y.npy"
  "$bundle/bin/gpupipe" --target "127.0.0.1:$port" submit --input "$work/x.npy" \
    --ops 'affine(alpha=2,beta=1) | relu | softmax' --output "$work/y.npy"
  "$bundle/bin/gpupipe" --target "127.0.0.1:$port" submit --input "$work/x.npy" \
    --ops 'affine(alpha=2,beta=1) | relu | softmax' --output "$work/y.npy" --json
  echo
  echo "\$ gpupipe submit --input x.npy --ops 'abs | sqrt | standardize | argmax' --explain --profile --launch graph-pdl"
  "$bundle/bin/gpupipe" --target "127.0.0.1:$port" submit --input "$work/x.npy" \
    --ops 'abs | sqrt | standardize | argmax' --explain --profile --launch graph-pdl
  echo
  echo "\$ gpupipe compare --input x.npy --ops 'affine(alpha=2,beta=1) | relu | sqrt | softmax'"
  "$bundle/bin/gpupipe" --target "127.0.0.1:$port" compare --input "$work/x.npy" \
    --ops 'affine(alpha=2,beta=1) | relu | sqrt | softmax' --repeat 10
  echo
  "$bundle/bin/gpupipe" --target "127.0.0.1:$port" describe | grep -i graph
} > "$out/e2e.log" 2>&1
cp "$out/e2e.log" "$out/e2e-cli.log"
python3 -c "
import numpy as np
x = np.load('$work/x.npy').astype(np.float64); y = np.load('$work/y.npy')
z = np.maximum(2 * x + 1, 0); r = np.exp(z - z.max(-1, keepdims=True)); r /= r.sum(-1, keepdims=True)
err = np.abs(y - r).max(); rel = (np.abs(y - r) / r).max()
print(f'e2e: shape {y.shape} {y.dtype}, max abs err {err:.3g}, max rel err {rel:.3g}:', 'OK' if rel < 1e-4 else 'MISMATCH')
" >> "$out/e2e.log" 2>&1
kill -TERM "$daemon"; wait "$daemon"; daemon_rc=$?
note "e2e: $(tail -1 "$out/e2e.log"); daemon exit $daemon_rc"
rm -rf "$work"
fi

echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
