"""The Python package on the GPU (issue 17): skyfind.find on a CuPy array
used in place. For each image (simulated 2048^2 and 8192^2 skies, FITS
header given as text: ra/dec and Jy columns), with the lesson and radio
pipelines:
  - the table, printed with its columns' formats, equals `skyfind run -b gpu`'s
    CSV rows on the same file, character for character;
  - the run copied no image to the GPU (meta h2d_bytes, the runner's counter
    of host-to-device bytes, far below the image's size: it must be 0 or a
    few bytes of parameters);
  - maps=[...] on the CuPy array: CuPy arrays (device-to-device copies, no
    more bytes moved than without them) equal to the maps of the same run on
    the NumPy array;
  - the CuPy array wrapped in an object with only __dlpack__ (as a torch or
    JAX tensor): the same catalogue, nothing uploaded;
  - timing, after a warm-up, median of 10: the wall time of find() (Python
    and ctypes included, the catalogue back as NumPy columns) beside the
    library's stage device time (CUDA events), and the lesson's CuPy code
    (tests/bench/peers/lesson_code.py) on the same CuPy array, CUDA events.
No astropy on the GPU machine: table=False (NumPy columns).
  python3 tests/gpu/python_api_gpu.py SKYFIND FILE.fits..."""
import math, os, subprocess, sys, tempfile, time
import numpy as np
import cupy as cp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench", "peers"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "py"))
import skyfind  # noqa: E402  (PYTHONPATH=src/python, SKYFIND_LIBRARY set by the caller)
from lesson_code import run_cupy  # noqa: E402
from cupy_timing import device_ms  # noqa: E402
from sfpy import OnlyDLPack  # noqa: E402

SKYFIND = sys.argv[1]
passed = failed = 0


def check(ok, what):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print(("ok   " if ok else "FAIL ") + what)


def read_fits(path):
    """The header text and the float32 plane of a simple FITS file (numpy only)."""
    raw = open(path, "rb").read()
    cards, off = [], 0
    while True:
        blk = raw[off:off + 2880]
        off += 2880
        done = False
        for i in range(0, 2880, 80):
            c = blk[i:i + 80].decode("ascii")
            cards.append(c)
            if c.startswith("END     ") or c.rstrip() == "END":
                done = True
                break
        if done:
            break
    kv = {c[:8].strip(): c[10:].split("/")[0].strip() for c in cards if c[8:10] == "= "}
    nx, ny = int(kv["NAXIS1"]), int(kv["NAXIS2"])
    assert int(kv["BITPIX"]) == -32
    a = np.frombuffer(raw, ">f4", nx * ny, off).reshape(ny, nx).astype(np.float32)
    return "".join(cards[:-1]), a


def rows(cols):
    """The table printed as the CSV writer prints it (each column's format)."""
    fmts = cols["meta"]["formats"]
    names = [k for k in cols if k != "meta"]
    out = [",".join(names)]
    for i in range(len(cols[names[0]])):
        cells = []
        for k in names:
            f, v = fmts[k].replace("ll", ""), cols[k][i]
            cells.append(f % int(v) if f.endswith("d") else f % float(v) if math.isfinite(v) else "nan")
        out.append(",".join(cells))
    return out


with tempfile.TemporaryDirectory() as tmp:
    for path in sys.argv[2:]:
        hdr, a = read_fits(path)
        d = cp.asarray(a)
        cp.cuda.runtime.deviceSynchronize()
        for pipe in ("lesson", "radio"):
            r = subprocess.run([SKYFIND, "run", "-q", "-b", "gpu", "-p", pipe, "-o", tmp, path],
                               capture_output=True, text=True)
            stem = os.path.basename(path)[:-5]
            cli = [l.rstrip("\n") for l in open(os.path.join(tmp, stem + ".cat.csv")) if not l.startswith("#")]
            cols = skyfind.find(d, hdr, pipeline=pipe, backend="gpu", table=False)
            mine = rows(cols)
            n = a.shape[0]
            same = mine == cli
            check(r.returncode == 0 and same,
                  f"{n}^2 {pipe}: find(cupy) {len(mine) - 1} rows equal skyfind run -b gpu's "
                  f"{len(cli) - 1} character for character"
                  + ("" if same else f"\n  py:  {mine[1] if len(mine) > 1 else ''}\n  cli: {cli[1] if len(cli) > 1 else ''}"))
            m = cols["meta"]
            check(m["backend"] == "gpu" and m["h2d_bytes"] < a.nbytes / 1000,
                  f"{n}^2 {pipe}: {int(m['h2d_bytes'])} bytes host to device (image {a.nbytes}), "
                  f"{int(m['d2h_bytes'])} back")
            # maps of a CuPy image: CuPy arrays, made on the device (no more bytes up or down than
            # the first call without them: that one also uploads the kernel, cached after), equal to
            # the maps of the same run on a NumPy array
            names = list(skyfind.MAPS)
            cg, mg = skyfind.find(d, hdr, pipeline=pipe, backend="gpu", table=False, maps=names)
            ch, mh = skyfind.find(a, hdr, pipeline=pipe, backend="gpu", table=False, maps=names)
            kinds = {k: type(v).__module__.split(".")[0] for k, v in mg.items() if v is not None}
            eq = all((mg[k] is None) == (mh[k] is None) and
                     (mg[k] is None or np.array_equal(cp.asnumpy(mg[k]), mh[k], equal_nan=mh[k].dtype.kind == "f"))
                     for k in names)
            # with negative detections (threshold sign=both) the two passes' maps are merged on the
            # host and then copied to the device: still CuPy arrays equal to the NumPy image's
            if pipe == "radio":
                both = {"threshold": {"sign": "both"}}
                cg2, mg2 = skyfind.find(d, hdr, pipeline=pipe, backend="gpu", table=False, maps=names, **both)
                ch2, mh2 = skyfind.find(a, hdr, pipeline=pipe, backend="gpu", table=False, maps=names, **both)
                eq2 = all((mg2[k] is None) == (mh2[k] is None) and
                          (mg2[k] is None or (type(mg2[k]).__module__.startswith("cupy") and
                                              np.array_equal(cp.asnumpy(mg2[k]), mh2[k],
                                                             equal_nan=mh2[k].dtype.kind == "f")))
                          for k in names)
                check(eq2 and rows(cg2) == rows(ch2) and (mh2["segmentation"] < 0).any(),
                      f"{n}^2 radio sign=both: CuPy maps equal a NumPy image's (negative labels: "
                      f"{int((mh2['segmentation'] < 0).sum())} pixels)")
            check(set(kinds.values()) == {"cupy"} and eq and rows(cg) == mine and
                  cg["meta"]["h2d_bytes"] <= m["h2d_bytes"] and cg["meta"]["d2h_bytes"] == m["d2h_bytes"],
                  f"{n}^2 {pipe}: maps {sorted(kinds)} are CuPy arrays equal to a NumPy image's maps; "
                  f"{int(cg['meta']['h2d_bytes'])} B up, {int(cg['meta']['d2h_bytes'])} B down "
                  f"(without maps {int(m['h2d_bytes'])}, {int(m['d2h_bytes'])})")
            # DLPack alone (as a torch or JAX CUDA tensor): read through cupy.from_dlpack, in place
            cd = skyfind.find(OnlyDLPack(d), hdr, pipeline=pipe, backend="gpu", table=False)
            check(rows(cd) == mine and cd["meta"]["h2d_bytes"] <= m["h2d_bytes"],
                  f"{n}^2 {pipe}: a CUDA array given through DLPack alone: the same catalogue, "
                  f"{int(cd['meta']['h2d_bytes'])} B up")
            # timing: find() wall, the stages' device time, the lesson's CuPy code
            walls, stages = [], []
            for k in range(11):
                t0 = time.perf_counter()
                c = skyfind.find(d, hdr, pipeline=pipe, backend="gpu", table=False)
                walls.append((time.perf_counter() - t0) * 1e3)
                stages.append(c["meta"]["stages_ms"])
            wall, dev = float(np.median(walls[1:])), float(np.median(stages[1:]))
            line = (f"{n}^2 {pipe}: find(cupy) {wall:.2f} ms wall, stages {dev:.2f} ms device, "
                    f"call overhead {wall - dev:.2f} ms")
            if pipe == "lesson":
                line += f"; the lesson's CuPy code {device_ms(cp, lambda: run_cupy(d), 5, 1):.2f} ms (CUDA events)"
            print("time " + line)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
