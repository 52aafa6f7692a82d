#!/usr/bin/env bash
# One large streamed job end to end on a GPU host: writes a float32 .npy of GIB GiB (default
# 16), starts `gpupiped --backend cuda`, runs `gpupipe submit --ops relu` on it through the
# streaming upload, checks the result against relu of the input block by block, and reports
# the daemon's and the CLI's peak resident memory (VmHWM, ru_maxrss) and the end-to-end GB/s.
#
# usage: bench/engine/big_job.sh [BUNDLE_DIR] [GIB]     (defaults: .bundle, 16)
# env: OUT (default ./bench-out) receives big_job.json and the daemon's log; WORK (default
# /tmp) holds the two .npy files, which are removed at the end.
set -uo pipefail
bundle=$(cd "${1:-.bundle}" && pwd)
gib=${2:-16}
OUT=${OUT:-./bench-out}
mkdir -p "$OUT"
work=$(mktemp -d "${WORK:-/tmp}/gpupipe-big-XXXXXX")
trap 'rm -rf "$work"; [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null' EXIT

python3 - "$work/x.npy" "$gib" <<'PY'
import sys, numpy as np
path, gib = sys.argv[1], int(sys.argv[2])
n = gib << 28
x = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n,))
block = 1 << 26
base = (np.arange(block, dtype=np.int64) * 2654435761 >> 7) & 255
for start in range(0, n, block):
    x[start:start + block] = ((base + start) % 256 - 128).astype(np.float32) / 16
x.flush()
PY

port=$((20000 + RANDOM % 20000))
"$bundle/bin/gpupiped" --backend cuda --listen "127.0.0.1:$port" --metrics-listen 127.0.0.1:0 \
  --max-stream-input-gib $((gib + 1)) > "$OUT/big_job_daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do grep -q "listening on" "$OUT/big_job_daemon.log" && break; sleep 0.2; done
start=$(date +%s.%N)
# The CLI's peak RSS: ru_maxrss of the only child of this Python process.
python3 - "$work/cli_rss" "$bundle/bin/gpupipe" submit --target "127.0.0.1:$port" \
  --input "$work/x.npy" --ops relu --output "$work/y.npy" --json --deadline 3600 \
  > "$OUT/big_job_cli.json" 2> "$OUT/big_job_cli.err" <<'PY'
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc)
PY
rc=$?
end=$(date +%s.%N)
daemon_hwm_kib=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
kill -TERM "$daemon"; wait "$daemon"; daemon=

python3 - "$work/x.npy" "$work/y.npy" "$rc" "$start" "$end" "$daemon_hwm_kib" \
  "$(cat "$work/cli_rss" 2>/dev/null || echo 0)" "$gib" "$OUT/big_job_daemon.log" <<'PY' | tee "$OUT/big_job.json"
import json, sys, numpy as np
xp, yp, rc, start, end, hwm, cli, gib, log = sys.argv[1:]
ok = int(rc) == 0
mismatch = None
if ok:
    x = np.load(xp, mmap_mode="r"); y = np.load(yp, mmap_mode="r")
    ok = x.shape == y.shape and y.dtype == np.float32
    block = 1 << 26
    for s in range(0, x.shape[0], block) if ok else []:
        if not np.array_equal(np.maximum(x[s:s + block], 0), y[s:s + block]):
            ok, mismatch = False, s
            break
memory = [l.split("gpupiped: ", 1)[1].strip() for l in open(log) if "memory:" in l]
secs = float(end) - float(start)
print(json.dumps({"bench": "big_job", "gib": int(gib), "cli_rc": int(rc), "result_ok": ok,
                  "first_mismatch": mismatch, "seconds": round(secs, 2),
                  "gbps_in_plus_out": round(2 * (int(gib) << 30) / secs / 1e9, 3),
                  "daemon_vmhwm_mib": round(int(hwm) / 1024, 1),
                  "cli_maxrss_mib": round(int(cli) / 1024, 1), "daemon_memory": memory}))
PY
