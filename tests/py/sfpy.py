"""Helpers shared by the Python tests (not a test itself: ctest runs the
test_*.py files; tests/gpu/python_api_gpu.py uses it too): a pass/fail
tally, the CSV catalogue reader, and an array seen through DLPack alone."""
import csv

import numpy as np


class Checks:
    """check(ok, what): counts, and prints what failed."""

    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what)


class OnlyDLPack:
    """An array that offers nothing but the DLPack protocol, as a torch or
    JAX tensor does to skyfind (no __array_interface__, no
    __cuda_array_interface__)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def read_catalog(path):
    """A skyfind CSV catalogue as {column: float array} (comment lines skipped)."""
    with open(path) as f:
        rows = list(csv.reader(l for l in f if not l.startswith("#")))
    head, body = rows[0], rows[1:]
    return {k: np.array([float(r[i]) for r in body]) for i, k in enumerate(head)}
