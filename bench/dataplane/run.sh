#!/usr/bin/env bash
# Runs the data-plane benchmark (a large job through shared-memory regions against raw
# page-locked copies, same run) and writes a Markdown report. Needs a CUDA device; about a
# minute with the defaults (1 GiB, 5 repetitions, one streamed run for context).
#
# usage: bench/dataplane/run.sh [BUNDLE_OR_BUILD_BIN_DIR]
# env: OUT (default ./bench-out) receives dataplane_bench.out, dataplane_bench.stderr and
#      dataplane-h200.md; GPUPIPE_COMMIT names the commit where git cannot;
#      DATAPLANE_BENCH_ARGS: extra arguments (e.g. --mib 256 --reps 3 --stream 0).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bin=$(bench_find_binary dataplane_bench "${1:-}") || exit 1
daemon="$(dirname "$bin")/gpupiped"
[ -x "$daemon" ] || { echo "run.sh: no gpupiped beside $bin" >&2; exit 1; }
echo "run.sh: $bin against $daemon, output in $OUT" >&2

bench_write_meta "$OUT/dataplane-meta.json" "$bin"

start=$SECONDS
# shellcheck disable=SC2086
timeout 400 "$bin" --daemon "$daemon" ${DATAPLANE_BENCH_ARGS:-} \
  > "$OUT/dataplane_bench.out" 2> "$OUT/dataplane_bench.stderr"
echo "run.sh: dataplane_bench exit $? after $((SECONDS - start)) s" >&2
tail -20 "$OUT/dataplane_bench.stderr" >&2
# The Python peer, where the Python client and its generated modules can be imported
# (PYTHONPATH: client/python and the build's or bundle's python/ directory).
root=$(cd "$here/../.." && pwd)
pydir="$(dirname "$(dirname "$bin")")/python"
if PYTHONPATH="$root/client/python:$pydir" python3 -c "import gpupipe" 2>/dev/null; then
  PYTHONPATH="$root/client/python:$pydir" timeout 300 python3 "$here/python_bench.py" \
    --daemon "$daemon" ${PYTHON_BENCH_ARGS:-} > "$OUT/python_bench.out" 2> "$OUT/python_bench.stderr"
  echo "run.sh: python_bench exit $?" >&2
else
  echo "run.sh: no importable gpupipe Python client; the Python peer is not run" >&2
fi
python3 "$here/report.py" "$OUT"
