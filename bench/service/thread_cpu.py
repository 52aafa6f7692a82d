#!/usr/bin/env python3
"""CPU time of a process's threads over a window, grouped by thread name (Linux /proc).

The daemon names its own threads (gp-work-<priority>, gp-copy, gp-log, ...); gRPC and the CUDA
driver name theirs. Where a wall-clock latency or a throughput falls short while no core is
saturated, this shows which threads the CPU went to: divide a group's cores by the jobs a
second of the same window for its CPU a job. A thread that ends within the window is not
counted (its CPU goes with it), so pools that grow and shrink read low.

usage: thread_cpu.py PID SECONDS [--jobs-per-second R]
"""
import argparse
import os
import sys
import time


def read_threads(pid):
    """{tid: (name, cpu seconds)} of `pid`'s live threads."""
    ticks = os.sysconf("SC_CLK_TCK")
    threads = {}
    task_dir = f"/proc/{pid}/task"
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        # The name is in parentheses and may hold spaces: the fields follow the last ')'.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        utime, stime = int(fields[11]), int(fields[12])
        threads[tid] = (name, (utime + stime) / ticks)
    return threads


def window(pid, seconds):
    """{name: [threads, cpu seconds]} over `seconds`; a thread that began within the window
    counts from zero."""
    before = read_threads(pid)
    time.sleep(seconds)
    after = read_threads(pid)
    groups = {}
    for tid, (name, cpu) in after.items():
        used = cpu - before.get(tid, (name, 0.0))[1]
        group = groups.setdefault(name, [0, 0.0])
        group[0] += 1
        group[1] += used
    return groups


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pid", type=int)
    parser.add_argument("seconds", type=float)
    parser.add_argument("--jobs-per-second", type=float, default=0.0,
                        help="adds a column of CPU microseconds a job")
    args = parser.parse_args()
    groups = window(args.pid, args.seconds)
    total = sum(cpu for _, cpu in groups.values())
    header = f"{'thread name':<18}{'threads':>8}{'cores':>8}{'share':>8}"
    if args.jobs_per_second > 0:
        header += f"{'us/job':>9}"
    print(header)
    for name, (count, cpu) in sorted(groups.items(), key=lambda g: -g[1][1]):
        cores = cpu / args.seconds
        line = f"{name:<18}{count:>8}{cores:>8.2f}{(cpu / total if total else 0):>8.1%}"
        if args.jobs_per_second > 0:
            line += f"{cores / args.jobs_per_second * 1e6:>9.1f}"
        print(line)
    print(f"{'total':<18}{sum(c for c, _ in groups.values()):>8}{total / args.seconds:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
