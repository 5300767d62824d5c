"""Helpers shared by the Python tests (not a test itself: ctest runs the
test_*.py files): a pass/fail tally and the CSV catalogue reader."""
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


def read_catalog(path):
    """A skyfind CSV catalogue as {column: float array} (comment lines skipped)."""
    with open(path) as f:
        rows = list(csv.reader(l for l in f if not l.startswith("#")))
    head, body = rows[0], rows[1:]
    return {k: np.array([float(r[i]) for r in body]) for i, k in enumerate(head)}
