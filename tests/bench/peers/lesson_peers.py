"""The GPU-programming lesson's own code, on the images bench_lesson wrote
(raw float32, sim_N.f32): CuPy/cupyx on the GPU (upload and download
included, CUDA events, median of repeats after a warm-up) and numpy/scipy on
the CPU (one run). Prints one table row per size and tool, and the number of
sources and clipped sigma so they can be checked against skyfind's.
Usage: python3 lesson_peers.py DIR SIZE [SIZE...] [--repeat N] [--cpu-max N]"""
import argparse, os, sys, time
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("sizes", type=int, nargs="+")
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--cpu-max", type=int, default=4096, help="largest size run with numpy")
a = ap.parse_args()


def lesson_numpy(data):
    from scipy.ndimage import label, center_of_mass, sum_labels
    f = data.ravel()
    while True:
        med = np.median(f)
        std = np.std(f)
        lower = f.compress(f > med - 3 * std)
        both = lower.compress(lower < med + 3 * std)
        if len(both) == len(f):
            break
        f = both
    std = f.std()
    seg = np.where(data > 5 * std, 1, 0)
    lab = np.empty(data.shape)
    n = label(seg, output=lab)
    pos = center_of_mass(data, lab, range(1, n + 1))
    flux = sum_labels(data, lab, range(1, n + 1))
    return float(std), n


def run_cupy(data):
    import cupy as cp
    from cupyx.scipy.ndimage import label, center_of_mass, sum_labels

    def clip(f):
        while True:
            med = cp.median(f)
            std = cp.std(f)
            lower = f[f > med - 3 * std]
            both = lower[lower < med + 3 * std]
            if len(both) == len(f):
                break
            f = both
        return f

    d = cp.asarray(data)
    f = clip(d.ravel())
    std = f.std()
    seg = cp.where(d > 5 * std, 1, 0)
    lab = cp.empty(d.shape)
    n = label(seg, output=lab)
    pos = center_of_mass(d, lab, cp.arange(1, n + 1))
    flux = sum_labels(d, lab, cp.arange(1, n + 1))
    return float(std), int(n), cp.asnumpy(cp.asarray(pos)), cp.asnumpy(flux)


print(f"{'size':<7} {'tool':<22} {'median_ms':>10} {'runs':>5} {'sources':>8} {'sigma':>14}")
for n in a.sizes:
    path = os.path.join(a.dir, f"sim_{n}.f32")
    data = np.fromfile(path, dtype=np.float32).reshape(n, n)
    try:
        import cupy as cp
        run_cupy(data)  # warm-up: module loads, kernel compilation
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for r in range(a.repeat):
            start.record()
            std, ns, _, _ = run_cupy(data)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        print(f"{n:<7} {'cupy lesson (GPU)':<22} {np.median(times):10.1f} {a.repeat:5d} {ns:8d} {std:14.9g}", flush=True)
    except ImportError:
        print(f"{n:<7} {'cupy lesson (GPU)':<22} {'not run: no cupy':>10}")
    if n <= a.cpu_max:
        t = time.perf_counter()
        std, ns = lesson_numpy(data)
        ms = (time.perf_counter() - t) * 1e3
        print(f"{n:<7} {'numpy lesson (CPU)':<22} {ms:10.1f} {1:5d} {ns:8d} {std:14.9g}", flush=True)
