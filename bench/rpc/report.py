#!/usr/bin/env python3
"""Turns rpc_bench's JSON lines into OUT_DIR/rpc-h200.md (to be folded into
bench/results/engine-h200.md) and prints it. Standard library only.

Reads OUT_DIR/rpc_bench.out (one JSON line per measurement, then a summary line) and
OUT_DIR/rpc-meta.json (written by run.sh).
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import run_header  # noqa: E402

TARGET = 0.8  # Run's throughput against a plain gRPC stream of the same bytes (the brief's bar)


def window_text(kib):
    """The server's stream window as the report names it."""
    if kib is None:
        return "gRPC's automatic stream window"
    if kib == 0:
        return "gRPC's automatic stream window (--stream-window-kib 0)"
    return f"a fixed stream window of {kib} KiB"


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    rows, summary = [], None
    with open(os.path.join(out_dir, "rpc_bench.out"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            if j.get("summary"):
                summary = j
            else:
                rows.append(j)
    md = ["# Streaming upload (Run) over loopback", ""]
    md += run_header(os.path.join(out_dir, "rpc-meta.json"))
    if summary is None:
        md += ["rpc_bench produced no summary (see rpc_bench.stderr)."]
    else:
        gib = summary["bytes"] / 2**30
        md += [f"{gib:.2f} GiB of float32 each way, `relu` on the **{summary['backend']}** backend, "
               f"messages of {summary['message_bytes']} bytes, "
               f"{window_text(summary.get('stream_window_kib'))}, one client channel for all kinds, "
               f"median of {summary['reps']} interleaved repetitions after a warm-up.", "",
               "| kind | median s | GB/s each way | runs (s) |", "| --- | ---: | ---: | --- |"]
        for kind in ("run", "echo-sequential", "echo-duplex"):
            secs = [r["seconds"] for r in rows if r["kind"] == kind]
            if not secs:
                continue
            m = statistics.median(secs)
            md.append(f"| {kind} | {m:.3f} | {summary['bytes'] / m / 1e9:.2f} | "
                      + ", ".join(f"{s:.3f}" for s in secs) + " |")
        seq, dup = summary["run_vs_echo_sequential"], summary["run_vs_echo_duplex"]
        md += ["",
               "| target | measured | met |", "| --- | ---: | :---: |",
               f"| Run >= {TARGET}x a plain gRPC stream of the same bytes, sent then returned "
               f"(echo-sequential) | {seq:.2f}x | {'yes' if seq >= TARGET else '**no**'} |",
               f"| Run against the same bytes echoed while they arrive (echo-duplex) | {dup:.2f}x | "
               f"{'yes' if dup >= TARGET else '**no**'} |", "",
               "- **run**: `JobClient::Run` as the CLI uses it: spec, input chunks, the job, result "
               "chunks, Timing, Done; the client assembles the result. Includes the server's input "
               "buffer fill, the job itself (H2D, kernel, D2H on the GPU) and the result copy.",
               "- **echo-sequential**: the same messages through a plain callback bidi stream "
               "(bench/rpc/echo.proto), held until the client half-closes, then sent back: the "
               "shape of Run while backends wait for the whole input.",
               "- **echo-duplex**: each message echoed as it arrives: the transport's ceiling for "
               "both directions at once, which Run approaches only once a chunked backend computes "
               "and streams results during the upload."]
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, "rpc-h200.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
