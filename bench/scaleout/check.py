"""The scale-out benchmark's check: one job of the mix (scaleout.mix) on fresh random data on
every daemon named, compared with the reference daemon's result (the CPU backend's).

usage: check.py MIX REFERENCE_TARGET TARGET...
Prints one line per daemon; exit status 1 when any differs beyond the dtype's rounding."""
import sys
import time

import numpy as np

import gpupipe


def main(mix, reference, targets):
    fields = dict(part.strip().split("=", 1) for part in open(mix).read().strip().split(";"))
    shape = tuple(int(d) for d in fields["shape"].split("x"))
    dtype = np.dtype(fields["dtype"])
    seed = time.time_ns() % (1 << 32)
    x = np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)
    print(f"check: {fields['dtype']} {fields['shape']}, {fields['ops'].count('|') + 1} ops, "
          f"seed {seed}")
    with gpupipe.Client(reference, transport="grpc") as c:
        want = c.submit(x, fields["ops"]).output.astype(np.float64)
    # Each op rounds its output to the dtype; the GPU and the CPU sum the taps in different
    # orders, so the results differ by a few units in the last place of the dtype.
    tol = 8 * np.finfo(dtype).eps * max(1.0, float(np.abs(want).max()))
    ok = True
    for target in targets:
        with gpupipe.Client(target, transport="grpc") as c:
            got = c.submit(x, fields["ops"]).output.astype(np.float64)
        err = float(np.abs(got - want).max())
        good = got.shape == want.shape and err <= tol
        ok &= good
        print(f"check: {target}: max abs difference {err:.3g} (tolerance {tol:.3g}): "
              f"{'ok' if good else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
