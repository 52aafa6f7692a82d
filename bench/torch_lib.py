"""Helpers shared by the bench/*/torch_peers.py scripts (PyTorch peers measured in the same
run as gpupipe): JSON-lines output, a calibrated GPU sleep, quantiles."""
import json

import torch


def emit(obj):
    print(json.dumps(obj), flush=True)


class Sleeper:
    """torch.cuda._sleep takes cycles; measure how many make a microsecond on this device."""

    def __init__(self):
        cycles = 2_000_000
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        rate = []
        for _ in range(3):
            s.record()
            torch.cuda._sleep(cycles)
            e.record()
            e.synchronize()
            rate.append(cycles / (s.elapsed_time(e) * 1000.0))
        self.cycles_per_us = max(rate[1:])  # clocks ramp up on the first

    def sleep(self, us):
        torch.cuda._sleep(int(us * self.cycles_per_us))


def quantile(v, q):
    """The q-quantile of v, interpolating linearly between order statistics."""
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)
