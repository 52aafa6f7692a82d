#!/usr/bin/env bash
# Scale-out over the GPUs of one host: one gpupiped per GPU (CUDA_VISIBLE_DEVICES=N, --device
# 0), and gpupipe bench on a GPU-bound mix against the first daemon alone and against all of
# them through one balanced target, alternating, in the same run. Before timing, one job of
# the mix on fresh random data runs on every GPU daemon and on a CPU daemon (the reference),
# and the results are compared. Writes scaleout.md (the table), the bench JSON and the logs.
#
# usage: bench/scaleout/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
# env: OUT (default ./bench-out); SCALEOUT_GPUS (default: every GPU nvidia-smi lists; at least
#      2); SCALEOUT_REPS (3 pairs of points); SCALEOUT_DURATION (10 s a point);
#      SCALEOUT_CONCURRENCY (jobs in flight per daemon, 16); SCALEOUT_OPS (convolutions of
#      1024 taps chained, 64); SCALEOUT_COLS (262144); SCALEOUT_DTYPE (float16);
#      SCALEOUT_BACKEND (cuda; cpu runs the script's plumbing on a host without GPUs);
#      SCALEOUT_DEVICES: the GPU of each daemon, comma-separated (default 0,1,...). "0,0" puts
#      two daemons on one GPU: about 1.0x there shows that the mix is bound by the GPU.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
daemon=$(bench_find_binary gpupiped "${1:-}") || exit 1
cli="$(dirname "$daemon")/gpupipe"
[ -x "$cli" ] || { echo "run.sh: no gpupipe beside $daemon" >&2; exit 1; }

backend=${SCALEOUT_BACKEND:-cuda}
if [ -n "${SCALEOUT_DEVICES:-}" ]; then
  IFS=, read -r -a devices <<< "$SCALEOUT_DEVICES"
  gpus=${#devices[@]}
else
  gpus=${SCALEOUT_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
  devices=()
  for ((g = 0; g < gpus; g++)); do devices+=("$g"); done
fi
if [ "$gpus" -lt 2 ]; then
  echo "run.sh: scale-out needs at least two GPUs; this host has $gpus" >&2
  exit 2
fi
reps=${SCALEOUT_REPS:-3}
duration=${SCALEOUT_DURATION:-10}
per_daemon=${SCALEOUT_CONCURRENCY:-16}
nops=${SCALEOUT_OPS:-64}
cols=${SCALEOUT_COLS:-262144}
dtype=${SCALEOUT_DTYPE:-float16}

# The mix: one row of `cols`, `nops` same-mode convolutions of 1024 taps of 2^-10 each (each
# a local mean, so values stay in range through the chain). The ops text is too long for one
# command-line argument; it goes through a mix file.
taps=$(python3 -c 'print(",".join(["0.0009765625"] * 1024))')
op="convolve(taps=[$taps], mode=same)"
ops=$(python3 -c 'import sys; print(" | ".join([sys.argv[1]] * int(sys.argv[2])))' "$op" "$nops")
echo "weight=1; shape=1x$cols; dtype=$dtype; ops=$ops" > "$OUT/scaleout.mix"

pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap stop_all EXIT
# start_daemon LOG ENV... -- FLAGS...: starts gpupiped, prints its target.
start_daemon() {
  local log=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$daemon" --listen 127.0.0.1:0 --metrics-listen '' --max-work-per-byte 0 \
    "$@" > "$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    local port
    port=$(grep -oE 'listening on [^ ]*:[0-9]+' "$log" | grep -oE '[0-9]+$' | head -1)
    [ -n "$port" ] && { echo "127.0.0.1:$port"; return 0; }
    sleep 0.1
  done
  echo "run.sh: gpupiped did not start ($log):" >&2
  tail -5 "$log" >&2
  return 1
}

targets=()
for ((g = 0; g < gpus; g++)); do
  env_gpu=()
  [ "$backend" = cuda ] && env_gpu=("CUDA_VISIBLE_DEVICES=${devices[$g]}")
  t=$(start_daemon "$OUT/gpupiped-$g.log" "${env_gpu[@]}" GPUPIPE_SCALEOUT_DAEMON=$g -- \
      --backend "$backend" --device 0) || exit 1
  targets+=("$t")
  echo "run.sh: daemon $g on $t: $(grep -m1 'backend' "$OUT/gpupiped-$g.log" | cut -c1-200)" >&2
done
reference=$(start_daemon "$OUT/gpupiped-cpu.log" GPUPIPE_SCALEOUT_DAEMON=cpu -- --backend cpu) || exit 1
all=$(IFS=,; echo "${targets[*]}")

bench_write_meta "$OUT/scaleout-meta.json" "$daemon"

# The check: one job of the mix on fresh random data, on every daemon, against the CPU's.
PYTHONPATH="$here/../../client/python:$(dirname "$daemon")/../python:${PYTHONPATH:-}" \
  python3 "$here/check.py" "$OUT/scaleout.mix" "$reference" "${targets[@]}" \
  > "$OUT/check.txt" 2>&1
check_rc=$?
cat "$OUT/check.txt" >&2
[ $check_rc -eq 0 ] || { echo "run.sh: the check failed; nothing timed" >&2; exit 1; }

# Alternating points: the first daemon alone, then all of them, `reps` times. The same jobs in
# flight per daemon in both, so that each GPU is kept as busy alone as together.
for ((r = 1; r <= reps; r++)); do
  for which in one all; do
    if [ "$which" = one ]; then target=${targets[0]}; c=$per_daemon; ch=4
    else target=$all; c=$((per_daemon * gpus)); ch=$((4 * gpus)); fi
    "$cli" --target "$target" bench --mix "$OUT/scaleout.mix" --concurrency "$c" \
      --duration "$duration" --warmup 2 --channels "$ch" --no-echo \
      --json > "$OUT/bench-$which-$r.json" 2> "$OUT/bench-$which-$r.stderr"
    echo "run.sh: $which rep $r exit $? $(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"][0]["gpupipe"]; print(round(p["throughput"],1), "jobs/s,", p["errors"], "errors,", p["mismatches"], "mismatches")' "$OUT/bench-$which-$r.json" 2>&1)" >&2
  done
done
python3 "$here/report.py" "$OUT" "$gpus" "$nops" "$cols" "$dtype" "$per_daemon" \
  "$(IFS=,; echo "${devices[*]}")" > "$OUT/scaleout.md"
cat "$OUT/scaleout.md"
