"""Reads a gperftools CPU profile of gpupiped (bench/service/cpu_profile.sh) and prints where
the daemon's CPU went, in microseconds a job: each function's inclusive share of the samples
times the daemon's CPU a job that `gpupipe bench` measured in the same window. The profile's
own symbols are not used: a bundle's binaries are stripped and its host's libc differs, so
frames are named from an unstripped build of the same commit (--binary) and the bundle's
shared libraries (--lib-dir; without it, the libraries at the paths the profile names, for a
profile taken on this host); frames in libraries found nowhere here (the GPU host's libc and
libcuda) are named by their library.

usage: cpu_profile.py PROFILE --binary BUILD/bin/gpupiped [--lib-dir DIR] [--us-per-job US]
                      [--top N] [--match REGEX] [--callees REGEX]
  --match keeps the functions whose names match; --callees splits the first function whose
  name matches by what it called (its frame's callee on each sample's stack; "self" where it
  was the leaf).
"""
import argparse
import bisect
import collections
import os
import re
import struct
import subprocess


def read_profile(path):
    """The samples (count, program counters leaf first) and the executable mappings."""
    data = open(path, "rb").read()
    off = 5 * 8  # header: 0, 3, 0, sampling period, 0
    samples = []
    while True:
        count, depth = struct.unpack_from("<2Q", data, off)
        off += 16
        pcs = struct.unpack_from(f"<{depth}Q", data, off)
        off += depth * 8
        if count == 0 and depth == 1 and pcs[0] == 0:
            break
        samples.append((count, pcs))
    maps = []
    for line in data[off:].decode(errors="replace").splitlines():
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s+(\S+)", line)
        if m and "x" in m.group(3):
            maps.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(4), 16),
                         m.group(5)))
    return samples, sorted(maps)


class Symbolizer:
    """Names the program counters of one profile's mappings; each address is looked up once
    (a profile repeats the same frames in thousands of stacks)."""

    def __init__(self, binary, lib_dir, maps):
        self.binary, self.lib_dir, self.tables = binary, lib_dir, {}
        self.maps, self.starts, self.names = maps, [m[0] for m in maps], {}

    def local_file(self, path):
        name = os.path.basename(path)
        if name == "gpupiped":
            return self.binary
        if self.lib_dir:
            candidate = os.path.join(self.lib_dir, name)
            return candidate if os.path.exists(candidate) else None
        # No --lib-dir: a profile taken on this host, whose libraries are where it saw them.
        return path if os.path.exists(path) else None

    def table(self, path):
        if path not in self.tables:
            local, table = self.local_file(path), None
            if local:
                for flags in (["-C", "--defined-only", "-n"], ["-D", "-C", "--defined-only", "-n"]):
                    out = subprocess.run(["nm", *flags, local], capture_output=True,
                                         text=True).stdout
                    rows = [line.split(" ", 2) for line in out.splitlines()]
                    rows = [(int(r[0], 16), r[2]) for r in rows
                            if len(r) == 3 and r[1] and r[1] in "tTwW"]
                    if rows:
                        table = ([a for a, _ in rows], [n for _, n in rows])
                        break
            self.tables[path] = table
        return self.tables[path]

    def name(self, pc):
        """The function at `pc`, shortened (short()), or its library's name in brackets."""
        if pc not in self.names:
            self.names[pc] = short(self.lookup(pc))
        return self.names[pc]

    def lookup(self, pc):
        i = bisect.bisect_right(self.starts, pc) - 1
        if i < 0 or pc >= self.maps[i][1]:
            return "[unknown]"
        lo, _, offset, path = self.maps[i]
        table = self.table(path)
        if table is None:
            return f"[{os.path.basename(path)}]"
        j = bisect.bisect_right(table[0], pc - lo + offset) - 1
        return table[1][j] if j >= 0 else f"[{os.path.basename(path)}]"


def short(name):
    for prefix in ("gpupipe::", "engine::", "(anonymous namespace)::", "absl::debian3::"):
        name = name.replace(prefix, "")
    return name if len(name) <= 120 else name[:117] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--binary", required=True)
    ap.add_argument("--lib-dir")
    ap.add_argument("--us-per-job", type=float, default=0)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--match", default="")
    ap.add_argument("--callees", default="")
    args = ap.parse_args()
    samples, maps = read_profile(args.profile)
    sym = Symbolizer(args.binary, args.lib_dir, maps)
    total = sum(c for c, _ in samples)
    inclusive, leaf_lib, callees = (collections.Counter(), collections.Counter(),
                                    collections.Counter())
    split = re.compile(args.callees) if args.callees else None
    split_name = None
    for count, pcs in samples:
        # Return addresses point after the call: look the caller frames up one byte back.
        names = [sym.name(pc if k == 0 else pc - 1) for k, pc in enumerate(pcs)]
        leaf_lib[names[0] if names[0].startswith("[") else "code"] += count
        for name in dict.fromkeys(names):  # each function once a sample, in stack order
            inclusive[name] += count
        if split:
            # The outermost frame that matches, and the frame it called on this stack.
            for k in range(len(names) - 1, -1, -1):
                if split.search(names[k]) and (split_name is None or names[k] == split_name):
                    split_name = names[k]
                    callees[names[k - 1] if k > 0 else "self"] += count
                    break
    scale = args.us_per_job / total if args.us_per_job else 100.0 / total
    unit = "us/job" if args.us_per_job else "%"
    print(f"{total} samples; {unit} of the daemon's CPU, inclusive")
    pattern = re.compile(args.match) if args.match else None
    shown = 0
    for name, count in inclusive.most_common():
        if pattern and not pattern.search(name):
            continue
        print(f"{count * scale:9.1f} {unit}  {name}")
        shown += 1
        if shown >= args.top:
            break
    if split_name:
        print(f"{split_name}, by callee:")
        for name, count in callees.most_common(args.top):
            print(f"{count * scale:9.1f} {unit}  {name}")
    print("leaf samples by where they ran (named code, or a library without symbols here):")
    for name, count in leaf_lib.most_common(8):
        print(f"{count * scale:9.1f} {unit}  {name}")


if __name__ == "__main__":
    main()
