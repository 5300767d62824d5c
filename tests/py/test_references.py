#!/usr/bin/env python3
"""skyfind's catalogues against the reference catalogues of other source
finders in SKYFIND_TEST_DATA (see INVENTORY.md there), each with a stated
tolerance:

 (a) Parkes 1904-66 (radio.pipe) against Aegean's 51 components,
 (b) Aegean's synthetic image (radio.pipe) against its 102 true sources,
 (c) AMI-LA GRB120422A (radio.pipe) against PySE's 5-sigma source,
 (d) ESO NTT/EMMI (sextractor.pipe) against SExtractor's 65 objects.

Every tolerance below was chosen from the values measured with skyfind 0.1.0
(CPU backend, November 2026; quoted beside it), with a margin meant to absorb
harmless changes (a different rounding, one source more or less near the
threshold) but not a real change of behaviour. A change of the shipped
pipelines (radio.pipe, sextractor.pipe) moves these numbers: measure again
and update the quoted values with the tolerances.

Known skyfind bugs are listed in KNOWN_BUGS: their checks print XFAIL and do
not fail the test, but an XPASS (the bug is gone) fails it, so that the entry
is removed and the check becomes an ordinary one."""
import csv
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from astropy import log
from astropy.io import fits
from astropy.table import Table
from astropy.wcs import WCS, FITSFixedWarning
from scipy import ndimage as ndi

log.setLevel("ERROR")
warnings.simplefilter("ignore", FITSFixedWarning)
warnings.simplefilter("ignore", fits.verify.VerifyWarning)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SKYFIND_SOURCE", os.path.normpath(os.path.join(HERE, "..", "..")))
DATA = os.environ.get("SKYFIND_TEST_DATA") or os.path.join(SOURCE, "..", "shared", "data")
SKYFIND = os.environ.get("SKYFIND", os.path.join(SOURCE, "build", "skyfind"))
PIPES = os.path.join(SOURCE, "pipelines")

# ---- tolerances (measured values in the comments) ---------------------------
# (a) Parkes 1904-66 vs Aegean (seedclip 5, floodclip 4, Gaussian fits).
#     radio.pipe (convolve kernel=auto: the beam filter would change a point
#     source's SNR by x0.60 on this beam-correlated noise, so it does not
#     filter; islands deblended; background and noise as BANE's) finds 48
#     objects; 49/51 Aegean components (0.961) have a skyfind centroid or
#     peak within one BMAJ (0.24 deg), and 46 of the 48 objects have an
#     Aegean component within one BMAJ (purity 0.958).
#     Of the 2 missed, 1 (Aegean SNR 6.5) is in no island, 1 (SNR 34.2) is
#     blended with a matched one. The 2 objects without a component (SNR 8
#     and 13) touch the mosaic's blank border. Purity was 0.746 (16 of 63
#     without a component) with the SExtractor mesh (background method=mesh,
#     box=auto), whose rms is 0.85 of Aegean's local_rms here: BANE's clip
#     (at most 3 passes, stopping when sigma moves by less than 20%) keeps
#     more of the emission around sources in the noise, and Aegean's
#     catalogue was made on it. Without the deblending 46/51 (4 of the 5
#     missed lay inside an island that skyfind reported as one source, where
#     Aegean fits several Gaussians); with the beam filter (kernel=beam)
#     35/51: it cost SNR here.
PKS_MIN_MATCHED = 0.94            # measured 0.961 (49/51); 48/51 is the aim
PKS_MAX_UNMATCHED_SF = 0.05       # measured 0.042 (2/48 skyfind objects); purity 0.95 is the aim
PKS_MAX_MEDIAN_SEP_BEAMS = 0.15   # measured 0.069 BMAJ (max 0.706)
#     Like with like: per skyfind island, its flux_jy against the sum of
#     int_flux of the Aegean components that lie in it (through the label
#     map), its peak against their largest peak_flux. 41 objects hold 46
#     components. Isophotal fluxes (the island is cut at 3 sigma of the
#     unfiltered image) fall short of Gaussian integrals, the more so for
#     faint sources, whose islands hold only their cores (with BANE's larger
#     rms the 3-sigma flood level is higher and the islands smaller than with
#     the mesh: median 0.714 then). Gaussian fitting (issue 15) is what
#     gives Aegean's integrated flux.
PKS_PEAK_RATIO = (0.94, 1.04)     # measured median 0.980 (0.880..1.442)
PKS_FLUX_RATIO = (0.55, 1.05)     # measured median 0.584 (0.058..0.981)
PKS_BRIGHT_SNR = 15               # single-component islands with snr > 15: 9
PKS_BRIGHT_FLUX_RATIO = (0.85, 1.06)  # measured median 0.888 (0.428..0.981)

# (b) Aegean's synthetic image. NB: the TRUTH.csv note (noise rms 0.5,
#     background 0) gives the generator's nominal parameters; the pixels hold
#     uniform noise scaled to 0.5 *before* it was smoothed by the beam: level
#     0.25, rms 0.029 measured here (skyfind: 0.027). Every source is then
#     at peak SNR 17 or more.
SYN_MIN_COMPLETENESS = 0.99       # measured 102/102 (1.000): id 102, which
                                  # shares an island with id 99 2.3 beams
                                  # away, is split from it by the deblending
SYN_MIN_PURITY = 0.98             # measured 102/102 (1.000)
SYN_PEAK_RATIO = (0.95, 1.01)     # measured median 0.980 (pixel-sampled peak,
                                  # 3.5 px per beam)
SYN_FLUX_RATIO = (0.95, 1.05)     # measured median 0.999 (flux_sum / beam area
                                  # vs truth peak, point sources)
SYN_MAX_MEDIAN_OFFSET_PIX = 0.1   # measured 0.02 px (centroid vs truth)

# (c) AMI-LA GRB120422A vs PySE (transientskp/pyse test_image.py): PySE finds
#     2 sources at 5 sigma, one of them real (the other near the edge, in
#     noise). radio.pipe finds 1, at 0.14" (centroid) of PySE's fitted position
#     (beam 54.2" x 24.7"), peak 7.353e-4 Jy/beam (PySE 7.4222e-4 +- 1.073e-4,
#     ratio 0.991), flux_jy 3.554e-4 Jy (PySE integrated 6.0318e-4 +- 1.625e-4,
#     ratio 0.589: isophotal flux of a source at 7 sigma).
AMI_MAX_SOURCES = 2               # PySE's count; measured 1
AMI_MAX_SEP_BMIN = 0.2            # measured 0.0057 BMIN (0.14")
AMI_PEAK_RATIO = (0.855, 1.145)   # PySE's own 1-sigma error (14.5%); measured 0.991
AMI_FLUX_RATIO = (0.46, 1.54)     # PySE's 2-sigma error (2 x 27%); measured 0.589 (0.720 with the mesh)

# (d) ESO NTT/EMMI vs SExtractor 2.x (default.sex: DETECT_THRESH 1.5,
#     DETECT_MINAREA 5, default.conv, DEBLEND_MINCONT 1.0, CLEAN Y).
SEX_MATCH_PIX = 1.0               # a counterpart is within 1 pixel
SEX_BORDER_PIX = 3.0              # objects closer than this to the border
#     Interior objects: 61/61 matched. Border objects: 1/4: the three within
#     1.5 px of the border are lost (KNOWN_BUGS).
SEX_MAX_EXTRA = 10                # measured 6 skyfind objects without a
                                  # SExtractor one: all faint (npix 5-9,
                                  # snr <= 4.3) and 9-24 px from a brighter
                                  # object: SExtractor's CLEAN removed them
SEX_EXTRA_MAX_SNR = 10.0          # measured max 7.8 (edge=nearest: one object of
                                  # 13 px at the border, the rest <= 4.3)
SEX_BORDER_MIN_MATCHED = 0.75     # measured 3/4 within 3 px of the border: the
                                  # object at (1.5, 10.1), FLAGS 24 (truncated,
                                  # SExtractor's own edge case), is split
                                  # differently by skyfind's border filter
SEX_ISOLATION_PIX = 10.0          # no other object within 10 px in either
#     Isolated objects (measured 49): skyfind's centroid is the barycentre of
#     the unfiltered pixels; SExtractor's X_IMAGE, X2_IMAGE weight them by the
#     *filtered* values (SEP analyse.c: mx += cdvalue * x), which broadens
#     X2_IMAGE, Y2_IMAGE (skyfind's x2, y2 are smaller by a median 0.10 px^2,
#     up to 0.45 px^2 for bright objects: the kernel's variance is 0.5 px^2)
#     and moves the centroid a little.
SEX_MAX_MEDIAN_DPOS = 0.10        # measured median 0.054 px
SEX_MAX_DPOS = 1.0                # measured max 0.749 px (object 4, 3 px
                                  # from the border, edge-affected)
#     Recomputing the barycentre of each skyfind island with SExtractor's
#     weights (the background-subtracted image filtered with default.conv,
#     zero beyond the border) reproduces X_IMAGE, Y_IMAGE to the catalogue's
#     1e-4 px for 54/62 matched objects: the pixel sets are then identical.
#     sextractor.pipe thresholds against one global rms as SExtractor does
#     without a weight map (threshold rms=global): measured 64/64. (With the
#     local rms map, within 3.5% of it here, 8 of 62 differed by 0.01-0.62 px:
#     a few pixels added or dropped.)
SEX_SAME_PIXELS_TOL = 2e-4
SEX_MIN_SAME_PIXELS = 0.80        # measured 64/64
#     The catalogue has no FLUX_ISO; flux_sum (isophotal) vs FLUX_AUTO (Kron)
#     for isolated objects with FLUX_AUTO > 2e4 (8 of them): the isophote at
#     1.5 sigma holds nearly all the light of bright objects.
SEX_BRIGHT_AUTO = 2e4
SEX_BRIGHT_FLUX_RATIO = (0.90, 1.08)  # measured median 0.986 (0.680..1.060)

KNOWN_BUGS = {
    # none at present. (Before sextractor.pipe used edge=reflect, edge=zero
    # lost the 3 SExtractor objects within 1.5 px of the border: skyfind
    # filters before subtracting the level; see man skyfind-pipeline, edge.)
}

passed = failed = xfailed = 0


def check(ok, what, bug=None):
    global passed, failed, xfailed
    if bug:
        if ok:
            failed += 1
            print(f"FAIL (XPASS): {what}: known bug '{bug}' seems fixed; "
                  "remove it from KNOWN_BUGS")
        else:
            xfailed += 1
            print(f"XFAIL: {what}: known bug '{bug}': {KNOWN_BUGS[bug]}")
        return
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def within(v, lohi):
    return lohi[0] <= v <= lohi[1]


def read_catalog(path):
    rows = list(csv.reader(l for l in open(path) if not l.startswith("#")))
    head, body = rows[0], rows[1:]
    return {k: np.array([float(r[i]) for r in body]) for i, k in enumerate(head)}


def run(path, out, pipe, *extra):
    """Run skyfind on path; return its catalogue (dict of arrays) and the
    stem of its outputs in out."""
    r = subprocess.run([SKYFIND, "run", "-q", "-b", "cpu", "--json", "-p", pipe, "-o", out,
                        *extra, path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"skyfind run {os.path.basename(path)} failed ({r.returncode}): "
                           f"{r.stderr.strip()}")
    rep = [json.loads(l) for l in r.stdout.strip().splitlines() if l.startswith("{\"file\"")][-1]
    cat = rep["catalog"]
    return read_catalog(cat), cat[:-len(".cat.csv")]


def angsep(ra1, dec1, ra2, dec2):
    """Great-circle distance in degrees (haversine), broadcasting."""
    ra1, dec1, ra2, dec2 = map(np.radians, (ra1, dec1, ra2, dec2))
    h = (np.sin((dec2 - dec1) / 2) ** 2
         + np.cos(dec1) * np.cos(dec2) * np.sin((ra2 - ra1) / 2) ** 2)
    return np.degrees(2 * np.arcsin(np.sqrt(np.clip(h, 0, 1))))


def sky_dist(ra, dec, cat):
    """(n_ref, n_cat) distances in degrees from reference positions to each
    skyfind source's centroid or peak, whichever is nearer."""
    ra, dec = np.asarray(ra, float)[:, None], np.asarray(dec, float)[:, None]
    return np.minimum(angsep(ra, dec, cat["ra"][None], cat["dec"][None]),
                      angsep(ra, dec, cat["peak_ra"][None], cat["peak_dec"][None]))


def image_plane(path):
    d = np.asarray(fits.getdata(path), dtype=np.float32)
    while d.ndim > 2:
        d = d[0]
    return d


def fmt_range(a):
    return f"median {np.median(a):.3f} ({np.min(a):.3f}..{np.max(a):.3f})"


# ---- (a) Parkes 1904-66 against Aegean --------------------------------------------------
def parkes(tmp):
    img = os.path.join(DATA, "radio_parkes_1904-66_SIN.fits")
    comp = os.path.join(DATA, "radio_parkes_1904-66_SIN.REF_aegean_comp.fits")
    subset = os.path.join(DATA, "radio_parkes_1904-66_SIN.REF_aegean_comp_subset.csv")
    if not all(os.path.exists(p) for p in (img, comp, subset)):
        print("(a) Parkes 1904-66: SKIP (files missing)")
        return
    print("(a) radio_parkes_1904-66_SIN.fits, pipelines/radio.pipe, vs Aegean components")
    ref = Table.read(comp)
    # The subset CSV is a column subset of the same catalogue: check it agrees.
    sub = list(csv.DictReader(open(subset)))
    key = {(int(r["island"]), int(r["source"])): r for r in ref}
    def same(r):  # the FITS table holds float32: agree to its precision
        k = (int(r["island"]), int(r["source"]))
        return (k in key and abs(float(r["ra"]) - key[k]["ra"]) < 1e-4
                and abs(float(r["dec"]) - key[k]["dec"]) < 1e-4
                and abs(float(r["int_flux"]) / key[k]["int_flux"] - 1) < 1e-5)
    bad = [r for r in sub if not same(r)]
    check(len(sub) > 0 and not bad, f"Aegean subset CSV: {len(bad)} of {len(sub)} rows "
          "disagree with the FITS catalogue")

    hdr = fits.getheader(img)
    bmaj = float(hdr["BMAJ"])
    cat, stem = run(img, tmp, os.path.join(PIPES, "radio.pipe"), "--save", "seg")
    seg = fits.getdata(stem + ".seg.fits")
    n_sf, n_ref = len(cat["id"]), len(ref)
    d = sky_dist(ref["ra"], ref["dec"], cat)
    matched = d.min(axis=1) < bmaj
    sf_unmatched = int((d.min(axis=0) >= bmaj).sum())
    frac = matched.mean()
    sep_beams = d.min(axis=1)[matched] / bmaj
    print(f"    skyfind {n_sf} sources, Aegean {n_ref} components; matched within one BMAJ "
          f"({bmaj:.3f} deg): {matched.sum()}/{n_ref} = {frac:.3f} (tolerance >= {PKS_MIN_MATCHED})")
    print(f"    skyfind sources without an Aegean component within one BMAJ: {sf_unmatched}/{n_sf}"
          f" (tolerance <= {PKS_MAX_UNMATCHED_SF:.2f} of them)")
    print(f"    separation of matched components: median {np.median(sep_beams):.3f}, "
          f"max {sep_beams.max():.3f} BMAJ (tolerance median <= {PKS_MAX_MEDIAN_SEP_BEAMS})")
    check(frac >= PKS_MIN_MATCHED, f"Parkes: matched fraction {frac:.3f} < {PKS_MIN_MATCHED}")
    check(sf_unmatched <= PKS_MAX_UNMATCHED_SF * n_sf,
          f"Parkes: {sf_unmatched}/{n_sf} skyfind sources without Aegean counterpart")
    check(np.median(sep_beams) <= PKS_MAX_MEDIAN_SEP_BEAMS,
          f"Parkes: median separation {np.median(sep_beams):.3f} BMAJ")

    # Like with like: the Aegean components inside each skyfind island.
    w = WCS(hdr).celestial
    ax, ay = w.wcs_world2pix(np.asarray(ref["ra"], float), np.asarray(ref["dec"], float), 0)
    ix, iy = np.rint(ax).astype(int), np.rint(ay).astype(int)
    inside = (ix >= 0) & (iy >= 0) & (ix < seg.shape[1]) & (iy < seg.shape[0])
    lab = np.zeros(n_ref, dtype=int)
    lab[inside] = seg[iy[inside], ix[inside]]
    snr_ref = np.asarray(ref["peak_flux"] / ref["local_rms"], float)
    for what, sel in (("in no skyfind island", ~matched & (lab == 0)),
                      ("inside a skyfind island (blended with a matched one)", ~matched & (lab > 0))):
        if sel.any():
            print(f"    Aegean components not matched, {what}: {sel.sum()}, Aegean SNR "
                  f"{', '.join(f'{v:.1f}' for v in np.sort(snr_ref[sel]))}")
    fr, pr, ncomp, snr = [], [], [], []
    for j, sid in enumerate(cat["id"].astype(int)):
        k = lab == sid
        if k.any():
            fr.append(cat["flux_jy"][j] / float(np.sum(ref["int_flux"][k])))
            pr.append(cat["peak"][j] / float(np.max(ref["peak_flux"][k])))
            ncomp.append(int(k.sum()))
            snr.append(cat["snr"][j])
    fr, pr, ncomp, snr = map(np.array, (fr, pr, ncomp, snr))
    if not len(fr):
        check(False, "Parkes: no skyfind island holds an Aegean component")
        return
    bright = (ncomp == 1) & (snr > PKS_BRIGHT_SNR)
    print(f"    islands holding Aegean components: {len(fr)} ({(lab > 0).sum()} components; "
          f"{(ncomp == 1).sum()} islands with one)")
    print(f"    peak / Aegean peak_flux:      {fmt_range(pr)} (tolerance {PKS_PEAK_RATIO})")
    print(f"    flux_jy / sum Aegean int_flux: {fmt_range(fr)} (tolerance {PKS_FLUX_RATIO})")
    if bright.any():
        print(f"    same, one-component islands with snr > {PKS_BRIGHT_SNR} ({bright.sum()}): "
              f"{fmt_range(fr[bright])} (tolerance {PKS_BRIGHT_FLUX_RATIO})")
    check(within(np.median(pr), PKS_PEAK_RATIO), f"Parkes: median peak ratio {np.median(pr):.3f}")
    check(within(np.median(fr), PKS_FLUX_RATIO), f"Parkes: median flux ratio {np.median(fr):.3f}")
    check(bright.sum() >= 5 and within(np.median(fr[bright]), PKS_BRIGHT_FLUX_RATIO),
          f"Parkes: bright single-component flux ratio ({bright.sum()} islands)")


# ---- (b) Aegean's synthetic image against its truth -----------------------------------------
def synthetic(tmp):
    img = os.path.join(DATA, "sim_aegean_synthetic_512x256.fits")
    truth = os.path.join(DATA, "sim_aegean_synthetic_512x256.TRUTH.csv")
    if not all(os.path.exists(p) for p in (img, truth)):
        print("(b) Aegean synthetic: SKIP (files missing)")
        return
    print("(b) sim_aegean_synthetic_512x256.fits, pipelines/radio.pipe, vs TRUTH.csv")
    t = list(csv.DictReader(l for l in open(truth) if not l.startswith("#")))
    t = [r for r in t if r["inside_image"] == "1"]
    tra = np.array([float(r["ra_deg"]) for r in t])
    tdec = np.array([float(r["dec_deg"]) for r in t])
    tpeak = np.array([float(r["peak_flux"]) for r in t])
    tx = np.array([float(r["x_pix"]) for r in t])
    ty = np.array([float(r["y_pix"]) for r in t])
    point = np.array([r["kind"] == "point" for r in t])
    hdr = fits.getheader(img)
    bmaj = float(hdr["BMAJ"])
    bpix = bmaj / abs(float(hdr["CDELT2"]))
    barea = np.pi / (4 * np.log(2)) * bpix * (float(hdr["BMIN"]) / abs(float(hdr["CDELT2"])))

    data = image_plane(img).astype(np.float64)
    strip = np.concatenate([data[:30].ravel(), data[:, :30].ravel()])  # source-free strips
    cat, _ = run(img, tmp, os.path.join(PIPES, "radio.pipe"))
    d = sky_dist(tra, tdec, cat)
    matched = d.min(axis=1) < bmaj
    j = d.argmin(axis=1)
    comp = matched.mean()
    pur = (d.min(axis=0) < bmaj).mean() if len(cat["id"]) else 0.0
    print(f"    image noise (source-free strips): level {np.mean(strip):.4f}, rms {np.std(strip):.4f};"
          f" skyfind median rms {np.median(cat['rms']):.4f} (TRUTH.csv's nominal rms 0.5 is "
          "before smoothing)")
    print(f"    truth {len(t)}, skyfind {len(cat['id'])}; completeness {matched.sum()}/{len(t)} = "
          f"{comp:.3f} (tolerance >= {SYN_MIN_COMPLETENESS}), purity {pur:.3f} "
          f"(tolerance >= {SYN_MIN_PURITY}); match radius one BMAJ ({bmaj * 3600:.0f}\")")
    for i in np.where(~matched)[0]:
        print(f"    missed: id {t[i]['id']} ({t[i]['kind']}, peak {tpeak[i]:g})")
    m = matched & point
    pr = cat["peak"][j[m]] / tpeak[m]
    fr = cat["flux_sum"][j[m]] / barea / tpeak[m]
    off = np.hypot(cat["x"][j[m]] - tx[m], cat["y"][j[m]] - ty[m])
    print(f"    matched point sources ({m.sum()}): peak / truth {fmt_range(pr)} "
          f"(tolerance {SYN_PEAK_RATIO})")
    print(f"    flux_sum / beam area ({barea:.2f} px) / truth peak: {fmt_range(fr)} "
          f"(tolerance {SYN_FLUX_RATIO})")
    print(f"    centroid - truth: median {np.median(off):.3f} px, max {off.max():.3f} px "
          f"(tolerance median <= {SYN_MAX_MEDIAN_OFFSET_PIX})")
    check(comp >= SYN_MIN_COMPLETENESS, f"synthetic: completeness {comp:.3f}")
    check(pur >= SYN_MIN_PURITY, f"synthetic: purity {pur:.3f}")
    check(m.sum() > 0 and within(np.median(pr), SYN_PEAK_RATIO),
          f"synthetic: median peak ratio {np.median(pr) if m.any() else float('nan'):.3f}")
    check(m.sum() > 0 and within(np.median(fr), SYN_FLUX_RATIO),
          f"synthetic: median flux ratio {np.median(fr) if m.any() else float('nan'):.3f}")
    check(m.sum() > 0 and np.median(off) <= SYN_MAX_MEDIAN_OFFSET_PIX,
          f"synthetic: median centroid offset {np.median(off) if m.any() else float('nan'):.3f} px")


# ---- (c) AMI-LA GRB120422A against PySE --------------------------------------------------
PYSE = dict(ra=136.896042, dec=14.0221872, peak=7.4222e-4, peak_err=1.073e-4,
            flux=6.0318e-4, flux_err=1.625e-4, n=2)
PYSE_MOMENTS = dict(ra=136.89603, dec=14.022377, peak=7.3613e-4)


def amila(tmp):
    img = os.path.join(DATA, "radio_amila_GRB120422A_512x512x1x1.fits")
    ref = os.path.join(DATA, "radio_amila_GRB120422A_512x512x1x1.REF_pyse_expected.txt")
    if not all(os.path.exists(p) for p in (img, ref)):
        print("(c) AMI-LA: SKIP (files missing)")
        return
    # the numbers above are transcribed from the reference file: make sure it says so
    txt = open(ref).read()
    check(all(s in txt for s in ("136.896042", "14.0221872", "7.4222e-4", "6.0318e-4", "exactly 2")),
          "AMI-LA: the PySE reference file no longer holds the transcribed numbers")
    print("(c) radio_amila_GRB120422A_512x512x1x1.fits, pipelines/radio.pipe, vs PySE")
    hdr = fits.getheader(img)
    bmaj, bmin = float(hdr["BMAJ"]), float(hdr["BMIN"])
    cat, _ = run(img, tmp, os.path.join(PIPES, "radio.pipe"))
    n = len(cat["id"])
    print(f"    skyfind {n} sources, PySE {PYSE['n']} (tolerance <= {AMI_MAX_SOURCES})")
    check(1 <= n <= AMI_MAX_SOURCES, f"AMI-LA: {n} sources")
    if n == 0:
        return
    d = sky_dist([PYSE["ra"]], [PYSE["dec"]], cat)[0]
    k = int(d.argmin())
    dc = angsep(PYSE["ra"], PYSE["dec"], cat["ra"][k], cat["dec"][k]) * 3600
    dp = angsep(PYSE["ra"], PYSE["dec"], cat["peak_ra"][k], cat["peak_dec"][k]) * 3600
    dm = angsep(PYSE_MOMENTS["ra"], PYSE_MOMENTS["dec"], cat["ra"][k], cat["dec"][k]) * 3600
    pr = cat["peak"][k] / PYSE["peak"]
    fr = cat["flux_jy"][k] / PYSE["flux"]
    print(f"    nearest: id {int(cat['id'][k])}, snr {cat['snr'][k]:.2f}; centroid {dc:.2f}\" "
          f"({dc / 3600 / bmin:.4f} BMIN, {dc / 3600 / bmaj:.4f} BMAJ), peak pixel {dp:.2f}\" from "
          f"PySE's fit; centroid {dm:.2f}\" from PySE's moments position "
          f"(beam {bmaj * 3600:.1f}\" x {bmin * 3600:.1f}\"; tolerance <= {AMI_MAX_SEP_BMIN} BMIN)")
    print(f"    peak {cat['peak'][k]:.4e} / PySE {PYSE['peak']:.4e} = {pr:.3f} (tolerance "
          f"{AMI_PEAK_RATIO}); / PySE moments {PYSE_MOMENTS['peak']:.4e} = "
          f"{cat['peak'][k] / PYSE_MOMENTS['peak']:.3f}")
    print(f"    flux_jy {cat['flux_jy'][k]:.4e} / PySE integrated {PYSE['flux']:.4e} = {fr:.3f} "
          f"(tolerance {AMI_FLUX_RATIO})")
    check(min(dc, dp) / 3600 <= AMI_MAX_SEP_BMIN * bmin, f"AMI-LA: position off by {min(dc, dp):.2f}\"")
    check(within(pr, AMI_PEAK_RATIO), f"AMI-LA: peak ratio {pr:.3f}")
    check(within(fr, AMI_FLUX_RATIO), f"AMI-LA: flux ratio {fr:.3f}")


# ---- (d) ESO NTT/EMMI against SExtractor -------------------------------------------------
def isolated(x, y, r):
    dd = np.hypot(x[:, None] - x[None], y[:, None] - y[None])
    np.fill_diagonal(dd, np.inf)
    return dd.min(axis=1) > r if len(x) > 1 else np.ones(len(x), bool)


def sextractor(tmp):
    img = os.path.join(DATA, "optical_eso_ntt_emmi_256x256_int16_bscale.fits")
    refcat = os.path.join(DATA, "optical_eso_ntt_emmi_256x256_int16_bscale.REF_sextractor.cat")
    if not all(os.path.exists(p) for p in (img, refcat)):
        print("(d) ESO NTT: SKIP (files missing)")
        return
    print("(d) optical_eso_ntt_emmi_256x256_int16_bscale.fits, pipelines/sextractor.pipe, "
          "vs SExtractor")
    # Columns from the catalogue's own header (1-based numbers; FLUX_RADIUS has 3).
    cols = {}
    for line in open(refcat):
        if line.startswith("#"):
            f = line.split()
            cols[f[2]] = int(f[1]) - 1
    ref = np.loadtxt(refcat, ndmin=2)
    need = ("X_IMAGE", "Y_IMAGE", "X2_IMAGE", "Y2_IMAGE", "FLUX_AUTO", "FLAGS")
    if not all(c in cols for c in need):
        check(False, f"SExtractor catalogue lacks one of {need}")
        return
    rx, ry = ref[:, cols["X_IMAGE"]], ref[:, cols["Y_IMAGE"]]  # 1-based, as skyfind's x, y
    rauto = ref[:, cols["FLUX_AUTO"]]
    rnum = ref[:, cols["NUMBER"]].astype(int) if "NUMBER" in cols else np.arange(1, len(ref) + 1)
    # the reference was made with DETECT_MINAREA 5 and DEBLEND_MINCONT 1.0
    # (sep's default.sex); sextractor.pipe follows SExtractor 2.25's
    # default.sex (3 and 0.005): set to the reference's configuration
    cat, stem = run(img, tmp, os.path.join(PIPES, "sextractor.pipe"), "--save", "seg,background",
                    "--set", "segment.min_area=5", "--set", "deblend.mincont=1")
    data = image_plane(img)
    ny, nx = data.shape
    seg = fits.getdata(stem + ".seg.fits")
    bkg = fits.getdata(stem + ".bkg.fits")
    sx, sy = cat["x"], cat["y"]
    d = np.hypot(rx[:, None] - sx[None], ry[:, None] - sy[None])
    j = d.argmin(axis=1)
    matched = d.min(axis=1) <= SEX_MATCH_PIX
    extra = d.min(axis=0) > SEX_MATCH_PIX
    border = ((rx < 1 + SEX_BORDER_PIX) | (ry < 1 + SEX_BORDER_PIX)
              | (rx > nx - SEX_BORDER_PIX) | (ry > ny - SEX_BORDER_PIX))
    print(f"    objects: SExtractor {len(ref)}, skyfind {len(sx)}")
    print(f"    SExtractor objects with a skyfind one within {SEX_MATCH_PIX} px: interior "
          f"{(matched & ~border).sum()}/{(~border).sum()}, within {SEX_BORDER_PIX:g} px of the "
          f"border {(matched & border).sum()}/{border.sum()}")
    for i in np.where(~matched)[0]:
        print(f"      unmatched SExtractor {rnum[i]} at ({rx[i]:.1f}, {ry[i]:.1f}), "
              f"FLUX_AUTO {rauto[i]:.0f}, FLAGS {int(ref[i, cols['FLAGS']])}")
    print(f"    skyfind objects without a SExtractor one: {extra.sum()} (tolerance <= "
          f"{SEX_MAX_EXTRA}, all with snr < {SEX_EXTRA_MAX_SNR}); npix "
          f"{[int(v) for v in cat['npix'][extra]]}, snr {[round(v, 1) for v in cat['snr'][extra]]}")
    check(matched[~border].all(), f"SExtractor: {(~matched & ~border).sum()} interior objects "
          "without a skyfind counterpart")
    check(not border.any() or matched[border].mean() >= SEX_BORDER_MIN_MATCHED,
          f"SExtractor: {(~matched & border).sum()} of {border.sum()} border objects without a "
          "skyfind counterpart")
    check(extra.sum() <= SEX_MAX_EXTRA, f"SExtractor: {extra.sum()} skyfind objects without counterpart")
    check(not extra.any() or cat["snr"][extra].max() < SEX_EXTRA_MAX_SNR,
          "SExtractor: a bright skyfind object has no SExtractor counterpart")

    # Isolated objects: positions, second moments, fluxes.
    iso = matched & isolated(rx, ry, SEX_ISOLATION_PIX) & isolated(sx, sy, SEX_ISOLATION_PIX)[j]
    dpos = d.min(axis=1)[iso]
    dx2 = cat["x2"][j[iso]] - ref[iso, cols["X2_IMAGE"]]
    dy2 = cat["y2"][j[iso]] - ref[iso, cols["Y2_IMAGE"]]
    print(f"    isolated (no other object within {SEX_ISOLATION_PIX:g} px in either): {iso.sum()}; "
          f"position difference median {np.median(dpos):.3f} px, max {dpos.max():.3f} px "
          f"(tolerance {SEX_MAX_MEDIAN_DPOS}, {SEX_MAX_DPOS})")
    print(f"    x2 - X2_IMAGE median {np.median(dx2):+.3f}, y2 - Y2_IMAGE median {np.median(dy2):+.3f} "
          "px^2 (SExtractor weights by the filtered image, kernel variance 0.5 px^2)")
    check(iso.sum() >= 20, f"SExtractor: only {iso.sum()} isolated matched objects")
    check(np.median(dpos) <= SEX_MAX_MEDIAN_DPOS, f"SExtractor: median position difference {np.median(dpos):.3f}")
    check(dpos.max() <= SEX_MAX_DPOS, f"SExtractor: max position difference {dpos.max():.3f}")

    # SExtractor's barycentre of skyfind's islands: same pixel sets?
    kern = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], float) / 16
    filt = ndi.convolve(data.astype(np.float64) - bkg, kern, mode="constant", cval=0.0)
    idx = np.arange(1, int(seg.max()) + 1)
    yy, xx = np.mgrid[0:ny, 0:nx]
    wgt = np.where(seg > 0, filt, 0.0)
    tot = ndi.sum_labels(wgt, seg, idx)
    bx = ndi.sum_labels(wgt * xx, seg, idx) / tot + 1
    by = ndi.sum_labels(wgt * yy, seg, idx) / tot + 1
    lab_of = cat["id"].astype(int)[j[matched]]           # skyfind id of each matched object
    dsame = np.hypot(bx[lab_of - 1] - rx[matched], by[lab_of - 1] - ry[matched])
    same = dsame <= SEX_SAME_PIXELS_TOL
    print(f"    skyfind islands with SExtractor's weights reproduce X_IMAGE, Y_IMAGE to "
          f"{SEX_SAME_PIXELS_TOL} px: {same.sum()}/{matched.sum()} (tolerance >= "
          f"{SEX_MIN_SAME_PIXELS:.2f}); the others differ by "
          f"{np.sort(dsame[~same]).round(3).tolist()} px")
    check(same.mean() >= SEX_MIN_SAME_PIXELS,
          f"SExtractor: only {same.sum()}/{matched.sum()} islands have SExtractor's pixels")

    b = iso & (rauto > SEX_BRIGHT_AUTO)
    fr = cat["flux_sum"][j[b]] / rauto[b]
    fr_all = cat["flux_sum"][j[iso]] / np.where(rauto[iso] > 0, rauto[iso], np.nan)
    print(f"    flux_sum / FLUX_AUTO (no FLUX_ISO in the catalogue): isolated "
          f"median {np.nanmedian(fr_all):.3f}; isolated with FLUX_AUTO > {SEX_BRIGHT_AUTO:g} "
          f"({b.sum()}): {fmt_range(fr) if b.any() else 'none'} (tolerance {SEX_BRIGHT_FLUX_RATIO})")
    check(b.sum() >= 4 and within(np.median(fr), SEX_BRIGHT_FLUX_RATIO),
          f"SExtractor: bright flux ratio over {b.sum()} objects")


def main():
    if not os.path.isdir(DATA) or not os.path.exists(
            os.path.join(DATA, "radio_parkes_1904-66_SIN.fits")):
        print("SKIP: no test data in", DATA)
        return 77
    if not os.access(SKYFIND, os.X_OK):
        print("FAIL: no skyfind binary at", SKYFIND)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("a", parkes), ("b", synthetic), ("c", amila), ("d", sextractor)):
            out = os.path.join(tmp, name)
            os.mkdir(out)
            try:
                fn(out)
            except Exception as e:  # a crash of skyfind or of a reader is a failure
                check(False, f"({name}) {type(e).__name__}: {e}")
    print(f"{passed} passed, {failed} failed, {xfailed} expected failures (known bugs)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
