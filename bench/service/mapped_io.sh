#!/usr/bin/env bash
# Small jobs with and without copies (gpupiped --mapped-io-max-kib): the same jobs on a daemon
# that copies every job (0) and on one whose kernels read and write the lanes' mapped pinned
# buffers for jobs up to 256 KiB, each measured in the same run, at concurrency 1 (latency)
# and 64 (throughput), batching off. Rows of 1024 float32 through affine, relu and softmax,
# 1 to 64 rows a job (4 to 256 KiB in and out), for choosing the default
# (CudaBackendOptions::mapped_io_max_bytes): the device time and the rates of both ways at each
# size. About a minute with the defaults.
#
# usage: bench/service/mapped_io.sh [BUNDLE_OR_BUILD_BIN_DIR]
# env: OUT (default ./bench-out); BACKEND (default cuda; cpu runs the script, not the
#      comparison); DURATION seconds per point (default 2); ROWS (default
#      "1 4 16 64"); GPUPIPE_COMMIT names the commit where git cannot.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DURATION=${DURATION:-2}
read -r -a rows <<< "${ROWS:-1 4 16 64}"

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
cli=$(bench_find_binary gpupipe "${1:-}") || exit 1
daemon="$(dirname "$cli")/gpupiped"
[ -x "$daemon" ] || { echo "mapped_io.sh: no gpupiped beside $cli" >&2; exit 1; }
bench_write_meta "$OUT/mapped-io-meta.json" "$cli"

OPS='affine(alpha=2, beta=1) | relu | softmax'
for kib in 0 256; do
  port=$((20000 + RANDOM % 20000))
  "$daemon" --backend "${BACKEND:-cuda}" --listen "127.0.0.1:$port" --metrics-listen '' --quiet \
    --batch-window-us 0 --mapped-io-max-kib "$kib" 2> "$OUT/mapped-io-daemon-$kib.stderr" &
  pid=$!
  for _ in $(seq 200); do
    "$cli" --target "127.0.0.1:$port" health > /dev/null 2>&1 && break
    sleep 0.1
  done
  for r in "${rows[@]}"; do
    echo "mapped_io.sh: --mapped-io-max-kib $kib, ${r}x1024" >&2
    timeout 120 "$cli" --target "127.0.0.1:$port" bench --ops "$OPS" --shape "${r}x1024" \
      --concurrency 1,64 --duration "$DURATION" --warmup 1 --no-echo --json \
      > "$OUT/mapped-io-$kib-$r.json" 2> "$OUT/mapped-io-$kib-$r.stderr"
    echo "mapped_io.sh: exit $?" >&2
  done
  kill "$pid"
  wait "$pid" 2> /dev/null
done
python3 "$here/mapped_io_report.py" "$OUT" "${rows[@]}"
