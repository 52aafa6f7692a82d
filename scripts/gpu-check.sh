#!/usr/bin/env bash
# Runs on a GPU host from a bundle (scripts/make-bundle.sh): the gpu-labelled tests, the same
# tests under compute-sanitizer memcheck, and an end-to-end CLI job against
# `gpupiped --backend cuda`. Logs go to $OUT (default ./gpu-check-out); a summary is printed last.
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

gpu_tests=(kernels_cuda_test server_cuda_test server_cuda_chunked_test hot_path_test rpc_cuda_test integration_cuda_test)
for t in "${gpu_tests[@]}"; do
  [ -x "$bundle/bin/$t" ] || { note "$t: missing from the bundle"; continue; }
  "$bundle/bin/$t" --gtest_brief=1 > "$out/$t.log" 2>&1
  rc=$?
  note "$t: rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.log" | tr '\n' ' ')"
done

if command -v compute-sanitizer >/dev/null; then
  # memcheck over every GPU test binary; racecheck and synccheck over the kernel tests, which
  # run every staging strategy (direct, pipeline, pipeline-thread, primitives, bulk) at stages
  # 1, 2, 4 and 8. SANITIZE_TOOLS narrows the set, e.g. SANITIZE_TOOLS=synccheck;
  # SANITIZE_FILTER is the gtest filter of the sanitized runs (default: all but the *Large*
  # tests, whose 256 MiB inputs take minutes under instrumentation).
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    tests=(kernels_cuda_test)
    [ "$tool" = memcheck ] && tests+=(server_cuda_test)
    for t in "${tests[@]}"; do
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$bundle/bin/$t" --gtest_brief=1 \
        --gtest_filter="${SANITIZE_FILTER:--*Large*}" > "$out/$tool-$t.log" 2>&1
      rc=$?
      note "$tool $t: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool-$t.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' "$out/$tool-$t.log" | tr '\n' ' ')"
      # The first few reports, with the kernel and the source line, right in the summary.
      if [ "$rc" -ne 0 ]; then
        grep -m 3 -A 4 -E 'Barrier error|Race reported|Invalid .* access' "$out/$tool-$t.log" \
          | sed 's/^/    /'
      fi
    done
  done
else
  note "compute-sanitizer: not found"
fi

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

echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
