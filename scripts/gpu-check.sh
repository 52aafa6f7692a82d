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
gpu_tests=(${GPU_TESTS-kernels_cuda_test kernels_cuda_scan_hist_test pipeline_commit_probe_test
           server_cuda_test server_cuda_chunked_test hot_path_test rpc_cuda_test
           integration_cuda_test})
for t in "${gpu_tests[@]}"; do
  [ -x "$bundle/bin/$t" ] || { note "$t: missing from the bundle"; continue; }
  "$bundle/bin/$t" --gtest_brief=1 > "$out/$t.log" 2>&1
  rc=$?
  note "$t: rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.log" | tr '\n' ' ')"
done

if command -v compute-sanitizer >/dev/null; then
  # memcheck, racecheck and synccheck over the kernel tests, which run every staging strategy
  # (direct, pipeline, pipeline-thread, primitives, bulk) at stages 1, 2, 4 and 8, and memcheck
  # over the engine tests too. The three tools run at once, and so do each tool's test
  # binaries and shards (below): every process has its own context, and the GPU time-slices
  # between them, so a tool alone finishes sooner than beside the others. SANITIZE_TOOLS
  # narrows the set, e.g. SANITIZE_TOOLS=synccheck; SANITIZE_FILTER is the gtest filter of the
  # sanitized runs (default: all but the *Large* and *LongRow* tests, whose 256 MiB inputs take
  # minutes under instrumentation); SANITIZE_TIMEOUT ends each sanitized process after that many seconds
  # (default 0: no limit), so a run under a time limit still reports what finished;
  # SANITIZE_TESTS replaces the list of sanitized test binaries.
  # synccheck reports libcu++'s own block-scope producer_commit: pipeline_commit_probe_test
  # shows it with no gpupipe code (a flagged kernel ends the process, so each probe runs
  # alone). The synccheck run of the kernel tests therefore leaves out the 8 kernels
  # instantiated for the `pipeline` strategy (Staging 1: "StagingE1E" in the mangled name).
  sanitize() {
    local tool=$1 notes=$out/$1.notes
    : > "$notes"
    local tests=(kernels_cuda_test kernels_cuda_scan_hist_test) extra=()
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
      extra=(--kernel-name-exclude kns=StagingE1E)
    fi
    # racecheck is the slowest by far: its runs are split into gtest shards. Every shard of
    # every test binary runs at once (RACECHECK_SHARDS, default 8; SANITIZE_SHARDS for the
    # other tools, default 1).
    local shards=${SANITIZE_SHARDS:-1}
    [ "$tool" = racecheck ] && shards=${RACECHECK_SHARDS:-8}
    local -A pids=()
    for t in "${tests[@]}"; do
      for ((i = 0; i < shards; ++i)); do
        GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout --kill-after=20 "${SANITIZE_TIMEOUT:-0}" \
          compute-sanitizer --tool "$tool" \
            "${extra[@]}" --error-exitcode 99 "$bundle/bin/$t" \
            --gtest_filter="${SANITIZE_FILTER:--*Large*:*LongRow*}" > "$out/$tool-$t.log.$i" 2>&1 &
        pids[$t.$i]=$!
      done
    done
    for t in "${tests[@]}"; do
      local log="$out/$tool-$t.log" rc=0 timed_out=0
      for ((i = 0; i < shards; ++i)); do
        wait "${pids[$t.$i]}" && continue
        local prc=$?
        rc=$prc
        [ "$prc" = 124 ] && timed_out=$((timed_out + 1))
      done
      for ((i = 0; i < shards; ++i)); do cat "$log.$i"; done > "$log" && rm -f "$log".*
      # Totals over the shards: errors (memcheck, synccheck), hazards (racecheck), tests.
      echo "$tool $t: rc=$rc, $shards shard(s), $timed_out past ${SANITIZE_TIMEOUT:-0} s:" \
        "$(awk '/ERROR SUMMARY:/ {e += $4; n++} /RACECHECK SUMMARY:/ {h += $4; n++}
                /^\[  PASSED  \]/ {p += $4} /^\[  FAILED  \] [0-9]+ test/ {f += $4}
                END {printf "%d summaries, %d errors, %d hazards; %d tests passed, %d failed",
                     n, e, h, p, f}' "$log")" >> "$notes"
      # Tests a shard started or was given but did not finish (a shard past SANITIZE_TIMEOUT).
      awk '/^\[==========\] Running [0-9]+ test/ {given += $3}
           /^\[ RUN      \]/ {run[$4] = 1}
           /^\[       OK \]/ || /^\[  (FAILED  |SKIPPED )\] [A-Za-z].* ms\)$/ {delete run[$4]; done++}
           END {if (done < given) {
                  printf "    %d of %d tests finished; unfinished:", done, given
                  for (t in run) printf " %s", t
                  printf "\n"}}' "$log" >> "$notes"
      # The first few reports, with the kernel and the source line, right in the summary.
      if [ "$rc" -ne 0 ]; then
        grep -m 3 -A 4 -E 'Barrier error|Race reported|Invalid .* access' "$log" \
          | sed 's/^/    /' >> "$notes"
      fi
    done
  }
  tools=(${SANITIZE_TOOLS-memcheck racecheck synccheck})
  for tool in "${tools[@]}"; do sanitize "$tool" & done
  wait
  for tool in "${tools[@]}"; do
    while IFS= read -r line; do note "$line"; done < "$out/$tool.notes"
  done
else
  note "compute-sanitizer: not found"
fi

if [ "${E2E:-1}" != 0 ]; then
# End to end: the daemon on the GPU, a job from the CLI, checked against NumPy.
work=$(mktemp -d)
"$bundle/bin/gpupiped" --listen 127.0.0.1:0 --backend cuda 2> "$out/e2e-daemon.log" &
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
