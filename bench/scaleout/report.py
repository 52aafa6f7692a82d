"""Writes the scale-out table (Markdown) from a bench/scaleout/run.sh output directory.

usage: report.py OUT DAEMONS OPS COLS DTYPE CONCURRENCY_PER_DAEMON DEVICES"""
import glob
import json
import statistics
import sys


def points(out, which):
    runs = []
    for path in sorted(glob.glob(f"{out}/bench-{which}-*.json")):
        try:
            runs.append(json.load(open(path))["points"][0]["gpupipe"])
        except (OSError, ValueError, KeyError, IndexError):
            runs.append(None)
    return runs


def main(out, gpus, nops, cols, dtype, per_daemon, devices):
    meta = json.load(open(f"{out}/scaleout-meta.json"))
    one, all_ = points(out, "one"), points(out, "all")
    good = [r for r in one + all_ if r is not None]
    distinct = len(set(devices.split(",")))
    print(f"# Scale-out: {gpus} daemons on {distinct} GPU{'s' if distinct > 1 else ''} "
          f"(CUDA_VISIBLE_DEVICES {devices})\n")
    print(f"Commit {meta['commit']}, {meta['date']}, {meta['nvidia_smi'] or 'no GPU'}, "
          f"{meta['host_cores']} cores ({meta['cpu']}).\n")
    print(f"Mix: one row of {cols} {dtype}, {nops} chained convolutions of 1024 taps (same), "
          f"{per_daemon} jobs in flight per daemon; `gpupipe bench`, the first daemon alone and "
          f"all {gpus} through one balanced target (round_robin), alternating in the same run. "
          f"Before timing, one job on fresh random data on every daemon matched the CPU "
          f"backend's result (check.txt).\n")
    print("| rep | 1 daemon (jobs/s) | " + f"{gpus} daemons (jobs/s) | per daemon | errors |")
    print("| --- | ---: | ---: | --- | ---: |")
    for i, (a, b) in enumerate(zip(one, all_), 1):
        fa = f"{a['throughput']:.1f}" if a else "failed"
        fb = f"{b['throughput']:.1f}" if b else "failed"
        per = ", ".join(f"{k} {v}" for k, v in sorted((b or {}).get("daemons", {}).items()))
        errs = sum((r or {}).get("errors", 0) + (r or {}).get("mismatches", 0) for r in (a, b))
        print(f"| {i} | {fa} | {fb} | {per} | {errs} |")
    ta = [r["throughput"] for r in one if r]
    tb = [r["throughput"] for r in all_ if r]
    if ta and tb:
        speedup = statistics.median(tb) / statistics.median(ta)
        if distinct > 1:
            goal = 0.9 * distinct
            verdict = f"goal >= {goal:.1f}x: {'met' if speedup >= goal else 'missed'}"
        else:
            verdict = ("all daemons on one GPU: near 1.0x, the mix is bound by the GPU; well "
                       "above, by the service")
        print(f"\nMedian: 1 daemon {statistics.median(ta):.1f} jobs/s, {gpus} daemons "
              f"{statistics.median(tb):.1f} jobs/s: **{speedup:.2f}x** ({verdict}).")
        lat = [r["latency_us"]["p50"] for r in good]
        print(f"\nLatency p50 across points: {min(lat) / 1e3:.1f} to {max(lat) / 1e3:.1f} ms.")


if __name__ == "__main__":
    main(*sys.argv[1:])
