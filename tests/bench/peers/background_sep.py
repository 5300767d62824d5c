"""SEP's mesh background (sep.Background, the SExtractor algorithm) on the
images bench_background wrote (raw float32, bkg_N.f32): box 64, 3x3 median
filter, on one thread, with both full-resolution maps made (back() and
rms()), as skyfind's method=mesh does. Prints one row per size: median ms of
--repeat runs (after one warm-up) and SEP's global level and rms, to set
beside skyfind's stats.
Usage: python3 background_sep.py DIR SIZE [SIZE...] [--repeat N]"""
import argparse, os, time

# one thread, whatever the machine (SEP itself is single-threaded; numpy's
# BLAS pools are not used here but are pinned anyway)
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = "1"
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("sizes", type=int, nargs="+")
ap.add_argument("--repeat", type=int, default=5)
a = ap.parse_args()

try:
    import sep
except ImportError:
    print("SKIP: no sep module (pip install sep)")
    raise SystemExit(0)


def run(data):
    b = sep.Background(data, bw=64, bh=64, fw=3, fh=3)
    back = b.back()
    rms = b.rms()
    return b, back, rms


print(f"# sep {sep.__version__}: sep.Background(bw=64, bh=64, fw=3, fh=3) + back() + rms(), one thread")
print(f"{'size':<7} {'tool':<22} {'median_ms':>10} {'runs':>5} {'globalback':>14} {'globalrms':>14}")
for n in a.sizes:
    path = os.path.join(a.dir, f"bkg_{n}.f32")
    data = np.fromfile(path, dtype=np.float32).reshape(n, n)
    data = np.ascontiguousarray(data)
    run(data)  # warm-up
    times = []
    for r in range(a.repeat):
        t = time.perf_counter()
        b, back, rms = run(data)
        times.append((time.perf_counter() - t) * 1e3)
    print(f"{n:<7} {'sep.Background (CPU)':<22} {np.median(times):10.1f} {a.repeat:5d} "
          f"{b.globalback:14.9g} {b.globalrms:14.9g}", flush=True)
