#!/usr/bin/env python3
"""PyTorch peers of kernels_bench, on the same input, timed the same way, in the same run.

The input is kernels_bench's: 2^28 float32 values (2q - 255) / 256 from the same 32-bit hash of the
element index and seed (read from kernels_bench's samples.json), as one row of 2^28 or as
16384 x 16384. Timing as in kernels_bench: before each run a read of a 256 MiB buffer evicts
L2 and a sleep kernel (torch.cuda._sleep) lets Python enqueue the whole region before the
device reaches it; torch.cuda.Event pairs around the op give device time; median of --reps
runs after --warmup. Eager mode, PyTorch's defaults (cuDNN TF32 allowed for conv1d: with this
input and these taps TF32 is exact, so the check is exact too).

Checks: kernels_bench wrote samples of our outputs (samples.json + <case>.bin); each is
compared with PyTorch's output on the same elements. Prints one JSON object per line.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_lib import Sleeper, emit, quantile  # noqa: E402

N = 1 << 28
SQUARE = 1 << 14
MASK = 0xFFFFFFFF
FLUSH_BYTES = 256 << 20
GIB = N * 4


def mix32_int(x):
    x &= MASK
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK
    x ^= x >> 16
    return x


def mix32(x):
    """bench_device.cu's Mix32 on an int64 tensor of values in [0, 2^32). The products overflow
    int64 and wrap; their low 32 bits, all that is kept, are exact."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & MASK
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def make_input(seed):
    mixed = mix32_int(seed)
    x = torch.empty(N, dtype=torch.float32, device="cuda")
    step = 1 << 25
    for s in range(0, N, step):
        i = torch.arange(s, s + step, dtype=torch.int64, device="cuda")
        q = mix32((i + mixed) & MASK) >> 24
        x[s:s + step] = (2 * q - 255).to(torch.float32) / 256.0
    return x


def taps(count=63):
    return [((j * 37) % 63 - 31) / 64.0 for j in range(count)]


def time_op(fn, flush, sleeper, warmup, reps):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dev = []
    for r in range(warmup + reps):
        torch.sum(flush)  # reads 256 MiB: evicts the op's data and dirty lines from L2
        sleeper.sleep(20.0)
        s.record()
        fn()
        e.record()
        e.synchronize()
        if r >= warmup:
            dev.append(s.elapsed_time(e) * 1000.0)
    return {"median_us": quantile(dev, 0.5), "p10_us": quantile(dev, 0.1),
            "p90_us": quantile(dev, 0.9), "min_us": min(dev), "reps": reps}


def cases(x):
    """(id, peer description, bytes read + written, fn) in kernels_bench's order."""
    x2 = x.view(SQUARE, SQUARE)
    one = torch.tensor(1.0, dtype=torch.float32)  # 0-dim CPU tensor: a scalar operand
    w = torch.tensor(taps(), dtype=torch.float32, device="cuda").flip(0).view(1, 1, -1)
    n = x.numel()
    return [
        ("affine", "torch.add(1, x, alpha=2)", 2 * GIB, lambda: torch.add(one, x, alpha=2.0)),
        ("sum-row", "x.sum()", GIB, lambda: x.sum()),
        ("sum-rows", "x.sum(dim=-1)", GIB + SQUARE * 4, lambda: x2.sum(dim=-1)),
        ("softmax", "torch.softmax(x, -1)", 2 * GIB, lambda: torch.softmax(x2, -1)),
        ("cumsum", "torch.cumsum(x, 0)", 2 * GIB, lambda: torch.cumsum(x, 0)),
        ("histogram", "torch.histc(x, 256, 0, 1)", GIB + 256 * 8,
         lambda: torch.histc(x, bins=256, min=0, max=1)),
        ("convolve", "F.conv1d(x, flipped taps, padding=31)", 2 * GIB,
         lambda: F.conv1d(x.view(1, 1, n), w, padding=31).view(n)),
        ("topk", "torch.topk(x, 16, dim=-1).values", GIB + SQUARE * 16 * 4,
         lambda: torch.topk(x2, 16, dim=-1).values),
        ("argmax", "torch.argmax(x, -1)", GIB + SQUARE * 8, lambda: torch.argmax(x2, -1)),
        ("standardize", "(x - x.mean(-1)) / x.std(-1, unbiased=False)", 2 * GIB,
         lambda: (x2 - x2.mean(-1, keepdim=True)) / x2.std(-1, unbiased=False, keepdim=True)),
        ("l2normalize", "x / torch.linalg.vector_norm(x, dim=-1)", 2 * GIB,
         lambda: x2 / torch.linalg.vector_norm(x2, dim=-1, keepdim=True)),
    ]


def check(case_id, y, samples_dir, index):
    entry = index.get("cases", {}).get(case_id)
    if entry is None:
        return {"kind": "torch_check", "case": case_id, "ok": None, "note": "no samples"}
    dtype = torch.int64 if entry["dtype"] == "int64" else torch.float32
    with open(os.path.join(samples_dir, entry["file"]), "rb") as f:
        ours = torch.frombuffer(bytearray(f.read()), dtype=dtype).to("cuda")
    flat = y.reshape(-1)
    theirs = torch.cat([flat[b:b + c] for b, c in entry["ranges"]]).to(dtype)
    if ours.numel() != theirs.numel():
        return {"kind": "torch_check", "case": case_id, "ok": False,
                "note": f"sample size {ours.numel()} vs {theirs.numel()}"}
    if dtype == torch.int64:
        bad = int((ours != theirs).sum().item())
        return {"kind": "torch_check", "case": case_id, "ok": bad == 0, "bad": bad,
                "compared": ours.numel(), "variant": entry.get("variant")}
    o, t = ours.double(), theirs.double()
    atol, rtol = entry["atol"], entry["rtol"]
    if atol > 0 or rtol > 0:  # not an exact case: PyTorch's own rounding differs slightly
        atol, rtol = max(atol, 1e-9), max(rtol, 1e-4)
    finite_same = bool((torch.isfinite(o) == torch.isfinite(t)).all().item())
    fin = torch.isfinite(o) & torch.isfinite(t)
    err = (o - t).abs()[fin]
    bad = int((err > atol + rtol * t.abs()[fin]).sum().item()) + (0 if finite_same else 1)
    return {"kind": "torch_check", "case": case_id, "ok": bad == 0, "bad": bad,
            "compared": ours.numel(), "max_abs_err": err.max().item() if err.numel() else 0.0,
            "max_abs_ref": t.abs().max().item(), "variant": entry.get("variant")}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--samples", default="", help="kernels_bench's --samples directory")
    ap.add_argument("--seed", type=int, default=0, help="without samples.json")
    ap.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    args = ap.parse_args()
    index = {}
    path = os.path.join(args.samples, "samples.json") if args.samples else ""
    if path and os.path.exists(path):
        with open(path) as f:
            index = json.load(f)
    seed = index.get("seed", args.seed or (time.time_ns() & 0x7FFFFFFF) or 1)
    props = torch.cuda.get_device_properties(0)
    emit({"kind": "torch_device", "torch": torch.__version__, "cuda": torch.version.cuda,
          "cudnn": torch.backends.cudnn.version(), "name": props.name,
          "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
          "seed": seed, "samples": bool(index)})
    x = make_input(seed)
    flush = torch.zeros(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    sleeper = Sleeper()
    wanted = set(filter(None, args.cases.split(",")))
    for case_id, peer, nbytes, fn in cases(x):
        if wanted and case_id not in wanted:
            continue
        try:
            y = fn()
            torch.cuda.synchronize()
            if index:
                emit(check(case_id, y, args.samples, index))
            del y
            stats = time_op(fn, flush, sleeper, args.warmup, args.reps)
            emit({"kind": "torch", "case": case_id, "peer": peer,
                  "gb_per_s": nbytes / (stats["median_us"] * 1e3), **stats})
        except Exception as e:  # one failing peer must not hide the others
            emit({"kind": "torch_error", "case": case_id, "error": repr(e)[:300]})
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
