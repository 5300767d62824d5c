#!/usr/bin/env python3
"""cupyx.scipy.ndimage.label on the masks tests/bench/bench_segment wrote with
--raw DIR (8-connectivity: structure ones((3, 3)); 4: the default cross), as
a GPU-lesson user would label them. Device time by CUDA events, 3 warm-ups,
median of --repeat runs; the number of islands is printed to compare with
skyfind's. Usage: label_cupy.py DIR SIZE... [--repeat N]"""
import os
import sys

import numpy as np

from cupy_timing import device_ms, parse_args

MASKS = ["sim-5sigma", "disc", "checkerboard", "noise-50%", "serpentine"]


def main():
    d, sizes, repeat = parse_args()
    try:
        import cupy as cp
        import cupyx.scipy.ndimage as cnd
    except Exception as e:  # noqa: BLE001
        print(f"# CuPy peer not run: {e}")
        return 0
    print(f"# cupyx.scipy.ndimage.label (CuPy {cp.__version__}): device time by CUDA events, "
          f"median of {repeat} after 3 warm-ups")
    print(f"{'size':<6} {'mask':<13} {'conn':<5} {'islands':>10} {'ms':>10} {'ns/px':>8}")
    for n in sizes:
        for name in MASKS:
            path = os.path.join(d, f"seg_{name}_{n}.u8")
            if not os.path.exists(path):
                continue
            m = cp.asarray(np.fromfile(path, np.uint8).reshape(n, n))
            for conn in (8, 4):
                st = cp.ones((3, 3), dtype=bool) if conn == 8 else None
                _, nl = cnd.label(m, structure=st)
                t = device_ms(cp, lambda: cnd.label(m, structure=st), repeat)
                print(f"{n:<6} {name:<13} {conn:<5} {int(nl):>10} {t:10.4f} {t * 1e6 / (n * n):8.3f}")
                sys.stdout.flush()
            del m
            cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
