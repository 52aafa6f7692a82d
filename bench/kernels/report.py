#!/usr/bin/env python3
"""Assembles kernels_bench, torch_peers and cuobjdump's resource usage into one Markdown report.

Reads from OUT_DIR: kernels_bench.jsonl, torch_peers.jsonl, resource-usage.txt (optional),
nvidia-smi.txt, meta.json. Writes OUT_DIR/kernels-h200.md and OUT_DIR/auto-staging.json (the
winner per op / dtype / size class with its runner-up and direct's time, the input of
make_staging_table.py), and prints the targets table last. Standard library only.

With --keep-notes REPORT.md (run.sh passes the tree's bench/results/kernels-h200.md), the
sections that REPORT.md has after its generated "## Checks" section (what changed, experiments,
tuning notes: written by hand, and cited by the tuning policies) follow the fresh report, so
that a re-run replaces the measured tables and keeps the notes.

The targets, bandwidth and float32 staging tables cover float32 (the 2^28 cases with peers);
the other dtypes (the 2^26 sweep) have their own staging table and feed the winners.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import json_lines, us  # noqa: E402

# (case, peer source, peer match, minimum ratio peer time / our time, label)
TARGETS = [
    ("affine", "cub", None, 0.97, "affine, 2^28", "CUB DeviceTransform"),
    ("sum-row", "cub", None, 0.97, "sum, one row of 2^28", "CUB DeviceReduce::Sum"),
    ("sum-rows", "cub", None, 0.95, "sum, 16384 x 16384", "CUB DeviceSegmentedReduce::Sum"),
    ("sum-rows", "torch", None, 1.1, "sum, 16384 x 16384", "torch.sum(dim=-1)"),
    ("softmax", "torch", None, 1.15, "softmax, 16384 x 16384", "torch.softmax"),
    ("cumsum", "cub", None, 1.1, "cumsum, one row of 2^28", "CUB DeviceScan::InclusiveSum"),
    ("histogram", "cub", None, 0.95, "histogram(256, 0, 1), 2^28", "CUB DeviceHistogram::HistogramEven"),
    ("histogram", "torch", None, 4.0, "histogram(256, 0, 1), 2^28", "torch.histc"),
    ("convolve", "torch", None, 10.0, "convolve, 63 taps, same, 2^28", "torch conv1d"),
    ("topk", "torch", None, 5.0, "topk(16), 16384 x 16384", "torch.topk"),
    ("argmax", "torch", None, 1.3, "argmax, 16384 x 16384", "torch.argmax"),
    ("standardize", "torch", None, 3.0, "standardize, 16384 x 16384", "torch (x - mean) / std"),
    ("l2normalize", "torch", None, 1.8, "l2normalize, 16384 x 16384", "torch x / norm"),
]

CASES = ["affine", "sum-row", "sum-rows", "softmax", "cumsum", "histogram", "convolve", "topk",
         "argmax", "standardize", "l2normalize"]






def variant_name(j):
    return j["staging"] + (str(j["stages"]) if j.get("stages") else "")


def parse_resource_usage(path):
    """[(mangled name, {REG, STACK, SHARED, LOCAL, ...})] from cuobjdump --dump-resource-usage."""
    if not os.path.exists(path):
        return []
    out = []
    name = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"\s*Function ([^:\s]+):", line)
            if m:
                name = m.group(1)
                continue
            if name and "REG:" in line:
                fields = dict(re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", line))
                out.append((name, {k: int(v) for k, v in fields.items()}))
                name = None
    return out


def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        res = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True,
                             timeout=30)
        lines = res.stdout.splitlines()
        if len(lines) == len(names):
            return dict(zip(names, lines))
    except (OSError, subprocess.SubprocessError):
        pass
    return {n: n for n in names}


class Report:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.bench = json_lines(os.path.join(out_dir, "kernels_bench.jsonl"))
        self.torch = json_lines(os.path.join(out_dir, "torch_peers.jsonl"))
        self.meta = {}
        p = os.path.join(out_dir, "meta.json")
        if os.path.exists(p):
            with open(p) as f:
                self.meta = json.load(f)
        self.device = next((j for j in self.bench if j.get("kind") == "device"), {})
        self.tdev = next((j for j in self.torch if j.get("kind") == "torch_device"), {})
        self.ours_all = [j for j in self.bench if j.get("kind") == "ours"]
        self.ours = [j for j in self.ours_all if j.get("dtype", "float32") == "float32"]
        self.notes = []
        self.lines = []
        self.target_rows = []

    def w(self, s=""):
        self.lines.append(s)

    # -- lookups
    def best(self, case):
        c = [j for j in self.ours if j["case"] == case and j["check"].get("ok")]
        return min(c, key=lambda j: j["median_us"]) if c else None

    def cub(self, case):
        return next((j for j in self.bench if j.get("kind") == "peer" and j["case"] == case), None)

    def torch_peer(self, case):
        return next((j for j in self.torch if j.get("kind") == "torch" and j["case"] == case), None)

    def torch_check_failed(self, case):
        return any(j.get("kind") == "torch_check" and j["case"] == case and j.get("ok") is False
                   for j in self.torch)

    def not_built(self, case):
        return any(j.get("kind") == "not_built" and j["case"] == case and
                   j.get("dtype", "float32") == "float32" for j in self.bench)

    def copy_gbs(self):
        c = self.cub("copy")
        return c["gb_per_s"] if c else None

    # -- sections
    def header(self):
        d, t, m = self.device, self.tdev, self.meta
        self.w("# Kernels benchmark on the H200")
        self.w()
        self.w(f"- commit: `{m.get('commit', 'unknown')}`")
        self.w(f"- date: {m.get('date', 'unknown')}")
        self.w(f"- machine: {m.get('nvidia_smi', '') or d.get('name', 'unknown')} "
               f"({d.get('sms', '?')} SMs, L2 {int(d.get('l2_bytes', 0)) >> 20} MiB, CUDA driver "
               f"API {d.get('driver_api', '?')}, runtime {d.get('runtime', '?')})")
        self.w(f"- peers: CUB from CCCL {d.get('cccl', '?')} (same process); cudaMemcpy D2D; "
               f"PyTorch {t.get('torch', '?')} (CUDA {t.get('cuda', '?')}, cuDNN "
               f"{t.get('cudnn', '?')}, cudnn.allow_tf32={t.get('cudnn_allow_tf32', '?')}), eager")
        self.w(f"- kernels_bench: seed {d.get('seed', '?')}, {d.get('reps', '?')} timed repetitions "
               f"after {d.get('warmup', '?')} warm-up per measurement; figures are medians")
        self.w()
        self.w("Every case runs on the same 2^28 float32 input (1 GiB: one row of 2^28, or "
               "16384 x 16384), values (2q - 255)/256 for q in 0..255 (odd multiples of 1/256 in "
               "(-1, 1), mean zero) from a hash of the index, rebuilt bit for bit in PyTorch from "
               "the same seed. The quantization makes sums, scans and the convolution exact in "
               "float32, so those checks are exact; the histogram over [0, 1) sees 128 distinct "
               "values, one in every other bin. "
               "Before each timed run a 256 MiB read evicts L2 and a spin lets the host enqueue "
               "the region first; CUDA events around the op give device time. Ratios are peer "
               "time / our time (higher is better for us); ours is the fastest checked staging "
               "strategy at its best `stages`. GB/s counts bytes read plus written once each; "
               "reductions only read, so they can pass the copy figure.")
        self.w()

    def targets(self):
        for case, src, _, minimum, label, peer_label in TARGETS:
            ours = self.best(case)
            peer = self.cub(case) if src == "cub" else self.torch_peer(case)
            if self.not_built(case):
                self.target_rows.append((label, "not built", peer_label, f">= {minimum}x", "n/a"))
                continue
            if not ours or not peer:
                self.target_rows.append((label, "n/a" if not ours else f"{us(ours['median_us'])} us",
                                         f"{peer_label}: {'n/a' if not peer else us(peer['median_us']) + ' us'}",
                                         f">= {minimum}x", "n/a"))
                continue
            ratio = peer["median_us"] / ours["median_us"]
            met = "**met**" if ratio >= minimum else "**missed**"
            if self.torch_check_failed(case):
                met += " (but ours differs from PyTorch: see Checks)"
            self.target_rows.append((
                label,
                f"{us(ours['median_us'])} us ({variant_name(ours)}): **{ratio:.2f}x**",
                f"{peer_label} {us(peer['median_us'])} us",
                f">= {minimum}x",
                met))

    def targets_table(self):
        t = ["| op | ours (strategy): ratio | peer, same run | target | met |",
             "| --- | --- | --- | --- | --- |"]
        for r in self.target_rows:
            t.append("| " + " | ".join(r) + " |")
        return t

    def bandwidth(self):
        copy = self.copy_gbs()
        self.w("## Bandwidth")
        self.w()
        c = self.cub("copy")
        if c:
            self.w(f"cudaMemcpy D2D of 1 GiB: {us(c['median_us'])} us, {c['gb_per_s']:.0f} GB/s "
                   "(the 100% below).")
            self.w()
        self.w("| op | ours us | ours GB/s | % of copy | CUB us | CUB GB/s | torch us | torch GB/s |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for case in CASES:
            o, p, t = self.best(case), self.cub(case), self.torch_peer(case)
            if self.not_built(case):
                self.w(f"| {case} | not built | | | | | | |")
                continue
            pct = f"{100 * o['gb_per_s'] / copy:.0f}%" if o and copy else "n/a"
            self.w(f"| {case} | {us(o['median_us']) if o else 'n/a'} | "
                   f"{o['gb_per_s']:.0f} | {pct} | " if o else f"| {case} | n/a | n/a | n/a | ")
            self.lines[-1] += (f"{us(p['median_us'])} | {p['gb_per_s']:.0f} | " if p else " | | ")
            self.lines[-1] += (f"{us(t['median_us'])} | {t['gb_per_s']:.0f} |" if t else " | |")
        self.w()

    def stagings(self):
        self.w("## Staging strategies side by side")
        self.w()
        self.w("Median us of every strategy at each `stages` it takes; the best per strategy in bold.")
        self.w()
        self.staging_table(self.ours, [(c, c) for c in CASES])
        sweep = [j for j in self.ours_all if j.get("dtype", "float32") != "float32"]
        if not sweep:
            return
        d = self.device
        self.w("### Other dtypes (2^26 elements)")
        self.w()
        self.w(f"float64, float16 and int32 on 2^26 elements (one row; 8192 x 8192; 4096 x 16384), "
               f"{d.get('sweep_reps', '?')} timed repetitions after {d.get('sweep_warmup', '?')} "
               "warm-up; checked against the first strategy's output (exact, or within the "
               "dtype's rounding for softmax and normalizations). No peers.")
        self.w()
        keys = []
        for j in sweep:
            k = (j["dtype"], j["case"])
            if k not in keys:
                keys.append(k)
        self.staging_table(sweep, [((dt, c), f"{c} {dt}") for dt, c in keys],
                           key=lambda j: (j["dtype"], j["case"]))

    def staging_table(self, runs, cases, key=lambda j: j["case"]):
        names = []
        for j in runs:
            n = variant_name(j)
            if n not in names:
                names.append(n)
        self.w("| op | " + " | ".join(names) + " | kernels |")
        self.w("| --- | " + " | ".join("---" for _ in names) + " | --- |")
        for case, label in cases:
            rows = {variant_name(j): j for j in runs if key(j) == case}
            if not rows:
                continue
            best_of = {}
            for j in rows.values():
                s = j["staging"]
                if s not in best_of or j["median_us"] < best_of[s]["median_us"]:
                    best_of[s] = j
            cells = []
            for n in names:
                j = rows.get(n)
                if not j:
                    cells.append("")
                    continue
                v = us(j["median_us"]) + ("" if j["check"].get("ok") else " (check FAILED)")
                cells.append(f"**{v}**" if best_of.get(j["staging"]) is j else v)
            k = sorted({j["kernels"] for j in rows.values()})
            self.w(f"| {label} | " + " | ".join(cells) + f" | {', '.join(map(str, k))} |")
        self.w()

    def auto_table(self):
        winners = [{k: j.get(k) for k in ("op", "dtype", "rows", "cols", "shape", "size_class",
                                           "staging", "stages", "median_us", "runner_up",
                                           "direct_us")}
                   for j in self.bench if j.get("kind") == "winner"]
        with open(os.path.join(self.out_dir, "auto-staging.json"), "w") as f:
            json.dump({"commit": self.meta.get("commit"), "date": self.meta.get("date"),
                       "device": self.device.get("name"),
                       "machine": self.meta.get("nvidia_smi") or self.device.get("name"),
                       "winners": winners}, f, indent=1)
        self.w("## Winners for the `auto` staging table")
        self.w()
        self.w("Also in `auto-staging.json` (and as `winner` lines in kernels_bench.jsonl). "
               "`bench/kernels/make_staging_table.py` writes the winners of the op families "
               "that read the table into `kernels/cuda/tuning/staging_table.h`, whose entries "
               "cite this section for their figures (a winner less than 2% faster than direct "
               "keeps direct there).")
        self.w()
        self.w("| op | dtype | shape | size class | staging | stages | us | runner-up | direct us |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for j in winners:
            ru = j.get("runner_up") or {}
            ru_s = (f"{variant_name(ru)} {us(ru['median_us'])}" if ru.get("staging") else "-")
            self.w(f"| {j['op']} | {j['dtype']} | {j['shape']} | {j['size_class']} | "
                   f"{j['staging']} | {j['stages'] or '-'} | {us(j['median_us'])} | {ru_s} | "
                   f"{us(j.get('direct_us'))} |")
        self.w()

    def resources(self):
        usage = parse_resource_usage(os.path.join(self.out_dir, "resource-usage.txt"))
        ours = [(n, f) for n, f in usage if "gpupipe" in n and "bench" not in n]
        self.w("## Registers and local memory of our kernels (cuobjdump --dump-resource-usage)")
        self.w()
        if not ours:
            self.w("(no resource usage found: see cuobjdump.stderr)")
            self.w()
            return
        names = demangle([n for n, _ in ours])
        self.w("LOCAL > 0 means local memory per thread (spills or local arrays).")
        self.w()
        self.w("| kernel | REG | STACK | LOCAL | SHARED |")
        self.w("| --- | --- | --- | --- | --- |")
        for n, f in sorted(ours, key=lambda x: names[x[0]]):
            d = names[n]
            d = d if len(d) <= 140 else d[:137] + "..."
            self.w(f"| `{d}` | {f.get('REG', '?')} | {f.get('STACK', '?')} | "
                   f"{f.get('LOCAL', '?')} | {f.get('SHARED', '?')} |")
        spills = [names[n] for n, f in ours if f.get("LOCAL", 0) > 0]
        if spills:
            self.notes.append(f"{len(spills)} of our kernels use local memory (see the table).")
        self.w()

    def checks(self):
        self.w("## Checks")
        self.w()
        n = len(self.ours_all)
        failed = [j for j in self.ours_all if not j["check"].get("ok")]
        self.w(f"- kernels_bench: {n} runs of our kernels checked before timing ({len(failed)} "
               "failed): against CUB's output (affine, sums, cumsum, histogram: exact or 1e-6 "
               "relative) or against the first strategy's output, itself checked against PyTorch "
               "below; outputs are poisoned before each run.")
        for j in failed:
            c = j["check"]
            dt = j.get("dtype", "float32")
            dt = "" if dt == "float32" else f" {dt}"
            self.w(f"  - FAILED {j['case']}{dt} {variant_name(j)}: {c.get('bad')} bad values, max "
                   f"error {c.get('max_abs_err')} vs {c.get('against')}")
        for j in self.bench:
            if j.get("kind") == "error":
                self.w(f"- error: {j['case']} {j.get('dtype', 'float32')} {j['staging']} stages "
                       f"{j['stages']}: {j['error']}")
        for j in self.torch:
            if j.get("kind") == "torch_check":
                ok = j.get("ok")
                state = "ok" if ok else ("no samples" if ok is None else "**FAILED**")
                detail = ""
                if "compared" in j:
                    detail = f", {j['compared']} values compared, {j.get('bad', 0)} bad"
                if "max_abs_err" in j:
                    detail += f", max abs error {j['max_abs_err']:.3g} (max |ref| {j['max_abs_ref']:.3g})"
                self.w(f"- ours vs PyTorch, {j['case']} ({j.get('variant', '?')}): {state}{detail}")
            elif j.get("kind") == "torch_error":
                self.w(f"- PyTorch {j['case']}: error {j['error']}")
        if not any(j.get("kind") == "done" for j in self.bench):
            self.notes.append("kernels_bench did not finish (see kernels_bench.stderr).")
        if not any(j.get("kind") == "torch" for j in self.torch):
            self.notes.append("torch_peers.py produced no timings (see torch_peers.stderr).")
        for n_ in self.notes:
            self.w(f"- note: {n_}")
        self.w()

    def build(self):
        self.header()
        self.targets()
        self.w("## Targets")
        self.w()
        self.lines += self.targets_table()
        self.w()
        self.bandwidth()
        self.stagings()
        self.auto_table()
        self.resources()
        self.checks()
        return "\n".join(self.lines) + "\n"


def hand_written_sections(report_text):
    """The part of a report after its generated "## Checks" section: from the first "## "
    heading that follows it to the end ("" when there is none)."""
    lines = report_text.splitlines(keepends=True)
    checks = next((i for i, l in enumerate(lines) if l.rstrip() == "## Checks"), None)
    if checks is None:
        return ""
    start = next((i for i in range(checks + 1, len(lines)) if lines[i].startswith("## ")), None)
    return "".join(lines[start:]) if start is not None else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--keep-notes", metavar="REPORT.md",
                    help="append the hand-written sections of this earlier report")
    args = ap.parse_args()
    r = Report(args.out_dir)
    md = r.build()
    if args.keep_notes and os.path.exists(args.keep_notes):
        with open(args.keep_notes, encoding="utf-8") as f:
            notes = hand_written_sections(f.read())
        if notes:
            md = md.rstrip("\n") + "\n\n" + notes
    path = os.path.join(args.out_dir, "kernels-h200.md")
    with open(path, "w") as f:
        f.write(md)
    print(f"(full report: {path})")
    print()
    print("\n".join(r.targets_table()))
    for n in r.notes:
        print(f"note: {n}")


if __name__ == "__main__":
    sys.exit(main())
