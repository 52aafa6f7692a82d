#!/usr/bin/env python3
"""Turns engine_bench's JSON lines into bench/results/engine-h200.md.

Reads OUT_DIR/engine_bench.out and OUT_DIR/engine-meta.json; writes OUT_DIR/engine-h200.md and
prints its targets table last. Standard library only.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import json_lines, yes_no  # noqa: E402

PINNED_ANCHOR = {"h2d": 55.5, "d2h": 55.4}  # /work/shared/ANCHORS.md, pinned 1 GiB copies


# Why each target lands where it does; kept with the report so every run carries it.
LIMITS = [
    "- **a (overlap)**: on a page-locked input (what a `Run` upload lands in) a chunk passes "
    "three stages, the copy in, the kernels and the copy out, on three streams; the span carries "
    "one chunk's fill and drain beside the longest stage (3/32 of the job at most), and the "
    "copy in runs beside the copy out, which slows both a little on a PCIe 5 link. A pageable "
    "input has a fourth stage, the host's copy of each chunk into pinned staging on the copy "
    "pool's threads, bound by the host's memory bandwidth. The pipeline stages chunk k+1 "
    "before it enqueues chunk k, so that copy runs while the worker thread enqueues and hands "
    "over the others, and by the time the DMA reads a staging buffer the CPU has moved on to "
    "the next one: its lines are no longer in the CPU's caches, so plain memcpy (the faster "
    "copy) no longer slows the DMA with snoops, as it did when each chunk's DMA followed its "
    "copy at once. Non-temporal stores, which avoided that, are now the slower choice.",
    "- **b (staging)**: the DMA of a chunk from pinned staging runs at raw speed alone: the "
    "sum row, whose copies out are a few bytes, moves its copies in at about raw speed. In a "
    "relu job each copy in shares the link with the previous chunk's copy out, and with "
    "pageable input the host's memory with the next chunks' staging copies. The bidirectional "
    "raw figure (`raw with the other direction at once`) is the ceiling a pipelined job can "
    "reach each way, and it differs from machine to machine; the page-locked input rings "
    "(`--input-ring-total-mib`, what `Run` uploads land in) remove the staging copy.",
    "- **c (priority)**: stream priorities order only the dispatch of new thread blocks; a "
    "resident block of the load keeps its SM until it finishes, and copy engines ignore "
    "priorities. So a high-priority job waits behind the load's resident blocks and queued "
    "copies. Two things bound that wait. While a higher-priority job runs, a lower-priority "
    "lane holds its next chunk back (server/engine/scheduling/priority_gate.h and the chunk "
    "pipeline, at most 20 ms a chunk), so "
    "the probe competes only with chunks already enqueued: this took the p99 from 2.08 x to "
    "1.3-1.5 x idle (three H200 runs). And low-priority jobs run in chunks of at most 512 KiB "
    "(`ChunkPolicy::low_priority_chunk_bytes`): a copy of about 10 us and an elementwise "
    "grid of 128 blocks, so three busy low-priority lanes leave most SM slots free and a probe's "
    "copy queues behind at most a few short ones. The price is the load's own throughput: a "
    "small grid of this 64-op chain is latency-bound (each thread's serial work sets a block's "
    "time, whatever the grid), so low-priority jobs finish fewer chunks per second even when "
    "the GPU has room (compare `load_jobs` of the two loaded rows). The same-priority row "
    "shows the load without the cap.",
]






def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    rows = json_lines(os.path.join(out_dir, "engine_bench.out"))
    meta = {}
    meta_path = os.path.join(out_dir, "engine-meta.json")
    if os.path.exists(meta_path):
        meta = json.load(open(meta_path))
    device = next((r for r in rows if r["bench"] == "device"), {})
    # The backend's own host copies (rows before `backend_default` existed: streaming stores,
    # or no field at all before those), and the other kind for comparison.
    def backend_default(r):
        return r.get("backend_default", r.get("host_copies", "streaming") == "streaming")

    overlap = {r["copy_streams"]: r for r in rows
               if r["bench"] == "overlap" and backend_default(r)
               and r.get("host_copies") != "none (pinned input)"}
    cached = next((r for r in rows if r["bench"] == "overlap" and r["copy_streams"]
                   and not backend_default(r)), None)
    pinned_overlap = next((r for r in rows if r["bench"] == "overlap"
                           and r.get("host_copies") == "none (pinned input)"), None)
    staging_by_case = {(r.get("input", "pageable"), r.get("op", "relu")): r
                       for r in rows if r["bench"] == "staging"}
    staging = staging_by_case.get(("pageable", "relu"))
    pinned = staging_by_case.get(("pinned", "relu"))
    pinned_sum = staging_by_case.get(("pinned", "sum"))
    priority = {r["case"]: r for r in rows if r["bench"] == "priority"}

    # Span over the longest stage of the pipeline, the host's staging copy included (older
    # outputs have only the device-stage ratio).
    def ratio_all(r):
        return r.get("ratio_all", r["span_us"] / max(r["longest_us"], r.get("host_staging_us", 0)))

    targets = ["| target | measured | beside it | target | met |", "| --- | --- | --- | --- | --- |"]
    o = overlap.get(True)
    serial = overlap.get(False)
    if pinned_overlap:
        p = pinned_overlap
        targets.append(
            f"| a: overlap, {p['job_bytes'] >> 20} MiB in {p['chunks']} chunks, {p['ops']}-op "
            f"chain, page-locked input (how a `Run` upload arrives) | span {p['span_us']:,.0f} us "
            f"= {p['ratio']:.2f} x longest stage (h2d {p['h2d_us']:,.0f}, compute "
            f"{p['compute_us']:,.0f}, d2h {p['d2h_us']:,.0f} us) | "
            + (f"one stream, no overlap: {serial['span_us']:,.0f} us = {serial['ratio']:.2f} x"
               if serial else "n/a")
            + f" | <= 1.15 x | {yes_no(p['ratio'] <= 1.15)} |")
    if o:
        targets.append(
            f"| a: overlap, the same on pageable input (a `Submit` request), staged by the host "
            f"({o.get('host_copies', 'streaming')} copies) "
            f"| span {o['span_us']:,.0f} us = {ratio_all(o):.2f} x longest stage, the host's "
            f"staging copies {o.get('host_staging_us', 0):,.0f} us ({o['ratio']:.2f} x the "
            f"longest device stage: h2d {o['h2d_us']:,.0f}, compute {o['compute_us']:,.0f}, d2h "
            f"{o['d2h_us']:,.0f} us) | "
            + (f"with {cached['host_copies']} host copies instead: span {cached['span_us']:,.0f} us = "
               f"{ratio_all(cached):.2f} x (h2d {cached['h2d_us']:,.0f} us), host copies "
               f"{cached['host_staging_us']:,.0f} us" if cached else "n/a")
            + f" | <= 1.15 x | {yes_no(ratio_all(o) <= 1.15)} |")
    if not o and not pinned_overlap:
        targets.append("| a: overlap | not measured | | <= 1.15 x | n/a |")
    if staging:
        for label, row in (("through pinned staging", staging), ("from an upload's page-locked input ring", pinned)):
            if not row:
                continue
            for way in ("h2d", "d2h"):
                raw = row[f"raw_{way}_gbs"]
                ratio = row[f"{way}_gbs"] / raw if raw else 0
                both = row.get(f"both_{way}_gbs")
                beside = (f"raw pinned cudaMemcpyAsync {raw:.1f} GB/s (anchor {PINNED_ANCHOR[way]})"
                          + (f"; raw with the other direction at once {both:.1f} GB/s" if both else ""))
                targets.append(
                    f"| b: {way} of a 1 GiB job {label} | {row[f'{way}_gbs']:.1f} GB/s "
                    f"= {ratio:.2f} x raw | {beside} | >= 0.9 x | {yes_no(ratio >= 0.9)} |")
        if pinned_sum:
            raw = pinned_sum["raw_h2d_gbs"]
            ratio = pinned_sum["h2d_gbs"] / raw if raw else 0
            targets.append(
                f"| b: h2d of a 1 GiB sum from an upload's page-locked input ring (a few bytes out, so no "
                f"copy out beside the copies in) | {pinned_sum['h2d_gbs']:.1f} GB/s = {ratio:.2f} x "
                f"raw | raw pinned cudaMemcpyAsync {raw:.1f} GB/s | >= 0.9 x | {yes_no(ratio >= 0.9)} |")
    else:
        targets.append("| b: pinned staging | not measured | | >= 0.9 x | n/a |")
    idle, low, same = priority.get("idle"), priority.get("low-priority load"), priority.get("same-priority load")
    if idle and low:
        ratio = low["span_p99_us"] / idle["span_p99_us"] if idle["span_p99_us"] else 0
        beside = f"same-priority load: p99 {same['span_p99_us']:.1f} us" if same else "n/a"
        targets.append(
            f"| c: high-priority {idle['probe']} under low-priority load, device span p99 | "
            f"{low['span_p99_us']:.1f} us = {ratio:.2f} x idle p99 {idle['span_p99_us']:.1f} us | "
            f"{beside} | <= 2 x idle | {yes_no(ratio <= 2.0)} |")
    else:
        targets.append("| c: priority isolation | not measured | | <= 2 x idle | n/a |")

    md = ["# Engine benchmark on the H200", ""]
    md.append(f"- commit: `{meta.get('commit', 'unknown')}`")
    md.append(f"- date: {meta.get('date', 'unknown')}")
    md.append(f"- machine: {meta.get('nvidia_smi', '')} ({device.get('sms', '?')} SMs, "
              f"{device.get('memory_gib', '?')} GiB; {meta.get('host_cores', '?')} host cores)")
    if o or pinned_overlap:
        md.append(f"- backend: {(o or pinned_overlap).get('memory', '')}")
    md += ["",
           "engine_bench drives the Engine API in process (no gRPC) with the CUDA backend. Stage "
           "times are sums over a job's chunks of CUDA event intervals on the stream that ran "
           "the stage; a job's *span* runs from its first copy in to its last copy out (its "
           "timeline). Figures are medians of the timed repetitions (the first run of each "
           "shape captures graphs and is left out).", "",
           "## Targets", ""] + targets + ["", "## What limits each target", ""] + LIMITS + [
               "", "## Raw results", "", "```"]
    md += [json.dumps(r) for r in rows]
    md += ["```", ""]
    path = os.path.join(out_dir, "engine-h200.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    print("\n".join(targets))
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
