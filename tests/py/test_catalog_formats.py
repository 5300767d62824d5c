#!/usr/bin/env python3
"""Catalogue formats (tests/sf_catwrite: CPU `radio` pipeline, then CSV, FITS
table, VOTable and ds9 regions from one column table): column names and units,
the same values in every format, region lines that parse with the right count
and coordinate system, and ra/dec equal to astropy.wcs on the centroids
(1e-8 deg). One image with a WCS (parkes 1904-66, SIN) and one without."""
import csv
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from astropy import log
from astropy.io import fits
from astropy.io.votable import parse_single_table
from astropy.table import Table
from astropy.wcs import WCS, FITSFixedWarning

log.setLevel("ERROR")
warnings.simplefilter("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SKYFIND_SOURCE", os.path.normpath(os.path.join(HERE, "..", "..")))
DATA = os.environ.get("SKYFIND_TEST_DATA") or os.path.join(SOURCE, "..", "shared", "data")
BUILD = os.environ.get("SKYFIND_BUILD", os.path.join(SOURCE, "build"))
TOOL = os.path.join(BUILD, "tests", "sf_catwrite")
PIX = ["id", "x", "y", "npix", "flux_sum", "peak", "peak_x", "peak_y"]
WORLD = ["ra", "dec", "peak_ra", "peak_dec"]
REGION = re.compile(r'^circle\(([-+0-9.eE]+),([-+0-9.eE]+),([0-9.eE]+)(")?\) # text=\{(\d+)\}$')

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def close(a, b, rtol=1e-11):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all((np.isnan(a) & np.isnan(b)) |
                                              np.isclose(a, b, rtol=rtol, atol=1e-9)))


def sep_deg(a, b):
    """Great-circle distance (deg) between (lon, lat) arrays a and b (haversine)."""
    l1, b1, l2, b2 = (np.radians(v) for v in (a[0], a[1], b[0], b[1]))
    h = np.sin((b2 - b1) / 2) ** 2 + np.cos(b1) * np.cos(b2) * np.sin((l2 - l1) / 2) ** 2
    return np.degrees(2 * np.arcsin(np.sqrt(np.minimum(h, 1.0))))


def one(image, has_wcs, tmp):
    name = os.path.basename(image)
    stem = os.path.join(tmp, name.split(".")[0])
    env = dict(os.environ, SKYFIND_PIPELINES=os.path.join(SOURCE, "pipelines"))
    r = subprocess.run([TOOL, image, stem], capture_output=True, text=True, env=env)
    check(r.returncode == 0, f"{name}: sf_catwrite failed: {r.stderr.strip()}")
    if r.returncode:
        return
    names = PIX + (WORLD if has_wcs else [])
    hdr = fits.getheader(image)
    bunit = hdr.get("BUNIT", "")

    with fits.open(stem + ".cat.fits") as hl:
        h = hl["CATALOG"].header
        check(any("1-based" in str(c) for c in h.get("COMMENT", [])),
              f"{name}: no pixel-convention COMMENT")
        check(h.get("TUCD1") == "meta.id;meta.main", f"{name}: TUCD1 = {h.get('TUCD1')}")
        check(all(f"TUCD{k + 1}" in h for k in range(len(names))), f"{name}: TUCDn missing")
    t = Table.read(stem + ".cat.fits", hdu="CATALOG")
    n = len(t)
    check(n > 0, f"{name}: empty catalogue")
    check(t.colnames == names, f"{name}: FITS columns {t.colnames}")
    units = {c: (str(t[c].unit) if t[c].unit is not None else "") for c in t.colnames}
    check(units["x"] == "pix" and units["npix"] == "pix", f"{name}: pixel units {units}")
    if bunit:
        check(t["flux_sum"].unit is not None and t["peak"].unit is not None,
              f"{name}: no flux unit (BUNIT {bunit})")
    if has_wcs:
        check(all(units[c] == "deg" for c in WORLD), f"{name}: world units {units}")

    v = parse_single_table(stem + ".cat.vot").to_table()
    check(v.colnames == names, f"{name}: VOTable columns {v.colnames}")
    check(len(v) == n, f"{name}: VOTable has {len(v)} rows, FITS {n}")
    for c in names:
        check(close(v[c], t[c]), f"{name}: VOTable column {c} differs from FITS")

    with open(stem + ".cat.csv") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    check(len(rows) == n, f"{name}: CSV has {len(rows)} rows, FITS {n}")
    check(rows and list(rows[0].keys()) == names, f"{name}: CSV header {list(rows[0].keys())}")
    for c in names:
        check(close([float(rw[c]) for rw in rows], t[c]), f"{name}: CSV column {c} differs")

    with open(stem + ".reg") as f:
        lines = f.read().splitlines()
    check(lines[0] == "# Region file format: DS9 version 4.1", f"{name}: region header")
    body = [ln for ln in lines if not ln.startswith("#") and not ln.startswith("global")]
    system = body[0]
    check(system == ("fk5" if has_wcs else "image"), f"{name}: region system {system}")
    shapes = [REGION.match(ln) for ln in body[1:]]
    check(all(shapes), f"{name}: unparsable region lines")
    good = np.isfinite(np.asarray(t["x"], float))
    check(len(shapes) == int(good.sum()), f"{name}: {len(shapes)} regions, {good.sum()} sources")
    if all(shapes) and len(shapes) == int(good.sum()):
        ids = [int(m.group(5)) for m in shapes]
        check(ids == list(t["id"][good]), f"{name}: region ids")
        check(all(bool(m.group(4)) == has_wcs for m in shapes), f"{name}: radius units")
        c1 = np.array([float(m.group(1)) for m in shapes])
        c2 = np.array([float(m.group(2)) for m in shapes])
        rad = np.array([float(m.group(3)) for m in shapes])
        rpix = np.sqrt(np.asarray(t["npix"][good], float) / math.pi)
        if has_wcs:
            check(close(c1, t["ra"][good], 1e-9) and close(c2, t["dec"][good], 1e-9),
                  f"{name}: region centres differ from ra/dec")
            w = WCS(hdr, naxis=[1, 2]).celestial
            x0, y0 = np.asarray(t["x"][good], float), np.asarray(t["y"][good], float)
            p0, px, py = (w.all_pix2world(x0 + dx, y0 + dy, 1) for dx, dy in
                          ((0, 0), (1, 0), (0, 1)))
            scale = np.sqrt(sep_deg(p0, px) * sep_deg(p0, py)) * 3600  # local, arcsec
            check(close(rad, rpix * scale, 1e-4), f"{name}: region radii {rad[:3]} vs "
                  f"{(rpix * scale)[:3]}")
        else:
            check(close(c1, t["x"][good], 1e-6) and close(rpix, rad, 1e-3),
                  f"{name}: region centres/radii")

    if has_wcs:
        w = WCS(hdr, naxis=[1, 2]).celestial
        for cx, cy, cl, cb in (("x", "y", "ra", "dec"), ("peak_x", "peak_y", "peak_ra", "peak_dec")):
            ref = w.all_pix2world(np.asarray(t[cx], float), np.asarray(t[cy], float), 1)
            dl = np.abs((np.asarray(t[cl]) - ref[0] + 180) % 360 - 180)
            db = np.abs(np.asarray(t[cb]) - ref[1])
            worst = max(np.nanmax(dl), np.nanmax(db))
            check(worst <= 1e-8, f"{name}: {cl},{cb} differ from astropy by {worst:.3g} deg")
            print(f"{name}: {n} sources, {cl}/{cb} worst {worst:.2g} deg")
    else:
        print(f"{name}: {n} sources, no WCS")


def main():
    if not os.path.exists(TOOL):
        print(f"no {TOOL}: build first")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        one(os.path.join(DATA, "radio_parkes_1904-66_SIN.fits"), True, tmp)
        one(os.path.join(DATA, "optical_eso_ntt_emmi_256x256_int16_bscale.fits"), False, tmp)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
