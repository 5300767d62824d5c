"""Shared by the CuPy peers (convolve_cupy.py, label_cupy.py): their
command line (DIR SIZE... [--repeat N]) and CUDA-event timing."""
import sys

import numpy as np


def parse_args(default_repeat=10):
    """(folder, sizes, repeat) from sys.argv."""
    args = sys.argv[1:]
    repeat = default_repeat
    if "--repeat" in args:
        i = args.index("--repeat")
        repeat = int(args[i + 1])
        del args[i:i + 2]
    return args[0], [int(s) for s in args[1:]], repeat


def device_ms(cp, fn, repeat, warmup=3):
    """Median device time of fn() in ms by CUDA events, after warm-up calls."""
    for _ in range(warmup):
        fn()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(repeat):
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))
