#!/usr/bin/python3
"""Writes the .npy fixtures of tests/client/npy_test.cc with NumPy itself.

The generated files are committed; rerun this (with /usr/bin/python3, which has numpy) only
when adding a fixture. Values are deterministic (np.arange based) so that the tests assert
them directly.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, arr):
    np.save(os.path.join(HERE, name), arr, allow_pickle=True)


def main():
    save("f4_1d.npy", np.arange(6, dtype="<f4") * 0.5)                      # [0, .5, ... 2.5]
    save("f4_2d.npy", (np.arange(12, dtype="<f4") * 0.5).reshape(3, 4))
    save("f4_scalar.npy", np.array(2.5, dtype="<f4"))                      # shape ()
    save("f8.npy", np.arange(5, dtype="<f8") * 0.5 - 1)                    # [-1, -.5, 0, .5, 1]
    save("f2.npy", np.arange(4, dtype="<f2") * 0.5)                        # [0, .5, 1, 1.5]
    save("i4.npy", np.arange(-3, 3, dtype="<i4").reshape(2, 3))
    save("i8.npy", np.arange(4, dtype="<i8") * 1_000_000_000_000)
    save("empty.npy", np.zeros((0,), dtype="<f4"))
    save("empty_2d.npy", np.zeros((2, 0), dtype="<f4"))
    save("fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
    save("big_endian.npy", np.arange(3, dtype=">f4"))
    save("u2.npy", np.arange(3, dtype="<u2"))
    save("bool.npy", np.array([True, False]))
    save("unicode.npy", np.array(["ab", "c"]))
    save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    save("object.npy", np.array([1, "x"], dtype=object))
    for version in ((2, 0), (3, 0)):
        name = "f4_v%d.npy" % version[0]
        with open(os.path.join(HERE, name), "wb") as f:
            np.lib.format.write_array(f, np.arange(4, dtype="<f4") * 0.5, version=version)


if __name__ == "__main__":
    main()
