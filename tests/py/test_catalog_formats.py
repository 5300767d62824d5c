#!/usr/bin/env python3
"""Catalogue formats (tests/sf_catwrite: CPU `radio` pipeline, then CSV, FITS
table, VOTable and ds9 regions from one column table): every documented
column with its unit (FITS TUNITn, read back by astropy; the CSV units line),
the same values in every format, flux_jy = flux_sum / beam area, the sky
shape (a_arcsec, b_arcsec, pa_deg) against astropy.wcs's Jacobian, a ds9
region file that a strict parser accepts (header, one global line, the
coordinate system, ellipse lines of five numbers with the right units) and
whose ellipses match the columns, and ra/dec equal to astropy.wcs on the
centroids (1e-8 deg). One image with a WCS (parkes 1904-66, SIN, Jy/beam
with a beam) and one without."""
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
from astropy import units
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
PIX = ["id", "x", "y", "npix", "flux_sum", "peak", "peak_x", "peak_y", "x_err", "y_err",
       "flux_err", "flux_jy", "flux_jy_err", "snr", "bkg", "rms", "x2", "y2", "xy", "a", "b",
       "theta", "xmin", "xmax", "ymin", "ymax", "npeaks", "parent", "nchildren", "flags", "sign"]
WORLD = ["ra", "dec", "peak_ra", "peak_dec", "a_arcsec", "b_arcsec", "pa_deg"]
B = "\x01"  # the image's BUNIT
UNITS = {"id": "", "x": "pix", "y": "pix", "npix": "pix", "flux_sum": B, "peak": B,
         "peak_x": "pix", "peak_y": "pix", "x_err": "pix", "y_err": "pix", "flux_err": B,
         "flux_jy": "Jy", "flux_jy_err": "Jy", "snr": "", "bkg": B, "rms": B, "x2": "pix2",
         "y2": "pix2", "xy": "pix2", "a": "pix", "b": "pix", "theta": "deg", "xmin": "pix",
         "xmax": "pix", "ymin": "pix", "ymax": "pix", "npeaks": "", "parent": "", "nchildren": "", "flags": "", "sign": "", "ra": "deg",
         "dec": "deg", "peak_ra": "deg", "peak_dec": "deg", "a_arcsec": "arcsec",
         "b_arcsec": "arcsec", "pa_deg": "deg"}
HWHM = math.sqrt(2 * math.log(2))
NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
ELLIPSE = re.compile(r"^ellipse\(([^()]*)\) # text=\{(\d+)\}$")

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


def parse_region(path, sky):
    """A strict reader of the ds9 region file skyfind writes: the version
    header, comments, one global line, the coordinate system, then only
    `ellipse(x,y,r1,r2,angle) # text={id}` lines with five numbers (radii in
    arcsec with a trailing " on the sky). Returns (system, rows, errors)."""
    errors, rows, system = [], [], None
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0] != "# Region file format: DS9 version 4.1":
        errors.append("no DS9 version 4.1 header")
    nglobal = 0
    for no, ln in enumerate(lines[1:], 2):
        if ln.startswith("#"):
            continue
        if ln.startswith("global "):
            nglobal += 1
            if system is not None or not re.fullmatch(r"global( \w+=(\"[^\"]*\"|[\w.]+( [\d]+)*))+", ln):
                errors.append(f"line {no}: misplaced or malformed global line")
            continue
        if system is None:
            system = ln
            if ln not in ("fk5", "fk4", "icrs", "galactic", "ecliptic", "image"):
                errors.append(f"line {no}: unknown coordinate system {ln!r}")
            continue
        m = ELLIPSE.match(ln)
        if not m:
            errors.append(f"line {no}: not an ellipse line: {ln!r}")
            continue
        args = m.group(1).split(",")
        if len(args) != 5:
            errors.append(f"line {no}: {len(args)} arguments")
            continue
        unit = '"' if sky else ""
        pats = [NUM, NUM, NUM + re.escape(unit), NUM + re.escape(unit), NUM]
        if not all(re.fullmatch(pt, a) for pt, a in zip(pats, args)):
            errors.append(f"line {no}: bad numbers or units: {args}")
            continue
        v = [float(a.rstrip('"')) for a in args]
        if not (v[2] > 0 and v[3] > 0 and v[2] >= v[3] * (1 - 1e-6)):
            errors.append(f"line {no}: radii {v[2]}, {v[3]}")
        rows.append((int(m.group(2)), *v))
    if nglobal != 1:
        errors.append(f"{nglobal} global lines")
    return system, rows, errors


def csv_units(path):
    """The CSV's `# units: U: a, b; V: c` comment as {column: unit}."""
    with open(path) as f:
        for ln in f:
            if ln.startswith("# units:"):
                out = {}
                for group in ln[len("# units:"):].strip().split(";"):
                    unit, cols = group.split(":", 1)
                    for c in cols.split(","):
                        out[c.strip()] = unit.strip()
                return out
    return {}


def sky_shape_astropy(w, t):
    """a, b (arcsec) and pa (deg east of north, [0, 180)) from the moments
    through the Jacobian of astropy's pixel -> world at each centroid (the
    method measure.h documents, computed independently)."""
    x, y = np.asarray(t["x"], float) - 1, np.asarray(t["y"], float) - 1
    x2, y2, xy = (np.asarray(t[k], float) for k in ("x2", "y2", "xy"))
    sing = x2 * y2 - xy * xy < 0.00694
    x2, y2 = np.where(sing, x2 + 0.0833333, x2), np.where(sing, y2 + 0.0833333, y2)
    l0, b0 = w.all_pix2world(x, y, 0)
    r0, d0 = np.radians(l0), np.radians(b0)

    def en(dx, dy):
        lo, la = w.all_pix2world(x + dx, y + dy, 0)
        lo, la = np.radians(lo), np.radians(la)
        e = np.cos(la) * np.sin(lo - r0)
        n = np.sin(la) * np.cos(d0) - np.cos(la) * np.sin(d0) * np.cos(lo - r0)
        return np.degrees(e) * 3600, np.degrees(n) * 3600
    (ex1, nx1), (ex0, nx0), (ey1, ny1), (ey0, ny0) = en(.5, 0), en(-.5, 0), en(0, .5), en(0, -.5)
    j00, j10, j01, j11 = ex1 - ex0, nx1 - nx0, ey1 - ey0, ny1 - ny0
    cee = j00 * j00 * x2 + 2 * j00 * j01 * xy + j01 * j01 * y2
    cnn = j10 * j10 * x2 + 2 * j10 * j11 * xy + j11 * j11 * y2
    cen = j00 * j10 * x2 + (j00 * j11 + j01 * j10) * xy + j01 * j11 * y2
    q = np.sqrt((cee - cnn) ** 2 / 4 + cen * cen)
    a = np.sqrt((cee + cnn) / 2 + q)
    b = np.sqrt(np.maximum((cee + cnn) / 2 - q, 0))
    pa = np.mod(90 - np.degrees(np.arctan2(2 * cen, cee - cnn) / 2), 180)
    return a, b, pa


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

    # FITS: every documented column, with its TUNIT, TUCD and TCOMM
    with fits.open(stem + ".cat.fits") as hl:
        h = hl["CATALOG"].header
        check(any("1-based" in str(c) for c in h.get("COMMENT", [])),
              f"{name}: no pixel-convention COMMENT")
        check(h.get("TUCD1") == "meta.id;meta.main", f"{name}: TUCD1 = {h.get('TUCD1')}")
        check(all(f"TUCD{k + 1}" in h and f"TCOMM{k + 1}" in h for k in range(len(names))),
              f"{name}: TUCDn/TCOMMn missing")
        tunit = {h[f"TTYPE{k + 1}"]: h.get(f"TUNIT{k + 1}", "") for k in range(h["TFIELDS"])}
    want_units = {c: (bunit if UNITS[c] == B else UNITS[c]) for c in names}
    check(tunit == want_units, f"{name}: TUNITn {tunit} want {want_units}")
    t = Table.read(stem + ".cat.fits", hdu="CATALOG")
    n = len(t)
    check(n > 0, f"{name}: empty catalogue")
    check(t.colnames == names, f"{name}: FITS columns {t.colnames}")
    for c in names:  # astropy reads every unit (BUNIT may be a non-FITS spelling)
        u = t[c].unit
        check((u is None) == (want_units[c] == ""), f"{name}: astropy unit of {c}: {u!r}")
        if want_units[c] and want_units[c] != bunit:
            check(u == units.Unit(want_units[c], format="fits"), f"{name}: {c} unit {u}")

    v = parse_single_table(stem + ".cat.vot").to_table()
    check(v.colnames == names, f"{name}: VOTable columns {v.colnames}")
    check(len(v) == n, f"{name}: VOTable has {len(v)} rows, FITS {n}")
    for c in names:  # text: 10 significant digits at least
        check(close(v[c], t[c], 1e-9), f"{name}: VOTable column {c} differs from FITS")

    with open(stem + ".cat.csv") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    check(len(rows) == n, f"{name}: CSV has {len(rows)} rows, FITS {n}")
    check(rows and list(rows[0].keys()) == names, f"{name}: CSV header {list(rows[0].keys())}")
    for c in names:
        check(close([float(rw[c]) for rw in rows], t[c], 1e-9), f"{name}: CSV column {c} differs")
    cu = csv_units(stem + ".cat.csv")
    want_csv = {c: (want_units[c] or ("image units" if UNITS[c] == B else "none")) for c in names}
    check(cu == want_csv, f"{name}: CSV units line {cu} want {want_csv}")

    # the values: box inside the image and around the centroid, flags, a >= b
    good = np.isfinite(np.asarray(t["x"], float))
    for lo, c, hi in (("xmin", "x", "xmax"), ("ymin", "y", "ymax")):
        check(np.all((t[lo][good] <= t[c][good]) & (t[c][good] <= t[hi][good]) & (t[lo][good] >= 1)),
              f"{name}: {c} outside its box")
    check(np.all(np.asarray(t["flags"]) & ~31 == 0), f"{name}: unknown flag bits")
    shaped = good & np.isfinite(np.asarray(t["a"], float))
    check(np.all(t["a"][shaped] >= t["b"][shaped]), f"{name}: a < b")
    if bunit.replace(" ", "").lower() == "jy/beam" and "BMAJ" in hdr:
        w = WCS(hdr, naxis=[1, 2]).celestial
        ny, nx = hdr["NAXIS2"], hdr["NAXIS1"]
        cx, cy = (nx - 1) / 2, (ny - 1) / 2
        p0, px, py = (w.all_pix2world(np.array([cx + dx]), np.array([cy + dy]), 0) for dx, dy in
                      ((0, 0), (1, 0), (0, 1)))
        pix = float(np.sqrt(sep_deg(p0, px) * sep_deg(p0, py))[0])  # deg, at the centre
        area = math.pi / (4 * math.log(2)) * (hdr["BMAJ"] / pix) * (hdr["BMIN"] / pix)
        check(close(t["flux_jy"], np.asarray(t["flux_sum"]) / area, 1e-9) and
              close(t["flux_jy_err"], np.asarray(t["flux_err"]) / area, 1e-9),
              f"{name}: flux_jy is not flux_sum / {area:.6g} (beam area in pixels)")
        print(f"{name}: beam area {area:.4f} pixels")
    else:
        check(np.all(np.isnan(np.asarray(t["flux_jy"], float))), f"{name}: flux_jy without Jy/beam")

    # ds9 regions: strictly parsed, ellipses that match the columns
    system, reg, errors = parse_region(stem + ".reg", has_wcs)
    check(not errors, f"{name}: region file: {errors[:3]}")
    check(system == ("fk5" if has_wcs else "image"), f"{name}: region system {system}")
    if has_wcs:
        w = WCS(hdr, naxis=[1, 2]).celestial
        a_as, b_as, pa = sky_shape_astropy(w, t)
        sel = shaped & np.isfinite(a_as)
        check(close(t["a_arcsec"][sel], a_as[sel], 1e-6) and close(t["b_arcsec"][sel], b_as[sel], 1e-6),
              f"{name}: a_arcsec/b_arcsec differ from astropy's Jacobian")
        dpa = np.abs((np.asarray(t["pa_deg"])[sel] - pa[sel] + 90) % 180 - 90)
        check(dpa.size == 0 or dpa.max() < 1e-4, f"{name}: pa_deg differs from astropy by {dpa.max()}")
        check(np.all((np.asarray(t["pa_deg"])[sel] >= 0) & (np.asarray(t["pa_deg"])[sel] < 180)),
              f"{name}: pa_deg outside [0, 180)")
        want = [(int(i), t["ra"][k], t["dec"][k], HWHM * t["a_arcsec"][k], HWHM * t["b_arcsec"][k],
                 (t["pa_deg"][k] + 90) % 360) for k, i in enumerate(t["id"]) if sel[k]]
    else:
        want = [(int(i), t["x"][k], t["y"][k], HWHM * t["a"][k], HWHM * t["b"][k], t["theta"][k])
                for k, i in enumerate(t["id"]) if shaped[k]]
    check(len(reg) == len(want), f"{name}: {len(reg)} ellipses, {len(want)} sources with a shape")
    if len(reg) == len(want) and reg:
        check([r_[0] for r_ in reg] == [w_[0] for w_ in want], f"{name}: region ids")
        got_a, want_a = np.array([r_[1:] for r_ in reg]), np.array([w_[1:] for w_ in want])
        check(np.allclose(got_a[:, :2], want_a[:, :2], rtol=0, atol=1e-8 if has_wcs else 1e-7),
              f"{name}: region centres")
        check(np.allclose(got_a[:, 2:4], want_a[:, 2:4], rtol=1e-5, atol=1e-6), f"{name}: region radii")
        dang = np.abs((got_a[:, 4] - want_a[:, 4] + 180) % 360 - 180)
        check(dang.max() < 1e-5, f"{name}: region angles differ by {dang.max()}")

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
