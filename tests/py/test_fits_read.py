#!/usr/bin/env python3
"""Compare skyfind's FITS reader (tests/sf_fitsdump) with astropy on every image
in the test-data folder: sizes, NaN positions, pixel values (exact for float
and unscaled integer data, 1e-6 relative for BSCALE/BZERO-scaled integers, as
CFITSIO scales in double and astropy in float32), NaN counts against
INVENTORY.md, and that a 2-D copy written by skyfind keeps the celestial WCS.
Files that hold no 2-D image must fail with the file name in the message."""
import glob
import os
import subprocess
import sys
import tempfile
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
TOOL = os.environ.get("SF_FITSDUMP", os.path.join(BUILD, "tests", "sf_fitsdump"))
REL_SCALED = 1e-6


def inventory_nans():
    """{file: NaN count} from the image table of INVENTORY.md (first row per file)."""
    out = {}
    path = os.path.join(DATA, "INVENTORY.md")
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cols) < 10 or not cols[0].endswith((".fits", ".fits.gz", ".fits.fz")):
                continue
            if cols[0] not in out and cols[8].isdigit():
                out[cols[0]] = int(cols[8])
    return out


def first_image(path):
    """(hdu index, data, header) of the first HDU with image data, or None."""
    with fits.open(path) as hl:
        for i, h in enumerate(hl):
            if not h.is_image:
                continue
            hdr = h.header.copy()  # before .data: astropy drops BSCALE/BZERO on scaling
            if h.data is not None and h.data.size > 0:
                return i, np.array(h.data), hdr
    return None


def run_tool(path, plane, out):
    return subprocess.run([TOOL, path, str(plane), out], capture_output=True, text=True)


def expected_planes(data, hdr):
    """Astropy's pixels as float32 planes (nplanes, ny, nx), BLANK as NaN."""
    d = data
    if d.dtype.kind in "iu" and "BLANK" in hdr:
        d = np.where(d == hdr["BLANK"], np.nan, d.astype(np.float64))
    d = np.asarray(d, dtype=np.float32)
    ny, nx = d.shape[-2], d.shape[-1]
    return d.reshape(-1, ny, nx)


def compare_plane(got, want, scaled):
    gn, wn = np.isnan(got), np.isnan(want)
    if not np.array_equal(gn, wn):
        return "NaN positions differ in %d pixels" % int(np.sum(gn != wn))
    g, w = got[~gn].astype(np.float64), want[~wn].astype(np.float64)
    if scaled:
        bad = np.abs(g - w) > REL_SCALED * np.maximum(np.abs(w), 1e-30)
    else:
        bad = g != w
    if np.any(bad):
        k = int(np.argmax(np.abs(g - w)))
        return "%d pixels differ (largest: skyfind %r, astropy %r)" % (int(np.sum(bad)), g[k], w[k])
    return None


def check_wcs(src_hdr, out_path, nx, ny):
    """World coordinates of a pixel grid from the input (first two axes) and
    from skyfind's 2-D copy must agree."""
    with fits.open(out_path) as hl:
        out_hdr = hl[0].header
        if hl[0].data.shape != (ny, nx):
            return "written image has shape %r" % (hl[0].data.shape,)
    try:
        w_in = WCS(src_hdr, naxis=2)
    except Exception:  # noqa: BLE001 - the input's own WCS is unusable: nothing to compare
        return None
    if not w_in.has_celestial:
        return None
    w_out = WCS(out_hdr, naxis=2)
    xs, ys = np.meshgrid(np.linspace(0, nx - 1, 5), np.linspace(0, ny - 1, 5))
    a = np.array(w_in.wcs_pix2world(xs.ravel(), ys.ravel(), 0))
    b = np.array(w_out.wcs_pix2world(xs.ravel(), ys.ravel(), 0))
    if not np.allclose(a, b, rtol=0, atol=1e-9, equal_nan=True):
        return "WCS of the written copy differs by %g deg" % float(np.nanmax(np.abs(a - b)))
    return None


def check_file(name, inv, tmp):
    path = os.path.join(DATA, name)
    found = first_image(path)
    raw = os.path.join(tmp, "plane.raw")
    if found is None or found[1].ndim < 2:
        r = run_tool(path, 0, raw)
        if r.returncode == 0:
            return "no 2-D image in the file, yet sf_fitsdump succeeded"
        if name not in r.stderr:
            return "error message does not name the file: %s" % r.stderr.strip()
        return "ok (rejected: %s)" % r.stderr.strip().split(": ", 2)[-1]
    hdu, data, hdr = found
    bitpix = hdr.get("ZBITPIX", hdr["BITPIX"])
    scaled = bitpix > 0 and (hdr.get("BSCALE", 1.0) != 1.0 or hdr.get("BZERO", 0.0) != 0.0)
    planes = expected_planes(data, hdr)
    ny, nx = planes.shape[1:]
    total = 0
    for p in range(planes.shape[0]):
        r = run_tool(path, p, raw)
        if r.returncode != 0:
            return "plane %d: sf_fitsdump failed: %s" % (p, r.stderr.strip())
        snx, sny, snan = (int(v) for v in r.stdout.split())
        if (snx, sny) != (nx, ny):
            return "plane %d: size %dx%d, astropy %dx%d" % (p, snx, sny, nx, ny)
        got = np.fromfile(raw, dtype="<f4").reshape(ny, nx)
        err = compare_plane(got, planes[p], scaled)
        if err:
            return "plane %d: %s" % (p, err)
        if snan != int(np.isnan(got).sum()):
            return "plane %d: reported %d NaN, raw has %d" % (p, snan, int(np.isnan(got).sum()))
        total += snan
    if name in inv and total != inv[name]:
        return "%d NaN, INVENTORY.md says %d" % (total, inv[name])
    out = os.path.join(tmp, "copy.fits")
    r = run_tool(path, 0, out)
    if r.returncode != 0:
        return "writing a 2-D copy failed: %s" % r.stderr.strip()
    err = check_wcs(hdr, out, nx, ny)
    if err:
        return err
    os.remove(out)
    return "ok (%dx%d, %d plane%s, %d NaN, %s)" % (
        nx, ny, planes.shape[0], "" if planes.shape[0] == 1 else "s", total,
        "scaled: rel 1e-6" if scaled else "exact")


def main():
    if not os.path.isfile(os.path.join(DATA, "INVENTORY.md")):
        print("SKIP: no test data in %s" % DATA)
        return 77
    if not os.access(TOOL, os.X_OK):
        print("SKIP: %s not built" % TOOL)
        return 77
    inv = inventory_nans()
    names = sorted(
        os.path.basename(p)
        for pat in ("*.fits", "*.fits.gz", "*.fits.fz")
        for p in glob.glob(os.path.join(DATA, pat)))
    names = [n for n in names if ".REF_" not in n and "TRUTH" not in n]
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="sf_fits_read.") as tmp:
        for name in names:
            try:
                msg = check_file(name, inv, tmp)
            except Exception as e:  # noqa: BLE001 - report and go on to the next file
                msg = "exception: %r" % (e,)
            ok = msg.startswith("ok")
            passed += ok
            failed += not ok
            print("%-60s %s" % (name, msg if ok else "FAIL: " + msg))
        # a table-only file and the 1-D quirk must be rejected by name
        for name in ("radio_parkes_1904-66_SIN.REF_aegean_comp.fits",):
            msg = check_file(name, inv, tmp)
            ok = msg.startswith("ok (rejected")
            passed += ok
            failed += not ok
            print("%-60s %s" % (name, msg if ok else "FAIL: " + msg))
    for name in inv:
        if name not in names:
            print("%-60s FAIL: listed in INVENTORY.md but missing" % name)
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
