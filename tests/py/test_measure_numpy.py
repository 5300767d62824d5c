#!/usr/bin/env python3
"""Stage `measure` (the CPU twin, through tests/sf_measure_tool, which writes
the raw sf_source array) against numpy in float64 on islands labelled by
scipy.ndimage.label (8-connected, and 4-connected on random images): npix,
flux sums, centroids, second moments x2/y2/xy, boxes and peaks equal to 1e-9
relative (npix, boxes, peaks exactly), and the rest against numpy versions of
the documented formulas: a, b, theta (SExtractor), the noise at the peak, snr,
flux_err, x_err, y_err, the flags (edge, NaN, truncated, merged) and npeaks.
Real images from SKYFIND_TEST_DATA (global level and sigma subtracted, or
the raw pixels) and random images with NaNs, background and rms maps and a
two-level mask. The layout of sf_source (offsets printed by the tool) must be
the packed 160-byte struct. Prints the worst relative errors."""
import math
import os
import subprocess
import sys
import tempfile

import warnings

import numpy as np
from astropy import log
from astropy.io import fits
from scipy import ndimage

log.setLevel("ERROR")
warnings.simplefilter("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SKYFIND_SOURCE", os.path.normpath(os.path.join(HERE, "..", "..")))
DATA = os.environ.get("SKYFIND_TEST_DATA") or os.path.join(SOURCE, "..", "shared", "data")
BUILD = os.environ.get("SKYFIND_BUILD", os.path.join(SOURCE, "build"))
TOOL = os.path.join(BUILD, "tests", "sf_measure_tool")
IMAGES = [
    "radio_atca_scorpio_s17_1000x1000.fits",
    "radio_lofar_GRB201006A_wsclean_256x256.fits",
    "radio_parkes_1904-66_SIN.fits",
    "radio_vla_nvas_W51_22GHz_114x124x1x1.fits",
    "optical_eso_ntt_emmi_256x256_int16_bscale.fits",
    "sim_aegean_synthetic_512x256.fits",
]
FIELDS = [("id", "i4"), ("flags", "i4"), ("npix", "i8"), ("flux_sum", "f8"), ("x", "f8"),
          ("y", "f8"), ("peak", "f4"), ("peak_x", "i4"), ("peak_y", "i4"), ("xmin", "i4"),
          ("xmax", "i4"), ("ymin", "i4"), ("ymax", "i4"), ("bkg", "f4"), ("rms", "f4"),
          ("npeaks", "i4"), ("parent", "i4"), ("nchildren", "i4"), ("sign", "i4"), ("x2", "f8"), ("y2", "f8"), ("xy", "f8"), ("a", "f8"), ("b", "f8"),
          ("theta", "f8"), ("snr", "f8"), ("flux_err", "f8"), ("x_err", "f8"), ("y_err", "f8")]
TOL = 1e-9
EDGE, NAN, TRUNCATED, MERGED = 1, 2, 4, 8

passed = failed = 0
worst = {}


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def packed_dtype():
    off, names, formats, offsets = 0, [], [], []
    for name, fmt in FIELDS:  # C's natural alignment: each field at a multiple of its size
        size = np.dtype(fmt).itemsize
        off = (off + size - 1) // size * size
        names.append(name)
        formats.append(fmt)
        offsets.append(off)
        off += size
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": (off + 7) // 8 * 8})


DTYPE = packed_dtype()


def run_tool(tmp, img, lab, n, args=()):
    ny, nx = img.shape
    fi, fl, fo = (os.path.join(tmp, f) for f in ("img.f32", "lab.i32", "out.bin"))
    np.ascontiguousarray(img, dtype=np.float32).tofile(fi)
    np.ascontiguousarray(lab, dtype=np.int32).tofile(fl)
    extra = []
    for a in args:
        if isinstance(a, tuple):  # (key, array, dtype): written raw
            path = os.path.join(tmp, a[0] + ".raw")
            np.ascontiguousarray(a[1], dtype=a[2]).tofile(path)
            extra.append(f"{a[0]}={path}")
        else:
            extra.append(a)
    r = subprocess.run([TOOL, str(nx), str(ny), str(n), fi, fl, fo] + extra,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"sf_measure_tool: {r.stderr.strip()}")
    head = r.stdout.split()
    size = int(head[1])
    offs = dict(kv.split("=") for kv in head[2:])
    check(size == DTYPE.itemsize and all(int(offs[nm]) == DTYPE.fields[nm][1] for nm, _ in FIELDS),
          f"sf_source layout: size {size}, offsets {offs}")
    return np.fromfile(fo, dtype=DTYPE, count=n)


def shape(x2, y2, xy):
    """SExtractor's A, B, THETA (degrees) from the moments, as measure.h states."""
    sing = x2 * y2 - xy * xy < 0.00694
    X2, Y2 = np.where(sing, x2 + 0.0833333, x2), np.where(sing, y2 + 0.0833333, y2)
    d = X2 - Y2
    with np.errstate(invalid="ignore"):
        th = np.where((np.abs(d) > 0) | (xy != 0), np.arctan2(2 * xy, d) / 2, np.pi / 4)
        th = np.degrees(th)
        th = np.where(th <= -90, th + 180, th)
        q = np.sqrt(d * d / 4 + xy * xy)
        p = (X2 + Y2) / 2
        a, b = np.sqrt(p + q), np.sqrt(p - q)
    return a, b, th, sing


def group_sum(L, n):
    """Per-label sums of weights over pixels with labels L (0..n-1), exact
    (math.fsum: correctly rounded), so the reference adds no rounding of
    its own beyond the float64 products."""
    order = np.argsort(L, kind="stable")
    bounds = np.searchsorted(L[order], np.arange(n + 1))

    def cnt(w):
        w = np.asarray(w, np.float64)[order]
        return np.array([math.fsum(w[bounds[k]:bounds[k + 1]]) for k in range(n)])
    return cnt


def reference(image, lab, n, level=None, sigma=None, bkgmap=None, rmsmap=None, subtract=True,
              seeds=None):
    """numpy float64 measurements of the islands of lab (1..n) on image."""
    ny, nx = image.shape
    f32 = np.float32
    if subtract and bkgmap is not None:
        m = image.astype(f32) - bkgmap.astype(f32)
    elif subtract and level is not None:
        m = image.astype(f32) - f32(level)
    else:
        m = image.astype(f32)
    if rmsmap is not None:
        r = rmsmap.astype(f32)
    elif sigma is not None:
        r = np.full(image.shape, f32(sigma))
    else:
        r = None
    good = (lab > 0) & np.isfinite(m)
    yy, xx = np.nonzero(good)
    L = lab[good] - 1
    mv = m[good].astype(np.float64)
    cnt = group_sum(L, n)
    out = {"npix": np.bincount(L, minlength=n)}
    F = cnt(mv)
    out["flux_sum"] = F
    with np.errstate(invalid="ignore", divide="ignore"):
        xc, yc = cnt(mv * xx) / F, cnt(mv * yy) / F
        dx, dy = xx - xc[L], yy - yc[L]
        out["x"], out["y"] = xc, yc
        out["x2"], out["y2"], out["xy"] = cnt(mv * dx * dx) / F, cnt(mv * dy * dy) / F, cnt(mv * dx * dy) / F
    a, b, th, sing = shape(out["x2"], out["y2"], out["xy"])
    out["a"], out["b"], out["theta"] = a, b, th
    big = np.iinfo(np.int32).max
    for k, v, fn in (("xmin", xx, np.minimum), ("xmax", xx, np.maximum), ("ymin", yy, np.minimum),
                     ("ymax", yy, np.maximum)):
        arr = np.full(n, big if fn is np.minimum else -1, dtype=np.int64)
        fn.at(arr, L, v)
        out[k] = arr
    # peak: the largest float32 value, first in raster order on ties
    idx = yy * nx + xx
    order = np.lexsort((idx, -m[good], L))
    first = order[np.r_[True, np.diff(L[order]) != 0]]
    out["peak"] = m[good][first]
    out["peak_x"], out["peak_y"] = xx[first], yy[first]
    if r is not None:
        rv = r[good].astype(np.float64) ** 2
        R0 = cnt(rv)
        out["flux_err"] = np.sqrt(R0)
        ex2, ey2, exy = cnt(rv * dx * dx) / F ** 2, cnt(rv * dy * dy) / F ** 2, cnt(rv * dx * dy) / F ** 2
        es = R0 * 0.08333 / F ** 2
        fix = sing & (ex2 * ey2 - exy * exy < es * es)
        out["x_err"] = np.sqrt(np.where(fix, ex2 + es, ex2))
        out["y_err"] = np.sqrt(np.where(fix, ey2 + es, ey2))
        out["rms"] = r[out["peak_y"], out["peak_x"]]
        with np.errstate(invalid="ignore", divide="ignore"):
            out["snr"] = out["peak"].astype(np.float64) / out["rms"].astype(np.float64)
    if bkgmap is not None:
        out["bkg"] = bkgmap.astype(f32)[out["peak_y"], out["peak_x"]]
    elif level is not None:
        out["bkg"] = np.full(n, f32(level))
    # flags
    flags = np.zeros(n, dtype=np.int64)
    flags |= np.where((out["xmin"] == 0) | (out["ymin"] == 0) | (out["xmax"] == nx - 1) |
                      (out["ymax"] == ny - 1), EDGE, 0)
    flags |= np.where((out["peak_x"] == 0) | (out["peak_y"] == 0) | (out["peak_x"] == nx - 1) |
                      (out["peak_y"] == ny - 1), TRUNCATED, 0)
    near_blank = ndimage.binary_dilation(~np.isfinite(image), structure=np.ones((3, 3), bool))
    bad = ((lab > 0) & ~np.isfinite(m)) | (good & near_blank)
    hit = np.unique(lab[bad & (lab > 0)]) - 1
    flags[hit] |= NAN
    if seeds is not None:
        # strict 8-neighbour maxima of m among measurable pixels of the same island
        pad_m = np.pad(np.where(good, m, -np.inf).astype(np.float64), 1, constant_values=-np.inf)
        pad_l = np.pad(lab, 1)
        ismax = good & seeds
        for ddy in (-1, 0, 1):
            for ddx in (-1, 0, 1):
                if ddx == 0 and ddy == 0:
                    continue
                nb_m = pad_m[1 + ddy:1 + ddy + ny, 1 + ddx:1 + ddx + nx]
                nb_l = pad_l[1 + ddy:1 + ddy + ny, 1 + ddx:1 + ddx + nx]
                same = (nb_l == lab) & np.isfinite(nb_m)
                ismax &= ~same | (m > nb_m)
        out["npeaks"] = np.bincount(lab[ismax] - 1, minlength=n)
        flags |= np.where(out["npeaks"] > 1, MERGED, 0)
    out["flags"] = flags
    return out


def rel(got, ref, scale):
    got, ref, scale = (np.asarray(v, np.float64) for v in (got, ref, scale))
    both_nan = np.isnan(got) & np.isnan(ref)
    with np.errstate(invalid="ignore", divide="ignore"):
        e = np.abs(got - ref) / scale
    return np.where(both_nan, 0.0, np.where(np.isnan(e), np.inf, e))


def compare(name, got, ref, n):
    check(len(got) == n and np.array_equal(got["id"], np.arange(1, n + 1)), f"{name}: ids")
    nz = ref["npix"] > 0
    for k in ("npix", "xmin", "xmax", "ymin", "ymax", "peak_x", "peak_y", "flags"):
        check(np.array_equal(got[k][nz], ref[k][nz]), f"{name}: {k} differs in "
              f"{np.count_nonzero(got[k][nz] != ref[k][nz])} sources")
    check(np.array_equal(got["peak"][nz], ref["peak"][nz]), f"{name}: peaks differ")
    if "npeaks" in ref:
        check(np.array_equal(got["npeaks"][nz], ref["npeaks"][nz]), f"{name}: npeaks differ")
    else:
        check(np.all(got["npeaks"] == -1), f"{name}: npeaks without a mask")
    for k in ("bkg", "rms"):
        if k in ref:
            check(np.array_equal(got[k][nz], ref[k][nz]), f"{name}: {k} at the peak differs")
        else:
            check(np.all(np.isnan(got[k])), f"{name}: {k} without a background")
    trace = np.abs(ref["x2"]) + np.abs(ref["y2"])
    F = ref["flux_sum"]
    errs = {
        "flux_sum": rel(got["flux_sum"], F, np.abs(F)),
        "x": rel(got["x"], ref["x"], np.maximum(np.abs(ref["x"]), 1)),
        "y": rel(got["y"], ref["y"], np.maximum(np.abs(ref["y"]), 1)),
        # moments relative to themselves, or to 1e-3 of the trace for a component
        # far smaller than the other (a line), or to 1e-15 pix^2 for one pixel
        "x2": rel(got["x2"], ref["x2"], np.maximum(np.maximum(np.abs(ref["x2"]), 1e-3 * trace), 1e-15)),
        "y2": rel(got["y2"], ref["y2"], np.maximum(np.maximum(np.abs(ref["y2"]), 1e-3 * trace), 1e-15)),
        "xy": rel(got["xy"], ref["xy"], np.maximum(np.maximum(np.sqrt(np.abs(ref["x2"] * ref["y2"])),
                                                              1e-3 * trace), 1e-15)),
        "a": rel(got["a"], ref["a"], ref["a"]),
        "b": rel(got["b"], ref["b"], ref["a"]),
    }
    # theta: modulo 180 degrees, relative to its conditioning a^2 / (a^2 - b^2)
    a2, b2 = ref["a"] ** 2, ref["b"] ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        dth = np.abs((got["theta"] - ref["theta"] + 90) % 180 - 90)
        cond = np.where(a2 > b2, a2 / (a2 - b2), np.inf)
        errs["theta"] = np.where(np.isnan(got["theta"]) & np.isnan(ref["theta"]), 0,
                                 np.nan_to_num(np.radians(dth) / cond, nan=np.inf))
    for k in ("flux_err", "x_err", "y_err", "snr"):
        if k in ref:
            errs[k] = rel(got[k], ref[k], np.abs(ref[k]))
        else:
            check(np.all(np.isnan(got[k])), f"{name}: {k} without a noise")
    for k, e in errs.items():
        e = e[nz]
        w = float(e.max()) if e.size else 0.0
        worst[k] = max(worst.get(k, 0.0), w)
        check(w <= TOL, f"{name}: {k} worst relative error {w:.3g}")


def first_plane(path):
    with fits.open(path) as hl:
        for h in hl:
            if h.data is not None and h.is_image:
                d = np.asarray(h.data, dtype=np.float32)
                while d.ndim > 2:
                    d = d[0]
                return d
    raise RuntimeError("no image in " + path)


def real_image(tmp, name):
    data = first_plane(os.path.join(DATA, name))
    fin = data[np.isfinite(data)]
    med = float(np.median(fin))
    sig = float(1.4826 * np.median(np.abs(fin - med)))
    thr = med + 5 * sig
    mask = np.isfinite(data) & (data > thr)
    lab, n = ndimage.label(mask, structure=np.ones((3, 3), bool))
    check(n > 0, f"{name}: no islands above {thr:g}")
    if not n:
        return
    seeds = mask.astype(np.uint8)
    got = run_tool(tmp, data, lab, n, [f"level={med!r}", f"sigma={sig!r}", ("mask", seeds, np.uint8)])
    ref = reference(data, lab, n, level=med, sigma=sig, seeds=mask)
    compare(f"{name} (level and sigma subtracted)", got, ref, n)
    got = run_tool(tmp, data, lab, n, ["subtract=0"])
    ref = reference(data, lab, n, subtract=False)
    compare(f"{name} (raw pixels)", got, ref, n)
    print(f"{name}: {data.shape[1]}x{data.shape[0]}, {n} islands, {int(ref['npix'].sum())} pixels")


def random_image(tmp, seed, nx, ny, conn):
    rng = np.random.default_rng(seed)
    data = rng.normal(0, 1, (ny, nx)).astype(np.float32)
    yy, xx = np.mgrid[0:ny, 0:nx]
    for _ in range(max(3, nx * ny // 3000)):
        cx, cy = rng.uniform(-5, nx + 5), rng.uniform(-5, ny + 5)
        sa, sb, th = rng.uniform(1, 6), rng.uniform(0.7, 3), rng.uniform(0, np.pi)
        u = (xx - cx) * np.cos(th) + (yy - cy) * np.sin(th)
        v = -(xx - cx) * np.sin(th) + (yy - cy) * np.cos(th)
        data += (rng.uniform(5, 200) * np.exp(-0.5 * (u * u / sa ** 2 + v * v / sb ** 2))).astype(np.float32)
    data[rng.uniform(size=data.shape) < 0.01] = np.nan
    bkg = (0.2 * np.sin(xx / 17.0) + 0.1 * np.cos(yy / 11.0) + 100).astype(np.float32)
    rms = rng.uniform(0.8, 1.2, data.shape).astype(np.float32)
    data = data + bkg
    fin = np.isfinite(data)
    mask = fin & (data - bkg > 3 * rms)
    st = np.ones((3, 3), bool) if conn == 8 else ndimage.generate_binary_structure(2, 1)
    lab, n = ndimage.label(mask, structure=st)
    two = np.where(mask, np.where(rng.uniform(size=data.shape) < 0.3, 2, 1), 0).astype(np.uint8)
    got = run_tool(tmp, data, lab, n, [("mask", two, np.uint8), ("bkg", bkg, np.float32),
                                       ("rms", rms, np.float32), "level=5", "sigma=7"])
    ref = reference(data, lab, n, level=5, bkgmap=bkg, rmsmap=rms, seeds=(two & 1) == 1)
    compare(f"random {nx}x{ny} seed {seed} {conn}-connected (maps, two-level mask)", got, ref, n)
    print(f"random {nx}x{ny} seed {seed}: {n} islands")


def main():
    if not os.path.exists(TOOL):
        print(f"no {TOOL}: build first")
        return 1
    todo = [nm for nm in IMAGES if os.path.exists(os.path.join(DATA, nm))]
    if len(todo) < 4:
        print(f"SKIP: fewer than 4 test images in {DATA}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        for nm in todo:
            real_image(tmp, nm)
        for seed, (nx, ny), conn in ((1, (300, 200), 8), (2, (257, 131), 4), (3, (1, 400), 8),
                                     (4, (640, 480), 8), (5, (97, 1), 4)):
            random_image(tmp, seed, nx, ny, conn)
    print("worst relative errors: " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
