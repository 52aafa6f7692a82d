#!/usr/bin/env python3
"""Assembles planner_bench, its Nsight Compute run and torch_peers into one Markdown report.

Reads from OUT_DIR: planner_bench.out (JSON lines mixed with the human table),
isolated-kernels.json and ncu.csv (optional), torch_peers.jsonl, nvidia-smi.txt, meta.json.
Writes OUT_DIR/planner-h200.md and prints its targets table (the part a reader needs first),
so that it ends the run's output. Standard library only.
"""
import argparse
import csv
import io
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import json_lines, us, yes_no  # noqa: E402

MODES = ("stream", "pdl", "graph", "graph-pdl")
STAGINGS = ("pipeline2", "direct")
COPY_ANCHOR_GBS = 4240  # /work/shared/ANCHORS.md, device-to-device cudaMemcpy of 1 GiB








# ---- Nsight Compute ------------------------------------------------------------------------------

UNIT_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
              "second": 1e6, "s": 1e6}


def parse_ncu(path):
    """[(kernel name, duration us)] in launch order, from `ncu --csv` output; None if absent."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return None
    rows = csv.DictReader(io.StringIO("\n".join(l for l in lines[start:] if l.startswith('"'))))
    out = {}
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = UNIT_TO_US.get(r.get("Metric Unit", "nsecond").strip(), None)
        try:
            value = float(r["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        if unit is None:
            continue
        out[int(r["ID"])] = (r.get("Kernel Name", ""), value * unit)
    return [out[k] for k in sorted(out)]


# ---- report --------------------------------------------------------------------------------------


class Report:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.bench = json_lines(os.path.join(out_dir, "planner_bench.out"))
        self.torch = json_lines(os.path.join(out_dir, "torch_peers.jsonl"))
        self.meta = {}
        meta_path = os.path.join(out_dir, "meta.json")
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                self.meta = json.load(f)
        self.measures = [j for j in self.bench if j.get("kind") == "measure"]
        self.notes = []
        self.lines = []

    # -- lookups
    def m(self, case, variant, staging, mode, l2):
        for j in self.measures:
            if (j["case"], j["variant"], j["staging"], j["mode"], j["l2"]) == (
                    case, variant, staging, mode, l2):
                return j
        return None

    def best(self, case, variant, l2, stagings=STAGINGS, modes=MODES):
        cands = [j for j in self.measures if j["case"] == case and j["variant"] == variant
                 and j["l2"] == l2 and j["staging"] in stagings and j["mode"] in modes]
        return min(cands, key=lambda j: j["median_us"]) if cands else None

    def t(self, case, variant, l2):
        for j in self.torch:
            if j.get("kind") == "torch" and (j["case"], j["variant"], j["l2"]) == (case, variant, l2):
                return j
        return None

    def tval(self, case, variant, l2):
        j = self.t(case, variant, l2)
        return j["median_us"] if j else None

    # -- case C's kernel durations
    def own_durations(self):
        """{staging: ([durations us], source)} for the chain's kernels."""
        order_path = os.path.join(self.out_dir, "isolated-kernels.json")
        ncu = parse_ncu(os.path.join(self.out_dir, "ncu.csv"))
        result = {}
        if ncu is not None and os.path.exists(order_path):
            with open(order_path) as f:
                order = json.load(f)["kernels"]
            if len(ncu) >= len(order):
                if len(ncu) > len(order):
                    self.notes.append(f"ncu reported {len(ncu)} kernels for {len(order)} "
                                      "launched; the last ones were matched.")
                ncu = ncu[len(ncu) - len(order):]
                self.ncu_rows = list(zip(order, ncu))
                for o, (_, d) in self.ncu_rows:
                    result.setdefault(o["staging"], ([], "Nsight Compute gpu__time_duration"))[0].append(d)
            else:
                self.notes.append(f"ncu reported {len(ncu)} kernels for {len(order)} launched: "
                                  "not used.")
        elif ncu is None:
            self.notes.append("Nsight Compute durations missing (see ncu.stderr): kernel "
                              "durations fall back to event timing of each kernel alone "
                              "(a single-node graph launch each, so they read a little high).")
        events = [j for j in self.bench if j.get("kind") == "isolated_events"]
        self.event_rows = events
        for st in STAGINGS:
            if st not in result:
                ds = [j["median_us"] for j in sorted(events, key=lambda j: j["index"])
                      if j["staging"] == st]
                if ds:
                    result[st] = (ds, "event timing of each kernel alone")
        return result

    # -- building
    def w(self, s=""):
        self.lines.append(s)

    def header(self):
        dev = next((j for j in self.bench if j.get("kind") == "device"), {})
        tdev = next((j for j in self.torch if j.get("kind") == "torch_device"), {})
        smi = self.meta.get("nvidia_smi", "").strip()
        self.w("# Planner benchmark on the H200")
        self.w()
        self.w(f"- commit: `{self.meta.get('commit', 'unknown')}`")
        self.w(f"- date: {self.meta.get('date', 'unknown')}")
        self.w(f"- machine: {smi or dev.get('name', 'unknown')} "
               f"({dev.get('multiprocessors', '?')} SMs, L2 {dev.get('l2_bytes', 0) / 2**20:.0f} MiB, "
               f"CUDA driver API {dev.get('driver_api', '?')}, runtime {dev.get('runtime_api', '?')})")
        self.w(f"- PyTorch {tdev.get('torch', 'n/a')} (CUDA {tdev.get('cuda', 'n/a')})")
        self.w(f"- planner_bench: seed {dev.get('seed', '?')}, {dev.get('reps', '?')} timed "
               f"repetitions after {dev.get('warmup', '?')} warm-up per measurement (more for "
               "rotations); figures are medians")
        self.w()
        self.w("Device time is taken with CUDA events around the plan's kernels only (inputs "
               "already on the device, outputs left there). A spin kernel queued ahead of the "
               "start event lets the host enqueue the whole plan before the device reaches it, so "
               "host submission is not counted (the daemon hides it behind the input copy); "
               "PyTorch is timed the same way (`torch.cuda._sleep` ahead). **hot**: one buffer "
               "set reused, data in L2 as in PyTorch's graph replay of a static input; **cold**: "
               "rotation through enough buffer sets (inputs) to span three times the L2. Plans "
               "are built by ValidateJob + PlanJob and launched by LaunchPlan; graph modes go "
               "through the daemon's GraphCache (capture of LaunchPlan, instantiate once, replay).")
        self.w()

    def targets(self):
        rows = []
        # A
        for l2 in ("hot", "cold"):
            b = self.best("A", "planner", l2)
            tg, te = self.tval("A", "graph", l2), self.tval("A", "eager", l2)
            if b:
                rows.append((f"A: affine(2,1)\\|relu\\|sqrt\\|softmax, 1 row of 2^20, device time ({l2} L2)",
                             f"{us(b['median_us'])} us ({b['mode']}, {b['staging']})",
                             f"torch graph {us(tg)} us, eager {us(te)} us",
                             "<= 20 us", yes_no(b["median_us"] <= 20.0)))
        # B
        for l2 in ("hot", "cold"):
            b = self.best("B", "planner", l2)
            tg = self.tval("B", "graph", l2)
            if b:
                ratio = b["median_us"] / tg if tg else None
                rows.append((f"B: same ops on 1024 x 1024 ({l2} L2)",
                             f"{us(b['median_us'])} us ({b['mode']}, {b['staging']}) = "
                             f"{'n/a' if ratio is None else f'{ratio:.2f}'} x torch graph",
                             f"torch graph {us(tg)} us, eager {us(self.tval('B', 'eager', l2))} us",
                             "<= 0.5 x torch graph", yes_no(None if ratio is None else ratio <= 0.5)))
        # C
        self.chain = self.chain_analysis()
        head = None
        for st in STAGINGS:
            c = self.chain.get((st, "graph-pdl"))
            if c and c.get("boundary") is not None and (head is None or c["T"] < head[1]["T"]):
                head = (st, c)
        if head:
            st, c = head
            ok = c["boundary"] <= 1.2 * c["floor"] if c["floor"] else None
            rows.append((f"C: 16 x softmax chain ({c['kernels']} kernels) on 1024 x 1024, cost "
                         "per kernel boundary, graph-pdl",
                         f"{us(c['boundary'])} us per boundary ({st}; chain {us(c['T'])} us, "
                         f"kernels' own {us(c['own'])} us, {c['source']})",
                         f"floor {us(c['floor'])} us per kernel ({c['empty_kernels']} empty kernels, "
                         f"graph-pdl, same geometry); torch graph chain "
                         f"{us(self.tval('C', 'graph', 'hot'))} us",
                         "<= 1.2 x floor",
                         yes_no(ok) + ("" if not c["floor"] else f" ({c['boundary'] / c['floor']:.2f} x)")))
        # D
        f, s = self.best("D", "fused", "cold"), self.best("D", "six-kernels", "cold")
        te = self.tval("D", "eager", "cold")
        if f and s:
            speed = s["median_us"] / f["median_us"]
            rows.append(("D: 6 elementwise ops on 2^28, fused (1 kernel) vs six kernels",
                         f"fused {us(f['median_us'])} us ({f['mode']}, {f['staging']}), six "
                         f"{us(s['median_us'])} us ({s['mode']}, {s['staging']}): {speed:.2f} x",
                         f"torch eager (six kernels) {us(te)} us"
                         + (f" = {te / f['median_us']:.2f} x fused" if te else ""),
                         ">= 5 x", yes_no(speed >= 5.0)))
            copy = self.m("D", "cudaMemcpy-d2d", "-", "stream", "cold")
            cg = copy.get("gb_per_s") if copy else None
            rows.append(("D: fused kernel bandwidth (2^28 x 4 B read + written)",
                         f"{f['gb_per_s']:.0f} GB/s"
                         + (f" = {100 * f['gb_per_s'] / cg:.0f}% of copy" if cg else ""),
                         f"cudaMemcpy d2d {cg:.0f} GB/s in this run (anchor {COPY_ANCHOR_GBS})"
                         if cg else f"anchor copy {COPY_ANCHOR_GBS} GB/s",
                         "(reported)", "n/a"))
        self.target_rows = rows

    def chain_analysis(self):
        own = self.own_durations()
        self.own = own
        out = {}
        for st in STAGINGS:
            for mode in MODES:
                j = self.m("C", "planner", st, mode, "hot")
                if not j:
                    continue
                e = self.m("C", "empty", st, mode, "hot")
                k = j["kernels"]
                entry = {"T": j["median_us"], "kernels": k, "per_kernel": j["median_us"] / k,
                         "floor": e["median_us"] / e["kernels"] if e else None,
                         "empty_T": e["median_us"] if e else None,
                         "empty_kernels": e["kernels"] if e else None,
                         "own": None, "boundary": None, "source": None}
                if st in own and len(own[st][0]) == k and k > 1:
                    entry["own"] = sum(own[st][0])
                    entry["boundary"] = (j["median_us"] - entry["own"]) / (k - 1)
                    entry["source"] = own[st][1]
                out[(st, mode)] = entry
        return out

    def targets_table(self):
        t = ["| target | measured | peer, same run | target | met |",
             "| --- | --- | --- | --- | --- |"]
        for r in self.target_rows:
            t.append("| " + " | ".join(r) + " |")
        return t

    def detail_plan_case(self, case, title):
        self.w(f"### {title}")
        self.w()
        self.w("| staging | mode | L2 | kernels | median us | p10 | p90 | us/kernel | host enqueue us | late reps |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for l2 in ("hot", "cold"):
            for st in STAGINGS:
                for mode in MODES:
                    j = self.m(case, "planner", st, mode, l2)
                    if j:
                        self.w(f"| {st} | {mode} | {l2} | {j['kernels']} | {us(j['median_us'])} | "
                               f"{us(j['p10_us'])} | {us(j['p90_us'])} | "
                               f"{us(j['median_us'] / max(j['kernels'], 1))} | "
                               f"{us(j['host_enqueue_median_us'])} | {j['late_reps']} |")
        for j in self.torch:
            if j.get("kind") == "torch" and j["case"] == case:
                self.w(f"| torch | {j['variant']} | {j['l2']} | | {us(j['median_us'])} | "
                       f"{us(j['p10_us'])} | {us(j['p90_us'])} | | "
                       f"{us(j['host_enqueue_median_us'])} | {j['late_reps']} |")
        self.w()

    def detail_chain(self):
        k = next((c["kernels"] for c in self.chain.values()), None)
        self.w(f"### C: 16 x softmax on 1024 x 1024 ({k} dependent kernels, hot L2)")
        self.w()
        self.w(f"Per boundary = (chain time - sum of the kernels' own durations) / {k - 1 if k else '?'}. "
               "Floor = time of as many empty kernels (cudaGridDependencySynchronize + "
               "cudaTriggerProgrammaticLaunchCompletion, the chain's own grid sizes) / their "
               "number. A negative cost means the launches overlapped more than the boundaries "
               "cost: with PDL each kernel is resident and past its prologue before its "
               "predecessor drains, so the chain runs shorter than its kernels run one at a time.")
        self.w()
        self.w("| staging | mode | chain us | us/kernel | per boundary us | empty chain us | empty us/kernel | boundary / floor |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for st in STAGINGS:
            for mode in MODES:
                c = self.chain.get((st, mode))
                if not c:
                    continue
                ratio = (c["boundary"] / c["floor"]) if c["boundary"] is not None and c["floor"] else None
                self.w(f"| {st} | {mode} | {us(c['T'])} | {us(c['per_kernel'])} | "
                       f"{us(c['boundary'])} | {us(c['empty_T'])} | {us(c['floor'])} | "
                       f"{'n/a' if ratio is None else f'{ratio:.2f}'} |")
        for mode in MODES:
            e = self.m("C", "empty-1x32", "-", mode, "hot")
            if e:
                self.w(f"| empty 1x32 | {mode} | | | | {us(e['median_us'])} | "
                       f"{us(e['median_us'] / e['kernels'])} | |")
        for v in ("eager", "graph"):
            tv = self.tval("C", v, "hot")
            if tv:
                self.w(f"| torch | {v} | {us(tv)} | | | | | |")
        self.w()
        self.w("PDL and graphs, chain time:")
        self.w()
        self.w("| staging | pdl vs stream | graph-pdl vs graph | graph-pdl vs stream |")
        self.w("| --- | --- | --- | --- |")
        for st in STAGINGS:
            g = {m: self.chain.get((st, m), {}).get("T") for m in MODES}
            def d(a, b):
                return "n/a" if not (g[a] and g[b]) else f"{g[a] - g[b]:+.2f} us ({g[a] / g[b]:.2f} x)"
            self.w(f"| {st} | {d('pdl', 'stream')} | {d('graph-pdl', 'graph')} | {d('graph-pdl', 'stream')} |")
        self.w()
        self.w("Kernels' own durations:")
        self.w()
        ev = {(j["staging"], j["index"]): j for j in self.event_rows}
        ncu = {(o["staging"], o["index"]): (n, d) for o, (n, d) in getattr(self, "ncu_rows", [])}
        self.w("| staging | # | kernel | ncu us | events us | ncu kernel name |")
        self.w("| --- | --- | --- | --- | --- | --- |")
        keys = sorted(set(ev) | set(ncu), key=lambda k: (STAGINGS.index(k[0]) if k[0] in STAGINGS else 9, k[1]))
        for k in keys:
            e = ev.get(k)
            n = ncu.get(k)
            name = e["name"] if e else ""
            kname = (n[0][:60] if n else "")
            self.w(f"| {k[0]} | {k[1]} | {name} | {us(n[1]) if n else 'n/a'} | "
                   f"{us(e['median_us']) if e else 'n/a'} | `{kname}` |")
        self.w()

    def detail_elementwise(self):
        self.w("### D: affine(1.5,0.5)\\|relu\\|affine(0.9,0.1)\\|sqrt\\|affine(2,0)\\|relu on 2^28 (1 GiB, over L2)")
        self.w()
        self.w("| variant | staging | mode | kernels | median us | p10 | p90 | GB/s (2 x 1 GiB) |")
        self.w("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for v in ("fused", "six-kernels"):
            for st in STAGINGS:
                for mode in MODES:
                    j = self.m("D", v, st, mode, "cold")
                    if j:
                        self.w(f"| {v} | {st} | {mode} | {j['kernels']} | {us(j['median_us'])} | "
                               f"{us(j['p10_us'])} | {us(j['p90_us'])} | {j.get('gb_per_s', 0):.0f} |")
        c = self.m("D", "cudaMemcpy-d2d", "-", "stream", "cold")
        if c:
            self.w(f"| cudaMemcpy d2d | | | | {us(c['median_us'])} | {us(c['p10_us'])} | "
                   f"{us(c['p90_us'])} | {c['gb_per_s']:.0f} |")
        tj = self.t("D", "eager", "cold")
        if tj:
            self.w(f"| torch eager (six kernels) | | | 6 | {us(tj['median_us'])} | "
                   f"{us(tj['p10_us'])} | {us(tj['p90_us'])} | {2 * 2**28 * 4 / (tj['median_us'] * 1e3):.0f} |")
        self.w()

    def checks(self):
        self.w("### Checks")
        self.w()
        bad = [j for j in self.bench if j.get("kind") == "check" and not j.get("ok")]
        n = sum(1 for j in self.bench if j.get("kind") == "check")
        worst = max((j["rel_l2_error"] for j in self.bench if j.get("kind") == "check"), default=None)
        if worst is None:
            self.w("- planner_bench: no checks found")
        else:
            self.w(f"- planner_bench: {n} runs checked against a float64 reference "
                   f"(||out - ref|| / ||ref|| < 1e-4, poisoned outputs, no non-finite output), "
                   f"{len(bad)} failed; worst {worst:.2e}")
        for j in self.torch:
            if j.get("kind") == "torch_check":
                self.w(f"- torch case {j['case']}: rel. error {j['rel_l2_error']:.2e} vs float64")
        late = [j for j in self.measures if j.get("late_reps")]
        if late:
            self.w(f"- {len(late)} measurements had repetitions whose host enqueue outlasted the "
                   "queue-ahead spin (their device time may include host gaps): "
                   + ", ".join(f"{j['case']}/{j['variant']}/{j['staging']}/{j['mode']}/{j['l2']}"
                               f" ({j['late_reps']})" for j in late[:10]))
        if not any(j.get("kind") == "torch" for j in self.torch):
            self.notes.append("torch_peers.py produced no timings (see torch_peers.stderr).")
        done = next((j for j in self.bench if j.get("kind") == "done"), None)
        if not done:
            self.notes.append("planner_bench did not finish (see planner_bench.stderr).")
        for n_ in self.notes:
            self.w(f"- note: {n_}")
        self.w()

    def build(self):
        self.header()
        self.target_rows = []
        self.chain = {}
        self.event_rows = []
        self.targets()
        self.w("## Targets")
        self.w()
        self.lines += self.targets_table()
        self.w()
        self.w("## Details")
        self.w()
        self.detail_plan_case("A", "A: affine(2,1)\\|relu\\|sqrt\\|softmax, one row of 2^20")
        self.detail_plan_case("B", "B: the same ops on 1024 x 1024")
        self.detail_chain()
        self.detail_elementwise()
        self.checks()
        return "\n".join(self.lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    args = ap.parse_args()
    r = Report(args.out_dir)
    md = r.build()
    path = os.path.join(args.out_dir, "planner-h200.md")
    with open(path, "w") as f:
        f.write(md)
    print(f"(full report: {path})")
    print()
    print("\n".join(r.targets_table()))
    for n in r.notes:
        print(f"note: {n}")


if __name__ == "__main__":
    sys.exit(main())
