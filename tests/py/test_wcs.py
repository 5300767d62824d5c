#!/usr/bin/env python3
"""World coordinates of skyfind (tests/sf_wcsconv: sf_wcs_open + sf_wcs_pix2world,
0-based pixels) against astropy.wcs.WCS(header).celestial.all_pix2world (origin 0)
to 1e-8 deg, at corners, centre and scattered pixels of every image in the
test-data folder that has a celestial WCS on its first two axes; images without
one must be reported as such by both."""
import glob
import os
import subprocess
import sys
import warnings

import numpy as np
from astropy import log
from astropy.io import fits
from astropy.wcs import WCS, FITSFixedWarning

log.setLevel("ERROR")
warnings.simplefilter("ignore", FITSFixedWarning)
warnings.simplefilter("ignore", fits.verify.VerifyWarning)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SKYFIND_SOURCE", os.path.normpath(os.path.join(HERE, "..", "..")))
DATA = os.environ.get("SKYFIND_TEST_DATA") or os.path.join(SOURCE, "..", "shared", "data")
BUILD = os.environ.get("SKYFIND_BUILD", os.path.join(SOURCE, "build"))
TOOL = os.path.join(BUILD, "tests", "sf_wcsconv")
TOL_DEG = 1e-8

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def first_image(path):
    """Header and 2-D size of the first HDU with image data, or None."""
    with fits.open(path) as hl:
        for h in hl:
            if h.is_image and h.data is not None and h.data.ndim >= 2:
                return h.header.copy(), h.data.shape[-1], h.data.shape[-2]
    return None


def pixels(nx, ny):
    rng = np.random.default_rng(6)
    pts = [(0, 0), (nx - 1, 0), (0, ny - 1), (nx - 1, ny - 1),
           ((nx - 1) / 2, (ny - 1) / 2), (0.25, 0.75), (nx / 3.0, 2.0 * ny / 3.0)]
    pts += [(float(x), float(y)) for x, y in rng.uniform([0, 0], [nx - 1, ny - 1], (5, 2))]
    return pts


def lon_diff(a, b):
    d = np.abs(a - b) % 360.0
    return np.minimum(d, 360.0 - d)


def one(path):
    name = os.path.basename(path)
    try:
        img = first_image(path)
    except Exception as e:  # not a FITS image astropy can read
        print(f"skip {name}: {e}")
        return
    if img is None:
        return
    hdr, nx, ny = img
    # naxis=[1, 2]: the first two axes only (as skyfind's wcssub), so a
    # spectral axis WCSLIB cannot set up (FELO-HEL) does not stop the test.
    w2 = WCS(hdr, naxis=[1, 2])
    has = w2.has_celestial and w2.wcs.lng == 0 and w2.wcs.lat == 1
    pts = pixels(nx, ny)
    args = [TOOL, path] + [f"{v:.17g}" for p in pts for v in p]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode not in (0, 3):
        check(not has, f"{name}: sf_wcsconv failed ({r.returncode}): {r.stderr.strip()}")
        return
    if not has:
        check(r.returncode == 3, f"{name}: astropy has no celestial WCS, skyfind has one")
        return
    check(r.returncode == 0, f"{name}: skyfind finds no celestial WCS: {r.stdout.strip()}")
    if r.returncode:
        return
    lines = r.stdout.strip().splitlines()
    names = lines[0].split()[1:3]
    ct = w2.wcs.ctype[0].upper()
    want = ["glon", "glat"] if ct.startswith("GLON") else ["ra", "dec"] if ct.startswith("RA") \
        else names
    check(names == want, f"{name}: column names {names}, expected {want}")
    got = np.array([[float(v) for v in ln.split()] for ln in lines[1:]])
    ref = np.array(w2.celestial.all_pix2world(np.array(pts), 0))
    okn = np.isnan(got) == np.isnan(ref)
    check(okn.all(), f"{name}: NaN pattern differs: {got[~okn.all(1)]} vs {ref[~okn.all(1)]}")
    m = ~np.isnan(ref).any(1) & ~np.isnan(got).any(1)
    dl = lon_diff(got[m, 0], ref[m, 0]) * np.cos(np.radians(ref[m, 1]))
    db = np.abs(got[m, 1] - ref[m, 1])
    worst = max(dl.max(initial=0), db.max(initial=0))
    check(worst <= TOL_DEG and m.sum() > 0,
          f"{name}: worst difference {worst:.3g} deg over {m.sum()} pixels ({ct})")
    print(f"{name}: {w2.wcs.ctype[0]},{w2.wcs.ctype[1]}: {m.sum()} pixels, worst {worst:.2g} deg")


def main():
    if not os.path.exists(TOOL):
        print(f"no {TOOL}: build first")
        return 1
    files = sorted(f for f in glob.glob(os.path.join(DATA, "*.fits*"))
                   if f.endswith((".fits", ".fits.gz", ".fits.fz")))
    for f in files:
        one(f)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
