#!/usr/bin/env python3
"""Turns small_jobs_bench's JSON lines into OUT_DIR/service-h200.md (to be copied to
bench/results/service-h200.md) and prints it. Standard library only.

Reads OUT_DIR/small_jobs_bench.out (one JSON line per measurement, then a summary line) and
OUT_DIR/service-meta.json (written by run.sh).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import json_lines, run_header, us  # noqa: E402

TARGET = 0.97  # small-job throughput with metrics and stats served and polled, against off


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    lines = json_lines(os.path.join(out_dir, "small_jobs_bench.out"))
    rows = [j for j in lines if not j.get("summary")]
    summary = next((j for j in lines if j.get("summary")), None)
    md = ["# Small-job throughput: metrics and stats on against off", ""]
    md += run_header(os.path.join(out_dir, "service-meta.json"))
    if summary is None:
        md += ["small_jobs_bench produced no summary (see small_jobs_bench.stderr)."]
    else:
        md += [f"gpupiped as a process on the **{summary['backend']}** backend (`--quiet`), driven "
               f"over loopback by {summary['threads']} client threads, each with its own channel "
               f"and client-id and one `Submit` in flight: `relu` on {summary['elements']} float32 "
               f"({summary['elements'] * 4 // 1024} KiB each way), every result checked against "
               f"the CPU's relu of fresh random input. Each repetition starts the daemon once per "
               f"mode, in alternating order; jobs finished in {summary['seconds']:g} s after a "
               f"{summary['warmup_s']:g} s warm-up are counted; median of {summary['reps']}.", "",
               f"- **off**: `--metrics-listen ''`, nobody asks for stats.",
               f"- **on**: metrics on a loopback port; a poller GETs `/metrics` and calls "
               f"`GetStats` every {summary['poll_ms']} ms (a Prometheus default scrape is every "
               f"15 s).",
               "- The engine's counters that both read are kept in both modes.", "",
               "| mode | median jobs/s | runs (jobs/s) | p50 latency us | p99 latency us | polls |",
               "| --- | ---: | --- | ---: | ---: | ---: |"]
        for mode in ("off", "on"):
            mine = [r for r in rows if r["mode"] == mode]
            if not mine:
                continue
            rates = [r["jobs_per_s"] for r in mine]
            md.append(f"| {mode} | {statistics.median(rates):,.0f} | "
                      + ", ".join(f"{x:,.0f}" for x in rates) + " | "
                      f"{us(statistics.median(r['p50_us'] for r in mine))} | "
                      f"{us(statistics.median(r['p99_us'] for r in mine))} | "
                      f"{sum(r['polls'] for r in mine)} |")
        ratio = summary["on_vs_off"]
        problems = [r for r in rows if r.get("failure") or r["mismatches"] or r["errors"]
                    or r["poll_failures"]]
        md += ["",
               "| target | measured | met |", "| --- | ---: | :---: |",
               f"| small-job throughput, metrics and stats on >= {TARGET}x off | {ratio:.3f}x | "
               f"{'yes' if ratio >= TARGET else '**no**'} |", "",
               "Every result matched the CPU reference and every call and poll succeeded."
               if summary.get("clean") and not problems else
               f"**Not clean**: {len(problems)} measurement(s) with failures, mismatches, errors "
               f"or failed polls (see small_jobs_bench.out)."]
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, "service-h200.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
