#!/usr/bin/env python3
"""Rewrites the measured entries of kernels/cuda/tuning/staging_table.h from a kernels run.

usage: make_staging_table.py AUTO_STAGING_JSON [--header PATH] [--results NAME] [--noise F]

AUTO_STAGING_JSON is the auto-staging.json that report.py writes next to kernels-h200.md: the
fastest checked staging strategy per op / dtype / size class, with the runner-up strategy and
direct's time, which the report's section "Winners for the `auto` staging table" lists. Only
the lines between the header's "BEGIN measured entries" and "END measured entries" markers
change; the defaults above them stay, and since the last matching entry wins, every measured
entry overrides its family's default.

Which winners become entries:
  - only ops whose kernels resolve `auto` through the table: the elementwise family (case
    `affine`) and RowReduce (cases `sum-*`, `max-*`, `min-*`); other ops are listed as skipped;
  - one entry per (family, dtype, size class): where several cases share that key, the first
    of FAMILY_CASE_PRIORITY decides (sum before max before min), the others are named in the
    entry's comment;
  - a winner less than --noise (default 2%) faster than `direct` keeps `direct`: differences
    that small are run-to-run noise, and direct is the simplest path.
Each entry names the case that decided it, and its provenance names the results file's section
that lists the run's figures (--results): the header carries no measured time, commit or date
(kernel comments say why, bench/results says what a run measured). Standard library only;
prints a summary, with the run's commit and date, to stdout.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_HEADER = os.path.join(HERE, "..", "..", "kernels", "cuda", "tuning", "staging_table.h")
BEGIN = "// BEGIN measured entries"
END = "// END measured entries"
# The marker block as this script writes it (indentation of the table's initializer list).
BEGIN_BLOCK = ["    // BEGIN measured entries: written by bench/kernels/make_staging_table.py from a run's",
               "    // auto-staging.json; edit the run, not these lines."]
END_LINE = "    // END measured entries"

# The report's section that lists the winners (report.py's auto_table), cited by every entry.
RESULTS_SECTION = "Winners for the `auto` staging table"

FAMILIES = {"elementwise": "kElementwise", "rowreduce": "kRowReduce"}
DTYPES = {"float32": "kFloat32", "float64": "kFloat64", "float16": "kFloat16", "int32": "kInt32"}
SIZE_CLASSES = {"elementwise": "kElementwise", "short-rows": "kShortRows",
                "few-long-rows": "kFewLongRows", "many-long-rows": "kManyLongRows"}
STAGINGS = {"direct": "kDirect", "pipeline": "kPipeline", "pipeline-thread": "kPipelineThread",
            "primitives": "kPrimitives", "bulk": "kBulk"}
MAX_STAGES = 8  # kMaxStages in kernels/cuda/ops.h

# Op (the case id up to its first '-') -> family, in the order that decides shared keys.
FAMILY_CASE_PRIORITY = [("affine", "elementwise"), ("sum", "rowreduce"), ("max", "rowreduce"),
                        ("min", "rowreduce")]


def family_of(case):
    op = case.split("-", 1)[0]
    for rank, (name, family) in enumerate(FAMILY_CASE_PRIORITY):
        if op == name:
            return family, rank
    return None, None


def variant(staging, stages):
    return f"{staging}{stages}" if stages else staging


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Entry:
    def __init__(self, winner, family, rank, noise):
        self.w = winner
        self.family = family
        self.rank = rank
        self.others = []
        best_us = float(winner["median_us"])
        direct_us = winner.get("direct_us")
        self.kept_direct = False
        self.staging, self.stages = winner["staging"], int(winner.get("stages") or 0)
        if self.staging != "direct" and direct_us is not None and \
                (float(direct_us) - best_us) < noise * float(direct_us):
            self.staging, self.stages = "direct", 0
            self.kept_direct = True
        if self.staging not in STAGINGS:
            raise ValueError(f"winner {winner['op']} {winner['dtype']}: unknown staging "
                             f"{self.staging!r} (known: {', '.join(STAGINGS)})")
        if not 0 <= self.stages <= MAX_STAGES:
            raise ValueError(f"winner {winner['op']} {winner['dtype']}: stages {self.stages} "
                             f"outside 0..{MAX_STAGES}")

    def key(self):
        w = self.w
        return (self.family, w["dtype"], w["size_class"])

    def sort_key(self):
        return (list(FAMILIES).index(self.family), list(DTYPES).index(self.w["dtype"]),
                list(SIZE_CLASSES).index(self.w["size_class"]))

    def lines(self, results):
        w = self.w
        best = variant(w["staging"], int(w.get("stages") or 0))
        comment = f"{w['op']}, {w['dtype']}, {w.get('shape', '?')} ({w['size_class']}): {best} won"
        comment += (", within the noise bound: direct kept." if self.kept_direct else ".")
        if self.others:
            comment += " Also measured: " + ", ".join(
                f"{o['op']} {variant(o['staging'], int(o.get('stages') or 0))}"
                for o in self.others) + "."
        provenance = f"{results}, {RESULTS_SECTION}"
        out = [f"    // {line}" for line in wrap(comment, 92)]
        out.append(f"    {{StagingFamily::{FAMILIES[self.family]}, ElementType::{DTYPES[w['dtype']]}, "
                   f"SizeClass::{SIZE_CLASSES[w['size_class']]},")
        out.append(f"     Staging::{STAGINGS[self.staging]}, {self.stages},")
        out.append(f"     {c_string(provenance)}}},")
        return out


def wrap(text, width):
    lines, cur = [], ""
    for word in text.split():
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        lines.append(cur)
    return lines


def run_of(auto):
    """The run's commit, date and machine, for the summary on stdout (never the header)."""
    return {"commit": auto.get("commit") or "unknown", "date": auto.get("date") or "unknown date",
            "machine": re.sub(r"^name, driver: ", "",
                              auto.get("machine") or auto.get("device") or "unknown machine")}


def build_entries(auto, noise):
    chosen, skipped = {}, []
    for w in auto.get("winners", []):
        family, rank = family_of(w["op"])
        if family is None:
            skipped.append(f"{w['op']} {w['dtype']}: its kernels do not read the table")
            continue
        if w["dtype"] not in DTYPES or w["size_class"] not in SIZE_CLASSES:
            skipped.append(f"{w['op']} {w['dtype']}: unknown dtype or size class "
                           f"{w['size_class']!r}")
            continue
        e = Entry(w, family, rank, noise)
        old = chosen.get(e.key())
        if old is None:
            chosen[e.key()] = e
        elif e.rank < old.rank:
            e.others = old.others + [old.w]
            chosen[e.key()] = e
        else:
            old.others.append(w)
    return sorted(chosen.values(), key=Entry.sort_key), skipped


def rewrite(header_text, entries, results):
    lines = header_text.split("\n")
    try:
        begin = next(i for i, l in enumerate(lines) if l.strip().startswith(BEGIN))
        end = next(i for i, l in enumerate(lines) if l.strip().startswith(END))
    except StopIteration:
        raise ValueError(f"markers '{BEGIN}' / '{END}' not found in the header")
    if end < begin:
        raise ValueError("END marker before BEGIN marker")
    body = []
    for e in entries:
        body += e.lines(results)
    return "\n".join(lines[:begin] + BEGIN_BLOCK + body + [END_LINE] + lines[end + 1:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("auto_staging_json")
    ap.add_argument("--header", default=DEFAULT_HEADER)
    ap.add_argument("--results", default="bench/results/kernels-h200.md",
                    help="the results file the entries cite")
    ap.add_argument("--noise", type=float, default=0.02,
                    help="a winner less than this fraction faster than direct keeps direct")
    args = ap.parse_args(argv)
    with open(args.auto_staging_json) as f:
        auto = json.load(f)
    entries, skipped = build_entries(auto, args.noise)
    with open(args.header) as f:
        text = f.read()
    new = rewrite(text, entries, args.results)
    with open(args.header, "w") as f:
        f.write(new)
    run = run_of(auto)
    print(f"{args.header}: {len(entries)} measured entries from the run at commit "
          f"{run['commit']}, {run['date']}, {run['machine']}")
    for e in entries:
        note = " (winner within noise of direct)" if e.kept_direct else ""
        print(f"  {e.family} {e.w['dtype']} {e.w['size_class']}: "
              f"{variant(e.staging, e.stages)}{note}")
    for s in skipped:
        print(f"  skipped {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
