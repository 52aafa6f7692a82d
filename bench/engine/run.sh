#!/usr/bin/env bash
# Runs the engine benchmark on the GPU host and writes a Markdown report.
#
# usage: bench/engine/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
#   BUNDLE_OR_BUILD_BIN_DIR: a bundle (.bundle, holding bin/engine_bench) or a directory holding
#   engine_bench itself (build/bin); default: the first of .bundle, build/bin.
# env: OUT (default ./bench-out) receives engine_bench.out and engine-h200.md;
#      GPUPIPE_COMMIT names the commit where git cannot (the device copy has no .git);
#      ENGINE_BENCH_ARGS: extra arguments (e.g. --probes 200).
# Under a minute of device time on an H200; the targets table is printed last.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

bin=""
for d in "${1:-}" "$repo/.bundle" "$repo/build/bin"; do
  [ -n "$d" ] || continue
  if [ -x "$d/engine_bench" ]; then bin="$d/engine_bench"; break; fi
  if [ -x "$d/bin/engine_bench" ]; then bin="$d/bin/engine_bench"; break; fi
done
[ -n "$bin" ] || { echo "run.sh: engine_bench not found (give the bundle or bin directory)" >&2; exit 1; }
echo "run.sh: $bin, output in $OUT" >&2

commit=${GPUPIPE_COMMIT:-}
if [ -z "$commit" ] && git -C "$repo" rev-parse --short HEAD >/dev/null 2>&1; then
  commit=$(git -C "$repo" rev-parse --short HEAD)
  [ -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ] && commit="$commit (with uncommitted changes)"
fi
smi=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
python3 - "$OUT/engine-meta.json" "${commit:-unknown}" "$smi" "$(nproc)" <<'PY'
import json, sys, datetime
json.dump({"commit": sys.argv[2],
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "nvidia_smi": ("name, driver: " + sys.argv[3]) if sys.argv[3] else "",
           "host_cores": sys.argv[4]},
          open(sys.argv[1], "w"))
PY

start=$SECONDS
# shellcheck disable=SC2086
timeout 170 "$bin" ${ENGINE_BENCH_ARGS:-} > "$OUT/engine_bench.out" 2> "$OUT/engine_bench.stderr"
echo "run.sh: engine_bench exit $? after $((SECONDS - start)) s" >&2
tail -5 "$OUT/engine_bench.stderr" >&2
echo
python3 "$here/report.py" "$OUT"
