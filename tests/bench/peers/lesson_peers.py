"""The GPU-programming lesson's own code, on the images bench_lesson wrote
(raw float32, sim_N.f32): CuPy/cupyx on the GPU (upload and download
included, CUDA events, median of repeats after a warm-up) and numpy/scipy on
the CPU (median of up to --repeat runs within 20 s). Prints one table row per
size and tool, and the number of sources and clipped sigma so they can be
checked against skyfind's.
With --json FILE each row is also appended to FILE as one JSON object per
line, and with --cat DIR each tool's catalogue (x, y 0-based, flux) is
written as DIR/sim_N.<tool>.cat.csv (tests/bench/harness.py reads both).
Usage: python3 lesson_peers.py DIR SIZE [SIZE...] [--repeat N] [--cpu-max N]
       [--json FILE] [--cat DIR]"""
import argparse, json, os, sys, time
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("sizes", type=int, nargs="+")
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--cpu-max", type=int, default=4096, help="largest size run with numpy")
ap.add_argument("--json", help="append one JSON object per row to this file")
ap.add_argument("--cat", help="write each tool's catalogue (x, y 0-based, flux) here")
a = ap.parse_args()


def record(n, tool, backend, ms=None, runs=0, ns=None, std=None, pos=None, flux=None, note=""):
    """Append a row to --json and the catalogue to --cat."""
    cat = ""
    if a.cat and pos is not None:
        cat = os.path.join(a.cat, f"sim_{n}.{tool.split()[0].lower()}-lesson.cat.csv")
        p = np.asarray(pos, dtype=float).reshape(-1, 2)  # center_of_mass gives (y, x)
        np.savetxt(cat, np.column_stack([p[:, 1], p[:, 0], np.asarray(flux, dtype=float)]),
                   delimiter=",", header="x,y,flux", comments="", fmt="%.10g")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps({"input": f"sim_{n}", "nx": n, "ny": n, "tool": tool,
                                "backend": backend, "stage": "pipeline", "ms": ms, "runs": runs,
                                "nsources": ns, "sigma": std, "catalog": cat,
                                "scope": "in memory: array in, positions and fluxes out"
                                         + (" (upload and download included)" if backend == "gpu" else ""),
                                "note": note}) + "\n")


from lesson_code import lesson_numpy, run_cupy  # the lesson's own code, shared with batch_cupy.py


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
            std, ns, pos, flux = run_cupy(data)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        print(f"{n:<7} {'cupy lesson (GPU)':<22} {np.median(times):10.1f} {a.repeat:5d} {ns:8d} {std:14.9g}", flush=True)
        record(n, "CuPy lesson", "gpu", float(np.median(times)), a.repeat, ns, std, pos, flux,
               "CUDA events, after a warm-up")
    except Exception as e:  # no cupy, or no usable device
        why = "no cupy" if isinstance(e, ImportError) else f"{type(e).__name__}: {e}"
        print(f"{n:<7} {'cupy lesson (GPU)':<22} not run: {why}")
        record(n, "CuPy lesson", "gpu", note=f"not run: {why}")
    if n <= a.cpu_max:
        import scipy.ndimage  # noqa: F401  (not timed: the import is no part of the method)
        times = []  # up to --repeat runs, while they take less than 20 s in all
        while len(times) < a.repeat and sum(times) < 20e3:
            t = time.perf_counter()
            std, ns, pos, flux = lesson_numpy(data)
            times.append((time.perf_counter() - t) * 1e3)
        ms = float(np.median(times))
        print(f"{n:<7} {'numpy lesson (CPU)':<22} {ms:10.1f} {len(times):5d} {ns:8d} {std:14.9g}", flush=True)
        record(n, "numpy lesson", "cpu", ms, len(times), ns, std, pos, flux,
               "wall time, median of the runs (no warm-up)")
    else:
        record(n, "numpy lesson", "cpu", note=f"not run: larger than --cpu-max {a.cpu_max}")
