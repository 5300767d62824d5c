#!/usr/bin/env python3
"""Stage `segment`, CPU twin against scipy.ndimage.label: identical labels on
random masks and on masks made from the real images in SKYFIND_TEST_DATA
(mask = finite & (v > nanmedian + 3 nanstd)); min_area against a numpy
re-implementation. Needs SKYFIND_BUILD (tool at $SKYFIND_BUILD/tests/sf_label)."""
import glob
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import scipy.ndimage as ndi
from astropy import log as astropy_log
from astropy.io import fits

passed = 0
failed = 0


def report(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}: {detail}")


def sf_label(tool, mask, conn, min_area, tmp):
    ny, nx = mask.shape
    mpath = os.path.join(tmp, "mask.raw")
    lpath = os.path.join(tmp, "labels.raw")
    np.ascontiguousarray(mask, dtype=np.uint8).tofile(mpath)
    out = subprocess.run([tool, str(nx), str(ny), str(conn), str(min_area), mpath, lpath],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"sf_label failed ({out.returncode}): {out.stderr.strip()}")
    lab = np.fromfile(lpath, dtype=np.int32).reshape(ny, nx)
    return lab, int(out.stdout.split()[-1])


def reference(mask, conn, min_area):
    st = ndi.generate_binary_structure(2, 1 if conn == 4 else 2)
    lab, n = ndi.label(mask, structure=st)
    if min_area > 1:
        area = np.bincount(lab.ravel(), minlength=n + 1)
        keep = area >= min_area
        keep[0] = False
        renum = np.zeros(n + 1, dtype=np.int64)
        renum[keep] = np.arange(1, keep.sum() + 1)
        lab, n = renum[lab], int(keep.sum())
    return lab.astype(np.int32), n


def compare(tool, mask, conn, min_area, what, tmp):
    try:
        got, n = sf_label(tool, mask, conn, min_area, tmp)
    except RuntimeError as e:
        report(False, what, str(e))
        return
    want, nwant = reference(mask, conn, min_area)
    bad = np.argwhere(got != want)
    if len(bad) or n != nwant:
        first = ", ".join(f"(x={x},y={y}): {want[y, x]} vs {got[y, x]}" for y, x in bad[:5])
        report(False, what, f"{len(bad)} pixels differ, N {nwant} vs {n}; {first}")
    else:
        report(True, what)


def image_plane(path):
    """First image HDU with data, as 2-D float (first plane of a cube), or None."""
    try:
        with warnings.catch_warnings(), fits.open(path, memmap=False) as hl:
            warnings.simplefilter("ignore")  # non-standard cards of old files
            for hdu in hl:
                if not hdu.is_image or hdu.data is None:
                    continue
                d = np.squeeze(np.asarray(hdu.data, dtype=np.float64))
                while d.ndim > 2:
                    d = d[0]
                if d.ndim == 2:
                    return d
                return None
    except Exception as e:  # not a readable image: not part of this test
        print(f"  {os.path.basename(path)}: not read ({e})")
    return None


def main():
    astropy_log.setLevel("ERROR")
    build = os.environ.get("SKYFIND_BUILD")
    if not build:
        print("SKIP: SKYFIND_BUILD is not set")
        return 77
    tool = os.path.join(build, "tests", "sf_label")
    if not os.access(tool, os.X_OK):
        print(f"FAIL: no tool {tool} (build the sf_label target)")
        return 1
    data = os.environ.get("SKYFIND_TEST_DATA") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")
    rng = np.random.default_rng(20240611)
    with tempfile.TemporaryDirectory() as tmp:
        for ny, nx in [(1, 1), (1, 257), (257, 1), (2, 2), (3, 5), (31, 33), (127, 131),
                       (509, 521), (1000, 37)]:
            for p in (0.0, 0.1, 0.5, 0.59, 0.9, 1.0):
                mask = rng.random((ny, nx)) < p
                for conn in (4, 8):
                    for min_area in (1, 3, 10):
                        compare(tool, mask, conn, min_area,
                                f"random {nx}x{ny} p={p} conn {conn} min_area {min_area}", tmp)
        yy, xx = np.mgrid[0:64, 0:65]
        for conn in (4, 8):
            compare(tool, (xx + yy) % 2 == 0, conn, 1, f"checkerboard conn {conn}", tmp)
        nimg = 0
        files = sorted(glob.glob(os.path.join(data, "*.fits*")))
        if not files:
            print(f"  no FITS files in {data}: real-image part not run")
        for path in files:
            d = image_plane(path)
            if d is None:
                continue
            fin = np.isfinite(d)
            if not fin.any():
                continue
            thr = np.nanmedian(d) + 3 * np.nanstd(d)
            with np.errstate(invalid="ignore"):
                mask = fin & (d > thr)
            nimg += 1
            name = os.path.basename(path)
            for conn in (4, 8):
                for min_area in (1, 5):
                    compare(tool, mask, conn, min_area,
                            f"{name} conn {conn} min_area {min_area}", tmp)
        print(f"  {nimg} real images compared")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
