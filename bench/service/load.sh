#!/usr/bin/env bash
# Small-job throughput and latency with `gpupipe bench`, each figure beside a plain gRPC echo
# of the same message sizes measured in the same run (the floor any gRPC service pays), and the
# Markdown report (load_report.py). About two and a half minutes with the defaults.
#
# The job is one row of 1024 float32 through affine, relu and softmax. Scenarios, each on a
# freshly started daemon:
#   unbatched   --batch-window-us 0, concurrency 1 and 64, beside the floor as a unary call and
#               as a server-streaming call with one reply (the shape of Submit)
#   batched     the daemon's defaults (batching on), concurrency 1, 64 and 256, plus the lanes'
#               timeline of the last point
#   high_idle   the job at high priority alone, concurrency 1 (its idle p99)
#   probe       the same high-priority job from a client process of its own, concurrency 1,
#               while another process floods low-priority jobs at concurrency 256 (flood_low)
#   high_idle_listener, probe_listener
#               the same two through the daemon's priority listener (--priority-listen, a
#               second address served by threads of its own); the flood stays on the main
#               address (flood_low_listener)
#   flood       one process, 255 low for every high job, concurrency 256: the high job's p99
#               when it shares its client process (and its gRPC threads) with the flood
# and a drawn timeline of one large chunked job (gpupipe submit --timeline).
#
# usage: bench/service/load.sh [BUNDLE_OR_BUILD_BIN_DIR]
# env: OUT (default ./bench-out); BACKEND (default cuda); DURATION seconds per point (default
#      4); GPUPIPE_COMMIT names the commit where git cannot; JOB_LOG=1 keeps the daemon's line
#      a job (its default; without it, the daemons run with --quiet), of which each scenario's
#      last 100 lines stay in gpupiped.stderr; DAEMON_FLAGS, more flags for every daemon
#      (e.g. "--streams-per-priority 4"), named in the report.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BACKEND=${BACKEND:-cuda}
DURATION=${DURATION:-4}

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
cli=$(bench_find_binary gpupipe "${1:-}") || exit 1
daemon="$(dirname "$cli")/gpupiped"
[ -x "$daemon" ] || { echo "load.sh: no gpupiped beside $cli" >&2; exit 1; }
bench_write_meta "$OUT/load-meta.json" "$cli"

# DAEMON_FLAGS as words (no globbing), and as the report reads them.
read -r -a daemon_flags <<< "${DAEMON_FLAGS:-}"
printf '%s\n' "${DAEMON_FLAGS:-}" > "$OUT/daemon-flags.txt"
port=$((20000 + RANDOM % 20000))
target=127.0.0.1:$port
priority_target=127.0.0.1:$((port + 1))
pid=
start_daemon() {
  local quiet=--quiet
  [ "${JOB_LOG:-0}" = 1 ] && quiet=
  "$daemon" --backend "$BACKEND" --listen "$target" --metrics-listen '' $quiet \
    "${daemon_flags[@]}" "$@" 2> "$OUT/gpupiped.stderr" &
  pid=$!
  for _ in $(seq 200); do
    "$cli" --target "$target" health > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "load.sh: the daemon did not come up" >&2
  cat "$OUT/gpupiped.stderr" >&2
  exit 1
}
stop_daemon() {
  kill "$pid"
  wait "$pid" 2> /dev/null
  # A logging daemon's lines a job: the last ones are enough to read what happened.
  tail -n 100 "$OUT/gpupiped.stderr" > "$OUT/gpupiped.stderr.tail" &&
    mv "$OUT/gpupiped.stderr.tail" "$OUT/gpupiped.stderr"
}
bench() {
  local name=$1
  shift
  echo "load.sh: $name $*" >&2
  timeout 300 "$cli" --target "$target" $GLOBAL bench --duration "$DURATION" --warmup 1 --json \
    "$@" > "$OUT/$name.json" 2> "$OUT/$name.stderr"
  echo "load.sh: $name exit $?" >&2
}
GLOBAL=
# The high-priority job while another process floods low-priority jobs at 256: `probe_name`
# from a process of its own (with GLOBAL's flags), `flood_name` the flood.
probe_under_flood() {
  local probe_name=$1 flood_name=$2
  # The flood runs a second longer than the probe on each side, so the probe sees it throughout.
  timeout 300 "$cli" --target "$target" --client-id flood bench --ops "$OPS" --priority low \
    --concurrency 256 --duration $((DURATION + 2)) --warmup 1 --no-echo --json \
    > "$OUT/$flood_name.json" 2> "$OUT/$flood_name.stderr" &
  local flood_pid=$!
  sleep 2
  bench "$probe_name" --ops "$OPS" --priority high --concurrency 1 --no-echo
  wait "$flood_pid"
  echo "load.sh: $flood_name exit $?" >&2
}

OPS='affine(alpha=2, beta=1) | relu | softmax'
start_daemon --batch-window-us 0
bench unbatched --ops "$OPS" --concurrency 1,64 --echo-stream
"$cli" --target "$target" stats --json > "$OUT/unbatched-stats.json"
stop_daemon

start_daemon --priority-listen "$priority_target"
bench batched --ops "$OPS" --concurrency 1,64,256 --timeline "$OUT/lanes.svg"
bench high_idle --ops "$OPS" --priority high --concurrency 1
probe_under_flood probe flood_low
GLOBAL="--priority-target $priority_target"
bench high_idle_listener --ops "$OPS" --priority high --concurrency 1
probe_under_flood probe_listener flood_low_listener
GLOBAL=
printf 'weight=255; priority=low; ops=%s\nweight=1; priority=high; ops=%s\n' "$OPS" "$OPS" \
  > "$OUT/flood.mix"
bench flood --mix "$OUT/flood.mix" --concurrency 256
"$cli" --target "$target" stats --json > "$OUT/stats.json"
# One large job in chunks, drawn: copies in, kernels and copies out overlapping per chunk.
python3 -c "import numpy as np
np.save('$OUT/big.npy', np.random.default_rng().standard_normal((4096, 4096), dtype=np.float32))" \
  && "$cli" --target "$target" submit --input "$OUT/big.npy" --ops "$OPS" \
       --timeline "$OUT/job-timeline.svg" > "$OUT/submit.txt" 2>&1
rm -f "$OUT/big.npy"
stop_daemon
tar -C "$OUT" -czf "$OUT.tgz" .
python3 "$here/load_report.py" "$OUT"
