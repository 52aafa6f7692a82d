#!/usr/bin/env python3
"""Turns dataplane_bench's JSON lines into OUT_DIR/dataplane-h200.md (to be copied to
bench/results/dataplane-h200.md) and prints it. Standard library only.

Reads OUT_DIR/dataplane_bench.out (one JSON line per measurement, then a summary line),
OUT_DIR/dataplane-meta.json (written by run.sh) and, when present, OUT_DIR/python_bench.out
(the Python client's lines, bench/dataplane/python_bench.py).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import json_lines, run_header, yes_no  # noqa: E402

TARGET_CPP = 0.8   # regions end to end against raw page-locked copies both ways at once
TARGET_PY = 0.7    # the same from Python with NumPy arrays in regions


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    lines = json_lines(os.path.join(out_dir, "dataplane_bench.out"))
    py = [j for j in json_lines(os.path.join(out_dir, "python_bench.out")) if not j.get("summary")]
    s = next((j for j in lines if j.get("summary")), None)
    md = ["# Data plane: a large job through shared-memory regions", ""]
    md += run_header(os.path.join(out_dir, "dataplane-meta.json"))
    if s is None:
        md += ["dataplane_bench produced no summary (see dataplane_bench.stderr)."]
        print("\n".join(md))
        return
    gib = s["bytes"] / 2**30
    both = min(s["raw_both_h2d_gbs"], s["raw_both_d2h_gbs"])
    regions = [j for j in lines if j.get("peer") == "regions" and j["rep"] > 0]
    md += [f"`relu` over [{s['rows']}, {s['cols']}] float32 ({gib:.2f} GiB each way). gpupiped "
           "as a process on the cuda backend (defaults: 16 MiB chunks), and a client on the same "
           "host. Rates are bytes each way over the wall time of one job, Submit to Done; median "
           f"of {s['reps']} after a warm-up. Every result was checked against the CPU's relu of "
           "fresh random input.", "",
           "| path | GB/s each way | x raw both ways |", "| --- | ---: | ---: |",
           f"| raw `cudaMemcpyAsync`, page-locked, host to device alone | {s['raw_h2d_gbs']:.1f} | |",
           f"| raw, device to host alone | {s['raw_d2h_gbs']:.1f} | |",
           f"| raw, both directions at once (the ceiling of an overlapped job) | "
           f"{s['raw_both_h2d_gbs']:.1f} in, {s['raw_both_d2h_gbs']:.1f} out | 1.00 |",
           f"| gpupipe, C++ client, input and output in registered regions | "
           f"{s['regions_gbs']:.1f} | {s['regions_vs_raw_both']:.2f} |"]
    py_rate = None
    if py:
        py_rate = statistics.median(j["gbs_each_way"] for j in py)
        md.append(f"| gpupipe, Python client, NumPy arrays in regions | {py_rate:.1f} | "
                  f"{py_rate / both:.2f} |")
    streamed = {}
    for j in lines:
        if j.get("peer") == "stream":
            n = j.get("streams", 1)
            streamed[n] = max(streamed.get(n, 0), j["gbs_each_way"])
    for n in sorted(streamed):
        md.append(f"| gpupipe, the same job streamed through loopback TCP (Run over {n} "
                  f"call{'s' if n > 1 else ''}) | {streamed[n]:.2f} | {streamed[n] / both:.3f} |")
    md += ["", f"Registering both regions (mapping and page-locking {2 * gib:.2f} GiB, once): "
           f"{s['register_seconds']:.2f} s; regions page-locked: {s['region_pinned']}.", ""]
    if regions:
        r = sorted(regions, key=lambda j: j["seconds"])[len(regions) // 2]
        md += [f"The median run's server timing: total {r['server_total_us'] / 1e3:.1f} ms; "
               f"copies in {r['h2d_us'] / 1e3:.1f} ms, kernels {r['compute_us'] / 1e3:.1f} ms, "
               f"copies out {r['d2h_us'] / 1e3:.1f} ms over {r['chunks']} chunks (these overlap).",
               ""]
    md += ["| target | measured | met |", "| --- | ---: | :---: |",
           f"| 1 GiB `relu`, co-located client, regions, end to end >= {TARGET_CPP} x raw both ways "
           f"| {s['regions_vs_raw_both']:.2f} x | {yes_no(s['regions_vs_raw_both'] >= TARGET_CPP)} |"]
    if py_rate is not None:
        md.append(f"| the same from Python with NumPy arrays in regions >= {TARGET_PY} x | "
                  f"{py_rate / both:.2f} x | {yes_no(py_rate / both >= TARGET_PY)} |")
    else:
        md.append(f"| the same from Python with NumPy arrays in regions >= {TARGET_PY} x | not run "
                  "| n/a |")
    if streamed:
        md += ["", "Streamed runs: the faster of two per number of calls, each call on a TCP "
               "connection of its own over loopback (the daemon's host stands in for a remote "
               "client: no network limits it). `gpupipe` and the client libraries choose the "
               "number of calls from the size (`--streams` forces it)."]
    # Optional reruns of the streamed peer under other daemon flags (streams_<name>.out, written by
    # `dataplane_bench --reps 1 --daemon-args "..."`), to show what does or does not limit it.
    for name in sorted(os.listdir(out_dir)):
        if not (name.startswith("streams_") and name.endswith(".out")):
            continue
        rows = {}
        for j in json_lines(os.path.join(out_dir, name)):
            if j.get("peer") == "stream":
                rows[j["streams"]] = max(rows.get(j["streams"], 0), j["gbs_each_way"])
        if rows:
            label = name[len("streams_"):-len(".out")]
            if label.startswith("rpc"):
                label = f"gpupiped --rpc-memory-mib {label[3:]} (default 128)"
            md += ["", f"The streamed peer again with `{label}`, faster of two (`{name}`), GB/s "
                   "each way by calls: " +
                   ", ".join(f"{n}: {rows[n]:.2f}" for n in sorted(rows)) + "."]
    md += ["", "Mismatches: " + str(s["mismatches"]) + "; failed calls: " + str(s["failures"]) + "."]
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, "dataplane-h200.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
