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
with a beam) and one without.

Then the component table of a pipeline with a fit stage (`skyfind run`, the
radio pipeline ending `measure` then `fit`, every format): the same columns
and values in CSV, FITS, VOTable, valid UCDs, the region file's ellipses
(maj/2, min/2) against the columns, ra/dec against astropy.wcs, the position
errors and the fitted and deconvolved sky shapes against astropy's Jacobian;
on a simulated image without distortion (skyfind simulate, SIN, 2" pixels,
128x128) maj_arcsec, min_arcsec, dmaj_arcsec, the errors in arcsec equal
the pixel values times the pixel size to 1e-6; and `--save residual,model`:
residual = image - model to float rounding, the input's WCS in both, the
model's sum the components' flux; without a fit stage, no such file and one
note."""
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
from astropy.io.votable import parse_single_table, ucd
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
    return cov_on_sky(jacobian_astropy(w, x, y), x2, y2, xy)


def cov_on_sky(J, xx, yy, xy):
    """A pixel-frame covariance [[xx, xy], [xy, yy]] through the Jacobian J
    (J00, J01, J10, J11; east and north per pixel): its axes (the square
    roots of the eigenvalues) and the major axis's position angle east of
    north in [0, 180)."""
    j00, j01, j10, j11 = J
    cee = j00 * j00 * xx + 2 * j00 * j01 * xy + j01 * j01 * yy
    cnn = j10 * j10 * xx + 2 * j10 * j11 * xy + j11 * j11 * yy
    cen = j00 * j10 * xx + (j00 * j11 + j01 * j10) * xy + j01 * j11 * yy
    q = np.sqrt((cee - cnn) ** 2 / 4 + cen * cen)
    a = np.sqrt((cee + cnn) / 2 + q)
    b = np.sqrt(np.maximum((cee + cnn) / 2 - q, 0))
    return a, b, np.mod(90 - np.degrees(np.arctan2(2 * cen, cee - cnn) / 2), 180)


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


# ---- the component table (a pipeline with a fit stage) ------------------------

SKYFIND = os.environ.get("SKYFIND") or os.path.join(BUILD, "skyfind")
COMP_PIX = ["island", "component", "ncomp", "source", "x", "y", "x_err", "y_err", "peak_flux",
            "peak_flux_err", "flux", "flux_err", "flux_jy", "flux_jy_err", "maj", "min", "pa",
            "maj_err", "min_err", "pa_err", "dmaj", "dmin", "dpa", "dmaj_err", "dmin_err",
            "local_rms", "bkg",
            "resid_rms", "chi2", "npix", "niter", "status", "flags", "sign"]
COMP_WORLD = ["{lon}", "{lat}", "{lon}_err_arcsec", "{lat}_err_arcsec", "maj_arcsec",
              "min_arcsec", "pa_deg", "maj_err_arcsec", "min_err_arcsec", "pa_err_deg",
              "dmaj_arcsec", "dmin_arcsec", "dpa_deg", "dmaj_err_arcsec", "dmin_err_arcsec"]
COMP_UNITS = dict({c: "" for c in ("island", "component", "ncomp", "source", "chi2", "niter",
                                   "status", "flags", "sign")},
                  **{c: "pix" for c in ("x", "y", "x_err", "y_err", "maj", "min", "maj_err",
                                        "min_err", "dmaj", "dmin", "dmaj_err", "dmin_err",
                                        "npix")},
                  **{c: B for c in ("peak_flux", "peak_flux_err", "flux", "flux_err", "local_rms",
                                    "bkg", "resid_rms")},
                  **{c: "deg" for c in ("pa", "pa_err", "dpa", "{lon}", "{lat}", "pa_deg",
                                        "pa_err_deg", "dpa_deg")},
                  flux_jy="Jy", flux_jy_err="Jy",
                  **{c: "arcsec" for c in COMP_WORLD if c.endswith("_arcsec")})
COMP_ELLIPSE = re.compile(r"^ellipse\(([^()]*)\) # text=\{(-?\d+)\.(\d+)\}$")


def run_skyfind(args):
    env = dict(os.environ, SKYFIND_PIPELINES=os.path.join(SOURCE, "pipelines"))
    return subprocess.run([SKYFIND] + args, capture_output=True, text=True, env=env)


def has_fit_stage():
    r = run_skyfind(["stages"])
    return r.returncode == 0 and re.search(r"^fit\b", r.stdout, re.M) is not None


def pipe_files(tmp):
    """The radio pipeline with a fit stage after measure (pipelines/radio.pipe
    as it is when it has one), and without one."""
    with open(os.path.join(SOURCE, "pipelines", "radio.pipe")) as f:
        steps = [ln for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    nofit = [ln for ln in steps if ln.split()[0] != "fit"]
    with_fit, without = os.path.join(tmp, "radiofit.pipe"), os.path.join(tmp, "radionofit.pipe")
    with open(with_fit, "w") as f:
        f.writelines(nofit + ["fit\n"])
    with open(without, "w") as f:
        f.writelines(nofit)
    return with_fit, without


def read_csv_table(path):
    with open(path) as f:
        rows = list(csv.reader(line for line in f if not line.startswith("#")))
    return rows[0], {k: np.array([float(r[i]) for r in rows[1:]]) for i, k in enumerate(rows[0])}


def jacobian_astropy(w, x, y):
    """d(east, north)/d(x, y) in arcsec per pixel at 0-based (x, y): central
    differences of half a pixel, offsets as direction cosines about the
    point (computed with astropy.wcs, independently of skyfind)."""
    l0, b0 = w.all_pix2world(x, y, 0)
    r0, d0 = np.radians(l0), np.radians(b0)

    def en(dx, dy):
        lo, la = w.all_pix2world(x + dx, y + dy, 0)
        lo, la = np.radians(lo), np.radians(la)
        e = np.cos(la) * np.sin(lo - r0)
        n = np.sin(la) * np.cos(d0) - np.cos(la) * np.sin(d0) * np.cos(lo - r0)
        return np.degrees(e) * 3600, np.degrees(n) * 3600
    (ex1, nx1), (ex0, nx0), (ey1, ny1), (ey0, ny0) = en(.5, 0), en(-.5, 0), en(0, .5), en(0, -.5)
    return ex1 - ex0, ey1 - ey0, nx1 - nx0, ny1 - ny0  # J00, J01, J10, J11


def fwhm_on_sky(J, maj, mn, pa):
    """The FWHM matrix of (maj, min, pa from +x) through J: axes and the
    position angle east of north in [0, 180)."""
    c, s = np.cos(np.radians(pa)), np.sin(np.radians(pa))
    xx, yy, xy = maj**2 * c * c + mn**2 * s * s, maj**2 * s * s + mn**2 * c * c, (maj**2 - mn**2) * s * c
    return cov_on_sky(J, xx, yy, xy)


def angle_diff(a, b, period=180.0):
    return np.abs((np.asarray(a, float) - np.asarray(b, float) + period / 2) % period - period / 2)


def components(image, stem_dir, pipe, has_wcs, label, extra=()):
    """Run the fit pipeline on image (every format) and check the component
    table; returns the FITS table (or None)."""
    name = label
    r = run_skyfind(["run", "-q", "-b", "cpu", "-p", pipe, "-o", stem_dir, "--format",
                     "csv,fits,votable,reg", *extra, image])
    check(r.returncode == 0, f"{name}: skyfind run failed: {r.stderr.strip()}")
    if r.returncode:
        return None
    base = os.path.join(stem_dir, os.path.basename(image).split(".")[0])
    for suf in (".comp.csv", ".comp.fits", ".comp.vot", ".comp.reg", ".cat.csv"):
        check(os.path.exists(base + suf), f"{name}: no {base + suf}")
    hdr = fits.getheader(image)
    bunit = hdr.get("BUNIT", "")
    w = WCS(hdr, naxis=[1, 2]).celestial if has_wcs else None
    lon, lat = ("ra", "dec") if has_wcs else (None, None)
    world = [c.format(lon=lon, lat=lat) for c in COMP_WORLD] if has_wcs else []
    names = COMP_PIX + world
    units = {c.format(lon=lon, lat=lat): u for c, u in COMP_UNITS.items()}
    want_units = {c: (bunit if units[c] == B else units[c]) for c in names}

    with fits.open(base + ".comp.fits") as hl:
        h = hl["COMPONENTS"].header
        check(h.get("NCOMPS") == h["NAXIS2"], f"{name}: NCOMPS {h.get('NCOMPS')} rows {h['NAXIS2']}")
        tunit = {h[f"TTYPE{k + 1}"]: h.get(f"TUNIT{k + 1}", "") for k in range(h["TFIELDS"])}
        tucd = [h.get(f"TUCD{k + 1}") for k in range(h["TFIELDS"])]
        check(all(f"TCOMM{k + 1}" in h for k in range(h["TFIELDS"])), f"{name}: TCOMMn missing")
        check(any("Condon" in str(c) for c in h.get("COMMENT", [])), f"{name}: no Condon COMMENT")
    check(tunit == want_units, f"{name}: component TUNITn {tunit} want {want_units}")
    bad = [u for u in tucd if not ucd.check_ucd(u, check_controlled_vocabulary=True)]
    check(not bad, f"{name}: invalid UCDs {bad}")
    t = Table.read(base + ".comp.fits", hdu="COMPONENTS")
    n = len(t)
    check(t.colnames == names, f"{name}: component FITS columns {t.colnames}")
    check(n > 0, f"{name}: no components")

    vt = parse_single_table(base + ".comp.vot")
    v = vt.to_table()
    check(vt.name == "COMPONENTS", f"{name}: VOTable name {vt.name}")
    check(v.colnames == names, f"{name}: component VOTable columns {v.colnames}")
    check([f.ucd for f in vt.fields] == tucd, f"{name}: VOTable UCDs differ from TUCDn")
    check(len(v) == n, f"{name}: VOTable has {len(v)} rows, FITS {n}")
    head, cs = read_csv_table(base + ".comp.csv")
    check(head == names, f"{name}: component CSV header {head}")
    cu = csv_units(base + ".comp.csv")
    want_csv = {c: (want_units[c] or ("image units" if units[c] == B else "none")) for c in names}
    check(cu == want_csv, f"{name}: component CSV units line {cu} want {want_csv}")
    with open(base + ".comp.csv") as f:
        top = [ln for ln in f if ln.startswith("#")]
    check(top and "Gaussian component catalogue" in top[0] and f": {n} components" in top[0],
          f"{name}: CSV first line {top[:1]}")
    for word in ("Condon (1997)", "# status: 0 converged", "# flags: 1 island", "32 unresolved",
                 "64 a parameter at its bound", "128 more components"):
        check(any(word in ln for ln in top), f"{name}: CSV comments lack {word!r}")
    for c in names:
        check(c in cs and close(cs[c], t[c], 1e-9), f"{name}: component CSV column {c} differs from FITS")
        check(close(v[c], t[c], 1e-9), f"{name}: component VOTable column {c} differs from FITS")

    # the rows: components 1..ncomp of each island, sources of the island table
    isl, comp, ncomp = (np.asarray(t[k], int) for k in ("island", "component", "ncomp"))
    keys = list(zip(isl, comp))
    check(len(set(keys)) == n, f"{name}: (island, component) not unique")
    ok = all(sorted(comp[isl == i]) == list(range(1, ncomp[isl == i][0] + 1)) and
             np.all(ncomp[isl == i] == ncomp[isl == i][0]) for i in set(isl))
    check(ok, f"{name}: components are not 1..ncomp in every island")
    _, cat = read_csv_table(base + ".cat.csv")
    check(set(np.asarray(t["source"], int)) <= set(cat["id"].astype(int)),
          f"{name}: source ids not in the island table")
    check(np.all((np.asarray(t["sign"]) == -1) == (isl < 0)), f"{name}: sign and island sign disagree")
    check(np.all(np.isin(np.asarray(t["status"]), [0, 1, 2, 3])), f"{name}: status outside 0..3")
    check(np.all(np.asarray(t["flags"]) & ~(31 | 32 | 64 | 128) == 0), f"{name}: unknown flag bits")
    fin = np.isfinite(np.asarray(t["maj"], float))
    check(np.all(t["maj"][fin] >= t["min"][fin]), f"{name}: maj < min")
    with np.errstate(invalid="ignore", divide="ignore"):
        area_isl = np.asarray(cat["flux_sum"]) / np.asarray(cat["flux_jy"])
        area = np.asarray(t["flux"], float) / np.asarray(t["flux_jy"], float)
    if np.any(np.isfinite(area_isl)) and has_wcs and "BMAJ" in hdr:
        # the beam's solid angle over the pixel's at each component (astropy's
        # Jacobian), not the island table's central beam area
        x0, y0 = np.asarray(t["x"], float) - 1, np.asarray(t["y"], float) - 1
        J = jacobian_astropy(w, x0, y0)
        omega = np.pi / (4 * np.log(2)) * hdr["BMAJ"] * hdr["BMIN"] * 3600.0 ** 2
        a_loc = omega / np.abs(J[0] * J[3] - J[1] * J[2])
        check(close(t["flux_jy"], np.asarray(t["flux"]) / a_loc, 1e-6) and
              close(t["flux_jy_err"], np.asarray(t["flux_err"]) / a_loc, 1e-6),
              f"{name}: flux_jy is not flux / the beam area in the pixels at the component")
    elif np.any(np.isfinite(area_isl)):
        a0 = area_isl[np.isfinite(area_isl)][0]
        check(close(t["flux_jy"], np.asarray(t["flux"]) / a0, 1e-9) and
              close(t["flux_jy_err"], np.asarray(t["flux_err"]) / a0, 1e-9),
              f"{name}: flux_jy is not flux / {a0} (the island table's beam area)")
    else:
        check(np.all(np.isnan(area)), f"{name}: flux_jy without Jy/beam and a beam")

    # world coordinates, their errors and the sky shapes against astropy
    if has_wcs:
        x0, y0 = np.asarray(t["x"], float) - 1, np.asarray(t["y"], float) - 1
        ref = w.all_pix2world(x0, y0, 0)
        worst = max(np.nanmax(angle_diff(t["ra"], ref[0], 360)), np.nanmax(np.abs(t["dec"] - ref[1])))
        check(worst <= 1e-8, f"{name}: component ra,dec differ from astropy by {worst:.3g} deg")
        J = jacobian_astropy(w, x0, y0)
        xe, ye = np.asarray(t["x_err"], float), np.asarray(t["y_err"], float)
        check(close(t["ra_err_arcsec"], np.hypot(J[0] * xe, J[1] * ye), 1e-6) and
              close(t["dec_err_arcsec"], np.hypot(J[2] * xe, J[3] * ye), 1e-6),
              f"{name}: ra_err_arcsec/dec_err_arcsec differ from x_err, y_err through the Jacobian")
        maj, mn, pa = (np.asarray(t[k], float) for k in ("maj", "min", "pa"))
        a_as, b_as, pa_as = fwhm_on_sky(J, maj, mn, pa)
        check(close(t["maj_arcsec"], a_as, 1e-6) and close(t["min_arcsec"], b_as, 1e-6),
              f"{name}: maj_arcsec/min_arcsec differ from astropy's Jacobian")
        shaped = np.isfinite(pa_as) & (maj - mn > 1e-6 * maj)
        d = angle_diff(t["pa_deg"][shaped], pa_as[shaped])
        check(d.size == 0 or d.max() < 1e-4, f"{name}: pa_deg differs from astropy by {d.max()}")
        pd = np.asarray(t["pa_deg"], float)
        check(np.all((pd[fin] >= 0) & (pd[fin] < 180)), f"{name}: pa_deg outside [0, 180)")
        check(close(t["pa_err_deg"], t["pa_err"], 1e-12), f"{name}: pa_err_deg is not pa_err")
        c_, s_ = np.cos(np.radians(pa)), np.sin(np.radians(pa))
        smaj, smin = np.hypot(J[0] * c_ + J[1] * s_, J[2] * c_ + J[3] * s_), np.hypot(-J[0] * s_ + J[1] * c_, -J[2] * s_ + J[3] * c_)
        check(close(t["maj_err_arcsec"], np.asarray(t["maj_err"]) * smaj, 1e-6) and
              close(t["min_err_arcsec"], np.asarray(t["min_err"]) * smin, 1e-6),
              f"{name}: maj_err_arcsec/min_err_arcsec are not the errors times the scale along the axis")
        dmaj, dmin, dpa = (np.asarray(t[k], float) for k in ("dmaj", "dmin", "dpa"))
        da, db, _ = fwhm_on_sky(J, dmaj, dmin, dpa)
        for col, pix, sky in (("dmaj_arcsec", dmaj, da), ("dmin_arcsec", dmin, db)):
            got = np.asarray(t[col], float)
            check(np.array_equal(np.isnan(got), np.isnan(pix)), f"{name}: {col} NaN where {col[:4]} is not")
            check(np.all(got[pix == 0] == 0), f"{name}: {col} not 0 where the pixel size is 0")
            pos = pix > 0
            check(close(got[pos], sky[pos], 1e-6), f"{name}: {col} differs from astropy's Jacobian")
        print(f"{name}: {n} components, ra/dec worst {worst:.2g} deg, "
              f"{int(np.sum(dmin == 0))} with dmin 0, {int(np.sum(np.isnan(dmaj)))} dmaj nan")
    else:
        print(f"{name}: {n} components, no WCS")

    # ds9 regions: one ellipse per component with a shape, matching the columns
    system, reg, errors = parse_comp_region(base + ".comp.reg", has_wcs)
    check(not errors, f"{name}: component region file: {errors[:3]}")
    fr = str(hdr.get("RADESYS", "fk5")).strip().lower() if has_wcs else "image"
    check(system == fr, f"{name}: component region system {system}, want {fr}")
    if has_wcs:
        sel = np.isfinite(np.asarray(t["maj_arcsec"], float)) & (np.asarray(t["min_arcsec"]) > 0)
        want = [((int(t["island"][k]), int(t["component"][k])), t["ra"][k], t["dec"][k],
                 t["maj_arcsec"][k] / 2, t["min_arcsec"][k] / 2, (t["pa_deg"][k] + 90) % 360)
                for k in range(n) if sel[k]]
    else:
        sel = fin & (np.asarray(t["min"]) > 0)
        want = [((int(t["island"][k]), int(t["component"][k])), t["x"][k], t["y"][k],
                 t["maj"][k] / 2, t["min"][k] / 2, t["pa"][k]) for k in range(n) if sel[k]]
    check(len(reg) == len(want), f"{name}: {len(reg)} ellipses, {len(want)} components with a shape")
    if len(reg) == len(want) and reg:
        check([g[0] for g in reg] == [q[0] for q in want], f"{name}: component region labels")
        got_a, want_a = np.array([g[1:] for g in reg]), np.array([q[1:] for q in want])
        check(np.allclose(got_a[:, :2], want_a[:, :2], rtol=0, atol=1e-8 if has_wcs else 1e-7),
              f"{name}: component region centres")
        check(np.allclose(got_a[:, 2:4], want_a[:, 2:4], rtol=1e-6, atol=1e-6),
              f"{name}: component region radii")
        check(angle_diff(got_a[:, 4], want_a[:, 4], 360).max() < 1e-5, f"{name}: component region angles")
    return t


def parse_comp_region(path, sky):
    """The component region file: as parse_region, labels ISLAND.COMPONENT,
    comment lines for components without a shape."""
    errors, rows, system = [], [], None
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0] != "# Region file format: DS9 version 4.1":
        errors.append("no DS9 version 4.1 header")
    for no, ln in enumerate(lines[1:], 2):
        if ln.startswith("#"):
            continue
        if ln.startswith("global "):
            continue
        if system is None:
            system = ln
            continue
        m = COMP_ELLIPSE.match(ln)
        args = m.group(1).split(",") if m else []
        unit = '"' if sky else ""
        pats = [NUM, NUM, NUM + re.escape(unit), NUM + re.escape(unit), NUM]
        if len(args) != 5 or not all(re.fullmatch(pt, a) for pt, a in zip(pats, args)):
            errors.append(f"line {no}: not an ellipse line: {ln!r}")
            continue
        rows.append(((int(m.group(2)), int(m.group(3))), *[float(a.rstrip('"')) for a in args]))
    return system, rows, errors


def check_images(image, out, t, name):
    """--save residual,model: residual = image - model (float32), the
    input's WCS in both; the model holds the components' flux."""
    base = os.path.join(out, os.path.basename(image).split(".")[0])
    if not (os.path.exists(base + ".model.fits") and os.path.exists(base + ".residual.fits")):
        check(False, f"{name}: no model/residual images")
        return
    hin = fits.getheader(image)
    img = np.squeeze(fits.getdata(image)).astype(np.float32)
    with fits.open(base + ".model.fits") as hm, fits.open(base + ".residual.fits") as hr:
        model, resid = np.squeeze(hm[0].data), np.squeeze(hr[0].data)
        check(hm[0].header["BITPIX"] == -32 and hr[0].header["BITPIX"] == -32, f"{name}: not float32")
        for h, what in ((hm[0].header, "model"), (hr[0].header, "residual")):
            win, wout = WCS(hin, naxis=[1, 2]).celestial, WCS(h, naxis=[1, 2]).celestial
            check(win.to_header() == wout.to_header(), f"{name}: the {what} image's WCS differs from the input's")
            check(h.get("BUNIT") == hin.get("BUNIT"), f"{name}: the {what} image's BUNIT")
            for k in ("BMAJ", "BMIN", "BPA"):
                check(h.get(k) == hin.get(k), f"{name}: the {what} image's {k}")
    check(model.shape == img.shape and resid.shape == img.shape, f"{name}: image shapes")
    if model.shape != img.shape or resid.shape != img.shape:
        return
    good = np.isfinite(img)
    check(np.all(np.isnan(resid[~good])), f"{name}: residual not NaN where the image is")
    want = img.astype(np.float64) - model
    err = np.abs(resid[good] - want[good])
    tol = 4 * np.finfo(np.float32).eps * (np.abs(img[good]) + np.abs(model[good])) + 1e-37
    check(np.all(err <= tol), f"{name}: residual != image - model (worst {err.max():.3g})")
    check(np.all(np.isfinite(model)) and np.any(model != 0), f"{name}: model empty or not finite")
    # flux is negative for the inverted image's components, as their model; a
    # Gaussian is rendered out to 1e-7 of its peak, and those at the border lose a part
    fl = np.asarray(t["flux"], float)
    fl = fl[np.isfinite(fl) & (np.asarray(t["status"]) <= 1)]  # skipped and failed: not drawn
    flux = float(fl.sum())
    check(abs(model.sum() - flux) <= 0.1 * np.abs(fl).sum(),
          f"{name}: model sum {model.sum():.6g}, components' flux {flux:.6g}")
    neg = np.asarray(t["sign"]) < 0
    if np.any(neg):
        x, y = (np.rint(np.asarray(t[k], float)[neg]).astype(int) - 1 for k in ("x", "y"))
        check(np.all(model[y, x] < 0), f"{name}: the model is not negative at negative components")
    print(f"{name}: residual = image - model, worst {err.max():.3g}; model sum {model.sum():.6g}, "
          f"flux {flux:.6g}")


def component_tests(tmp):
    if not os.path.exists(SKYFIND):
        check(False, f"no {SKYFIND}")
        return
    if not has_fit_stage():
        print("SKIP: this skyfind has no fit stage: component table not checked")
        return
    with_fit, without = pipe_files(tmp)
    parkes = os.path.join(DATA, "radio_parkes_1904-66_SIN.fits")
    optical = os.path.join(DATA, "optical_eso_ntt_emmi_256x256_int16_bscale.fits")

    out = os.path.join(tmp, "comp_parkes")
    t = components(parkes, out, with_fit, True, "parkes components",
                   ("--save", "residual,model"))
    if t is not None:
        check_images(parkes, out, t, "parkes components")
    out = os.path.join(tmp, "comp_both")
    t = components(parkes, out, with_fit, True, "parkes sign=both components",
                   ("--set", "threshold.sign=both", "--save", "residual,model"))
    if t is not None:
        check(np.any(np.asarray(t["sign"]) < 0), "parkes sign=both: no negative component")
        check_images(parkes, out, t, "parkes sign=both components")
    out = os.path.join(tmp, "comp_optical")
    t = components(optical, out, with_fit, False, "eso components", ("--save", "residual,model"))
    if t is not None:
        check_images(optical, out, t, "eso components")

    # a simulated image without distortion: the sky sizes are the pixel sizes times 2"
    sim = os.path.join(tmp, "sim.fits")
    r = run_skyfind(["simulate", "-n", "128", "-o", sim, "--seed", "5", "--nsrc", "15", "-q"])
    check(r.returncode == 0, f"simulate failed: {r.stderr.strip()}")
    if r.returncode == 0:
        out = os.path.join(tmp, "comp_sim")
        t = components(sim, out, with_fit, True, "simulated components", ("--save", "residual,model"))
        if t is not None:
            h = fits.getheader(sim)
            scale = abs(h["CDELT2"]) * 3600
            check(math.isclose(abs(h["CDELT1"]) * 3600, scale, rel_tol=1e-12), "simulated pixels not square")
            for sky, pix in (("maj_arcsec", "maj"), ("min_arcsec", "min"), ("dmaj_arcsec", "dmaj"),
                             ("dmin_arcsec", "dmin"), ("maj_err_arcsec", "maj_err"),
                             ("min_err_arcsec", "min_err")):
                p = np.asarray(t[pix], float)
                rel = np.abs(np.asarray(t[sky], float) - p * scale) / np.maximum(p * scale, 1e-300)
                sel = np.isfinite(p) & (p > 0)
                check(np.any(sel) or sky.startswith("d"), f"simulated: no finite {pix}")
                check(rel[sel].size == 0 or rel[sel].max() <= 1e-6,
                      f"simulated: {sky} != {pix} x {scale}\" (worst relative {rel[sel].max():.3g})")
            e = np.hypot(np.asarray(t["x_err"], float), np.asarray(t["y_err"], float)) * scale
            se = np.hypot(np.asarray(t["ra_err_arcsec"], float), np.asarray(t["dec_err_arcsec"], float))
            sel = np.isfinite(e)
            check(close(se[sel], e[sel], 1e-6), "simulated: position errors in arcsec != pixels x scale")
            # east is -x and north +y: pa_deg = pa + 90 up to the meridians' convergence
            d = angle_diff(t["pa_deg"], np.asarray(t["pa"], float) + 90)
            check(np.nanmax(d) < 0.05, f"simulated: pa_deg is not pa + 90 (worst {np.nanmax(d):.3g} deg)")
            print(f"simulated: {len(t)} components, sky sizes = pixel sizes x {scale:.6g}\"")
            check_images(sim, out, t, "simulated components")

    # without a fit stage: --save residual,model writes nothing and says so once
    out = os.path.join(tmp, "nofit")
    r = run_skyfind(["run", "-b", "cpu", "-p", without, "-o", out, "--save", "residual,model",
                     "--format", "csv,reg", parkes, optical])
    check(r.returncode == 0, f"no fit stage: run failed: {r.stderr.strip()}")
    files = os.listdir(out) if os.path.isdir(out) else []
    check(not any(".model." in f or ".residual." in f or ".comp." in f for f in files),
          f"no fit stage: wrote {files}")
    notes = [ln for ln in r.stderr.splitlines() if "no fit stage" in ln]
    check(len(notes) == 1, f"no fit stage: {len(notes)} notes on stderr: {r.stderr!r}")


def main():
    if not os.path.exists(TOOL):
        print(f"no {TOOL}: build first")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        one(os.path.join(DATA, "radio_parkes_1904-66_SIN.fits"), True, tmp)
        one(os.path.join(DATA, "optical_eso_ntt_emmi_256x256_int16_bscale.fits"), False, tmp)
        component_tests(tmp)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
