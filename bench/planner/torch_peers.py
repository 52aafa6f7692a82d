#!/usr/bin/env python3
"""PyTorch peers of planner_bench's cases, timed the same way, in the same run.

Device time: torch.cuda.Event pairs around the region. As in planner_bench, a sleep kernel
(torch.cuda._sleep) is queued ahead of the start event, long enough for the host to enqueue
the whole region first, so the events see device work and launch gaps rather than Python's
dispatch (the host time is reported apart). Median of >= 30 timed repetitions after warm-up,
on random inputs in [-1, 1) with no zeros. "hot": one input reused, as a replayed graph on a
static input sees it; "cold": rotating through enough inputs (each with its own graph) that
they span three times the L2.

Prints one JSON object per line.
"""
import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_lib import Sleeper, emit, quantile  # noqa: E402


def random_input(shape, gen):
    x = torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1
    x[x == 0] = 0.5  # never zero: zeros hide wrong indexing and can run faster
    return x


def time_region(sleeper, fn, warmup, reps):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dev, host, warm_host = [], [], []
    sleep_us = 500.0
    late = 0
    for r in range(warmup + reps):
        if r == warmup:
            sleep_us = min(max(3.0 * max(warm_host or [100.0]) + 20.0, 20.0), 20000.0)
        sleeper.sleep(sleep_us)
        s.record()
        h0 = time.perf_counter()
        fn(r)
        h1 = time.perf_counter()
        e.record()
        e.synchronize()
        h = (h1 - h0) * 1e6
        if r >= warmup:
            dev.append(s.elapsed_time(e) * 1000.0)
            host.append(h)
            late += h > sleep_us
        elif r > 0:
            warm_host.append(h)
    return {
        "median_us": quantile(dev, 0.5),
        "p10_us": quantile(dev, 0.1),
        "p90_us": quantile(dev, 0.9),
        "min_us": min(dev),
        "reps": reps,
        "host_enqueue_median_us": quantile(host, 0.5),
        "sleep_us": sleep_us,
        "late_reps": late,
    }


def capture(fn, x):
    """A CUDA graph of fn on the static input x (warmed up on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = fn(x)
    return g, y


def rel_error(y, ref):
    y64 = y.double()
    if not torch.isfinite(y64).all():
        return math.inf
    return (torch.linalg.vector_norm(y64 - ref) / torch.linalg.vector_norm(ref)).item()


def softmax_pipeline(x):
    return torch.softmax(torch.sqrt(torch.relu(2 * x + 1)), -1)


def softmax_chain(x):
    for _ in range(16):
        x = torch.softmax(x, -1)
    return x


_SCALARS = {}


def affine(x, a, b):
    # b + a * x in one kernel: a 0-dim CPU tensor is a scalar operand, alpha scales `other`.
    bt = _SCALARS.setdefault(b, torch.tensor(b, dtype=torch.float32))
    return torch.add(bt, x, alpha=a)


def six_ops(x):
    x = affine(x, 1.5, 0.5)
    x = torch.relu(x)
    x = affine(x, 0.9, 0.1)
    x = torch.sqrt(x)
    x = affine(x, 2.0, 0.0)
    return torch.relu(x)


def run_case(case, shape, fn, args, sleeper, gen, l2_bytes, modes):
    n = math.prod(shape)
    x0 = random_input(shape, gen)
    ref = fn(x0.double())
    emit({"kind": "torch_check", "case": case, "rel_l2_error": rel_error(fn(x0), ref)})
    del ref
    # One reused input only stays in L2 while input and output fit there.
    reuse = "hot" if 2 * n * 4 <= l2_bytes else "cold"
    if "eager-hot" in modes:
        emit({"kind": "torch", "case": case, "variant": "eager", "l2": reuse,
              **time_region(sleeper, lambda r: fn(x0), args.warmup, args.reps)})
    if "graph-hot" in modes:
        g, _ = capture(fn, x0)
        emit({"kind": "torch", "case": case, "variant": "graph", "l2": reuse,
              **time_region(sleeper, lambda r: g.replay(), args.warmup, args.reps)})
        del g
    if "eager-cold" in modes or "graph-cold" in modes:
        count = max(2, min(64, math.ceil(3 * l2_bytes / (2 * n * 4))))
        xs = [random_input(shape, gen) for _ in range(count)]
        reps = max(args.reps, 2 * count)
        warm = max(args.warmup, count)
        if "eager-cold" in modes:
            emit({"kind": "torch", "case": case, "variant": "eager", "l2": "cold",
                  "inputs": count,
                  **time_region(sleeper, lambda r: fn(xs[r % count]), warm, reps)})
        if "graph-cold" in modes:
            graphs = [capture(fn, x)[0] for x in xs]
            emit({"kind": "torch", "case": case, "variant": "graph", "l2": "cold",
                  "inputs": count,
                  **time_region(sleeper, lambda r: graphs[r % count].replay(), warm, reps)})
            del graphs
        del xs
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cases", default="ABCD")
    args = ap.parse_args()
    if args.reps < 30:
        ap.error("--reps must be at least 30")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(time.time_ns() & 0x7FFFFFFF)
    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 50 << 20)
    emit({"kind": "torch_device", "torch": torch.__version__, "cuda": torch.version.cuda,
          "name": props.name, "l2_bytes": l2_bytes})
    sleeper = Sleeper()
    all_modes = ("eager-hot", "graph-hot", "eager-cold", "graph-cold")
    if "A" in args.cases:
        run_case("A", (1 << 20,), softmax_pipeline, args, sleeper, gen, l2_bytes, all_modes)
    if "B" in args.cases:
        run_case("B", (1024, 1024), softmax_pipeline, args, sleeper, gen, l2_bytes, all_modes)
    if "C" in args.cases:
        run_case("C", (1024, 1024), softmax_chain, args, sleeper, gen, l2_bytes,
                 ("eager-hot", "graph-hot"))
    if "D" in args.cases:
        # 1 GiB per tensor: far over L2 even with one input.
        run_case("D", (1 << 28,), six_ops, args, sleeper, gen, l2_bytes, ("eager-hot",))


if __name__ == "__main__":
    main()
