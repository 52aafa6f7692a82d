#!/usr/bin/env python3
"""The data-plane benchmark's Python peer: `relu` over [rows, 2^18] float32 (--mib MiB each way)
from NumPy arrays in shared memory registered with the daemon (Client.shared_array), the result
written into another, timed from submit to its return; median of --reps after a warm-up. Every
result is checked against NumPy's relu of fresh random input. Prints one JSON line per run and a
summary line (report.py reads them from python_bench.out).

usage: python_bench.py --daemon PATH [--mib N] [--reps R]
"""
import argparse
import json
import re
import subprocess
import sys
import time

import numpy as np

import gpupipe


def start_daemon(binary):
    proc = subprocess.Popen(
        [binary, "--backend", "cuda", "--listen", "127.0.0.1:0", "--metrics-listen", "", "--quiet",
         "--max-region-gib", "64", "--max-client-region-gib", "64"],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log += line
        m = re.search(r"listening on [^ ]*:(\d+)", line)
        if m:
            return proc, f"127.0.0.1:{m.group(1)}"
    proc.kill()
    sys.exit("python_bench: gpupiped did not start:\n" + log)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--daemon", required=True)
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    cols = 1 << 18
    rows = max(1, (a.mib << 20) // (cols * 4))
    nbytes = rows * cols * 4
    proc, target = start_daemon(a.daemon)
    rates, bad = [], 0
    try:
        with gpupipe.Client(target, deadline=600) as client:
            t0 = time.perf_counter()
            x = client.shared_array((rows, cols), np.float32)
            y = client.shared_array((rows, cols), np.float32)
            register_s = time.perf_counter() - t0
            rng = np.random.default_rng()
            for rep in range(a.reps + 1):  # rep 0 warms up
                x[:] = rng.standard_normal((rows, cols), dtype=np.float32)
                t0 = time.perf_counter()
                r = client.submit(x, "relu", out=y)
                seconds = time.perf_counter() - t0
                ok = bool(np.array_equal(y, np.maximum(x, 0)))
                bad += not ok
                gbs = nbytes / seconds / 1e9
                print(json.dumps({"peer": "python", "rep": rep, "seconds": round(seconds, 4),
                                  "gbs_each_way": round(gbs, 2), "ok": ok,
                                  "server_total_us": r.timing.total_us, "transport": r.transport}),
                      flush=True)
                if rep > 0:
                    rates.append(gbs)
    finally:
        proc.terminate()
        proc.wait(30)
    print(json.dumps({"summary": True, "bytes": nbytes, "reps": a.reps,
                      "gbs_each_way": sorted(rates)[len(rates) // 2] if rates else 0,
                      "register_seconds": round(register_s, 3), "mismatches": bad}))
    return 0 if bad == 0 and rates else 1


if __name__ == "__main__":
    sys.exit(main())
