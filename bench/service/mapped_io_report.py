"""Markdown for bench/service/mapped_io.sh: each job size copied (--mapped-io-max-kib 0) and
without copies (256), measured in the same run.

usage: mapped_io_report.py OUT_DIR ROWS...   (writes OUT_DIR/mapped-io.md and prints it)
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import run_header  # noqa: E402


def point(out, kib, rows, concurrency):
    path = os.path.join(out, f"mapped-io-{kib}-{rows}.json")
    if not os.path.exists(path):
        return None
    for p in json.load(open(path)).get("points", []):
        if p.get("concurrency") == concurrency:
            return p["gpupipe"]
    return None


def main():
    out, rows = sys.argv[1], sys.argv[2:]
    lines = ["# Small jobs with and without copies", ""]
    lines += run_header(os.path.join(out, "mapped-io-meta.json"))
    lines += ["Rows of 1024 float32 through `affine(alpha=2, beta=1) | relu | softmax`, batching "
              "off, one daemon copying every job (`--mapped-io-max-kib 0`) and one whose "
              "kernels read and write the lanes' mapped pinned buffers (`256`), one after "
              "the other in the same run. Latency at concurrency 1, throughput at 64; device "
              "is the job's kernel time (with its copies, where it copies) from its timing.", "",
              "| rows | KiB in | c1 p50 us copied | c1 p50 us mapped | mapped / copied | "
              "c64 jobs/s copied | c64 jobs/s mapped | mapped / copied | device us copied | "
              "device us mapped | errors |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        c1 = [point(out, k, r, 1) for k in (0, 256)]
        c64 = [point(out, k, r, 64) for k in (0, 256)]
        if None in c1 or None in c64:
            lines.append(f"| {r} | {4 * int(r)} | missing | | | | | | | | |")
            continue
        p50 = [p["latency_us"]["p50"] for p in c1]
        tput = [p["throughput"] for p in c64]
        dev = [p.get("breakdown_us", {}).get("device", 0) for p in c1]
        errors = sum(p["errors"] + p["mismatches"] for p in c1 + c64)
        lines.append(f"| {r} | {4 * int(r)} | {p50[0]:.0f} | {p50[1]:.0f} | "
                     f"{p50[1] / p50[0]:.2f}x | {tput[0]:,.0f} | {tput[1]:,.0f} | "
                     f"{tput[1] / tput[0]:.2f}x | {dev[0]:.1f} | {dev[1]:.1f} | {errors} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "mapped-io.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
