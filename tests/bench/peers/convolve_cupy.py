#!/usr/bin/env python3
"""The CuPy calls a GPU-lesson user would write for skyfind's `convolve`:
cupyx.scipy.ndimage.convolve (direct, mode='reflect', as skyfind's default
edge), cupyx.scipy.ndimage.convolve1d twice (rows, then columns) for the
separable kernels and cupyx.scipy.signal.fftconvolve (mode='same'), on the
images and kernels that tests/bench/bench_convolve wrote with --raw DIR. Device time by
CUDA events, 3 warm-ups, median of --repeat runs; the cupyx FFT plan cache is
on (CuPy's default), so repeats reuse plans as skyfind reuses its own.
Usage: convolve_cupy.py DIR SIZE... [--repeat N]"""
import glob
import os
import re
import sys

import numpy as np

from cupy_timing import device_ms, parse_args


def main():
    d, sizes, repeat = parse_args()
    try:
        import cupy as cp
        import cupyx.scipy.ndimage as cnd
        import cupyx.scipy.signal as csig
    except Exception as e:  # noqa: BLE001
        print(f"# CuPy peer not run: {e}")
        return 0
    kernels = []
    for path in sorted(glob.glob(os.path.join(d, "conv_k*_*.f32"))):
        m = re.search(r"conv_k(\d+)_(sep|2d)\.f32$", path)
        side = int(m.group(1))
        kernels.append((side, m.group(2), np.fromfile(path, np.float32).reshape(side, side)))
    kernels.sort(key=lambda t: (t[0], t[1] != "sep"))
    print(f"# CuPy {cp.__version__} on {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: "
          f"device time by CUDA events, median of {repeat} after 3 warm-ups")
    print(f"{'size':<6} {'kernel':<7} {'call':<34} {'ms':>10} {'GB/s':>8}")

    for n in sizes:
        path = os.path.join(d, f"conv_img_{n}.f32")
        if not os.path.exists(path):
            continue
        img = cp.asarray(np.fromfile(path, np.float32).reshape(n, n))
        for side, kind, k in kernels:
            kd = cp.asarray(k)
            calls = [("ndimage.convolve reflect", lambda: cnd.convolve(img, kd, mode="reflect")),
                     ("signal.fftconvolve same", lambda: csig.fftconvolve(img, kd, mode="same"))]
            if kind == "sep":  # the same work as two 1-D passes: k = outer(col, row)
                c = side // 2
                col, row = cp.asarray(k[:, c].copy()), cp.asarray(k[c, :] / k[c, c])
                calls.append(("ndimage.convolve1d x2 reflect",
                              lambda: cnd.convolve1d(cnd.convolve1d(img, row, axis=1, mode="reflect"),
                                                     col, axis=0, mode="reflect")))
            for name, fn in calls:
                if name.startswith("ndimage") and side > 21 and n > 4096 and kind == "2d":
                    print(f"{n:<6} {side:>3}x{side:<3} {name + ' (' + kind + ')':<34} {'skipped: > 1 s per call':>19}")
                    continue
                ms = device_ms(cp, fn, repeat)
                print(f"{n:<6} {side:>3}x{side:<3} {name + ' (' + kind + ')':<34} {ms:10.4f} {8.0 * n * n / (ms * 1e6):8.0f}")
                sys.stdout.flush()
        del img
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
