#!/usr/bin/env bash
# A CPU profile of gpupiped under small-job load: the daemon runs with gperftools' sampling
# profiler preloaded (libprofiler, package libgoogle-perftools4 or its t64 successor; copy it
# and its libunwind beside the bundle where the GPU host cannot install it), `gpupipe bench`
# loads it, and the profiler samples a window in the middle of the load (started and stopped
# by SIGUSR2). bench/service/cpu_profile.py reads the profile, in microseconds a job from the
# daemon's CPU a job that the bench printed; bench/results/service-h200.md has a reading.
#
# usage: bench/service/cpu_profile.sh [BUNDLE_OR_BUILD_BIN_DIR]
# env: OUT (default ./bench-out); PROFILER (default libprofiler.so.0 from the system's library
#      directories); CONCURRENCY (default 64); DAEMON_FLAGS (default "--batch-window-us 0");
#      WINDOW seconds profiled (default 4).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WINDOW=${WINDOW:-4}
PROFILER=${PROFILER:-$(ldconfig -p 2> /dev/null | awk '/libprofiler\.so\.0 / {print $NF; exit}')}
[ -n "$PROFILER" ] && [ -f "$PROFILER" ] || {
  echo "cpu_profile.sh: no libprofiler.so.0 (install libgoogle-perftools4, or set PROFILER)" >&2
  exit 1
}

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
cli=$(bench_find_binary gpupipe "${1:-}") || exit 1
daemon="$(dirname "$cli")/gpupiped"
bench_write_meta "$OUT/cpu-profile-meta.json" "$cli"
read -r -a daemon_flags <<< "${DAEMON_FLAGS:---batch-window-us 0}"
port=$((20000 + RANDOM % 20000))
rm -f "$OUT/gpupiped.prof"*
LD_LIBRARY_PATH=$(dirname "$PROFILER")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  LD_PRELOAD=$PROFILER CPUPROFILE="$OUT/gpupiped.prof" CPUPROFILESIGNAL=12 \
  CPUPROFILE_FREQUENCY=1000 \
  "$daemon" --listen "127.0.0.1:$port" --metrics-listen '' --quiet "${daemon_flags[@]}" \
  2> "$OUT/cpu-profile-daemon.stderr" &
pid=$!
for _ in $(seq 200); do
  "$cli" --target "127.0.0.1:$port" health > /dev/null 2>&1 && break
  sleep 0.1
done
# The bench's measured window covers the profiled one, with two seconds on each side.
"$cli" --target "127.0.0.1:$port" bench --ops 'affine(alpha=2, beta=1) | relu | softmax' \
  --concurrency "${CONCURRENCY:-64}" --duration $((WINDOW + 4)) --warmup 1 --no-echo \
  > "$OUT/cpu-profile-bench.txt" 2>&1 &
bench_pid=$!
sleep 3
kill -USR2 "$pid"
sleep "$WINDOW"
kill -USR2 "$pid"
wait "$bench_pid"
kill "$pid"
wait "$pid" 2> /dev/null
# The profiler names its file after the signal's count: .0 is the first window.
mv "$OUT/gpupiped.prof.0" "$OUT/gpupiped.prof" 2> /dev/null
cat "$OUT/cpu-profile-bench.txt"
commit=$(cat "$(dirname "$cli")/../COMMIT" 2> /dev/null || echo "the same commit")
echo "cpu_profile.sh: $OUT/gpupiped.prof; read it with bench/service/cpu_profile.py" \
  "$OUT/gpupiped.prof --binary <unstripped gpupiped of $commit>" \
  "--us-per-job <the daemon's CPU a request above>" >&2
