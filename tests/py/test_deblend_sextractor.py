#!/usr/bin/env python3
"""Deblending against SExtractor 2.25 (Debian's source-extractor), run here
with its default configuration (default.sex: DETECT_THRESH 1.5,
DETECT_MINAREA 5, default.conv, DEBLEND_NTHRESH 32, DEBLEND_MINCONT 0.005,
CLEAN Y), and skyfind's pipelines/sextractor.pipe on the same files.

1. A crowded simulated field with a truth list (skyfind simulate: point
   sources with a 3-pixel FWHM on white noise, plus blended pairs with
   known separations and flux ratios): sextractor.pipe must recover at
   least as many true sources as SExtractor within 1.5 px, at equal or
   better purity (detections within 1.5 px of a true source / detections),
   and resolve at least as many pairs. The pairs resolved by separation (in
   FWHM) and flux ratio are printed as a table for both tools.
2. optical_eso_ntt_emmi_256x256_int16_bscale.fits (no truth): the two
   catalogues must agree, each holding at least 90% of the other's objects
   within 1.5 px, and deblending must split islands on it.
Skipped (exit 77) when source-extractor is missing. The tool, data and
pipelines come from SKYFIND, SKYFIND_TEST_DATA and SKYFIND_SOURCE (as for
the other tests). --table FILE writes the pairs table as Markdown.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from astropy.io import fits

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
        print("ok  ", msg)
    else:
        failed += 1
        print("FAIL", msg)


SEX_PARAMS = ["NUMBER", "X_IMAGE", "Y_IMAGE", "FLUX_ISO", "FLAGS"]


def sextractor_dir():
    for d in ("/usr/share/source-extractor", "/usr/share/sextractor"):
        if os.path.exists(os.path.join(d, "default.sex")):
            return d
    return None


def run_sextractor(sex, share, image, work):
    """SExtractor with default.sex and default.conv; 0-based x, y."""
    par = os.path.join(work, "p.param")
    cat = os.path.join(work, "sex.cat")
    with open(par, "w") as f:
        f.write("\n".join(SEX_PARAMS) + "\n")
    subprocess.run([sex, image, "-c", os.path.join(share, "default.sex"),
                    "-PARAMETERS_NAME", par, "-FILTER_NAME", os.path.join(share, "default.conv"),
                    "-CATALOG_NAME", cat, "-CATALOG_TYPE", "ASCII", "-CHECKIMAGE_TYPE", "NONE",
                    "-VERBOSE_TYPE", "QUIET"], check=True, cwd=work)
    t = np.loadtxt(cat, ndmin=2)
    return t[:, 1] - 1.0, t[:, 2] - 1.0


def run_skyfind(skyfind, pipes, image, work, extra=()):
    out = os.path.join(work, "sf")
    subprocess.run([skyfind, "run", "-q", "-b", "cpu", "-p", os.path.join(pipes, "sextractor.pipe"),
                    "-o", out, "--format", "csv", *extra, image], check=True)
    stem = os.path.basename(image)
    stem = stem[:-5] if stem.endswith(".fits") else stem
    rows = [l for l in open(os.path.join(out, stem + ".cat.csv")) if not l.startswith("#")]
    names = rows[0].strip().split(",")
    a = np.array([[float(v) for v in l.split(",")] for l in rows[1:]]).reshape(-1, len(names))
    col = {n: a[:, i] for i, n in enumerate(names)}
    return col["x"] - 1.0, col["y"] - 1.0, col


def match(tx, ty, dx, dy, r):
    """Greedy one-to-one matching, closest pairs first: for each truth the
    detection index matched to it (-1: none)."""
    if len(dx) == 0 or len(tx) == 0:
        return np.full(len(tx), -1)
    d2 = (tx[:, None] - dx[None, :]) ** 2 + (ty[:, None] - dy[None, :]) ** 2
    ti, di = np.nonzero(d2 <= r * r)
    order = np.argsort(d2[ti, di], kind="stable")
    used_t, used_d = set(), set()
    m = np.full(len(tx), -1)
    for k in order:
        t, d = ti[k], di[k]
        if t in used_t or d in used_d:
            continue
        used_t.add(t)
        used_d.add(d)
        m[t] = d
    return m


def purity(tx, ty, dx, dy, r):
    if len(dx) == 0:
        return 1.0
    d2 = (dx[:, None] - tx[None, :]) ** 2 + (dy[:, None] - ty[None, :]) ** 2
    return float(np.mean(d2.min(axis=1) <= r * r))


def crowded(skyfind, sex, share, pipes, work, table):
    img4 = os.path.join(work, "crowd4.fits")
    # 3-pixel FWHM (6 arcsec at 2 arcsec/pixel): a seeing-limited optical field
    subprocess.run([skyfind, "simulate", "-q", "-n", "1024", "--seed", "7", "--beam", "6,6,0",
                    "--pixel", "2", "--noise", "1", "--nsrc", "1500", "--snr", "3,300",
                    "--ext-frac", "0", "--pairs", "300", "--pair-sep", "0.5,3",
                    "--pair-ratio", "10", "-o", img4], check=True)
    truth = np.genfromtxt(os.path.join(work, "crowd4.truth.csv"), delimiter=",", names=True,
                          skip_header=1)
    # SExtractor reads 2-D images: both tools get the same 2-D file
    img = os.path.join(work, "crowd.fits")
    with fits.open(img4) as h:
        hdr = h[0].header
        data = h[0].data.reshape(h[0].data.shape[-2:])
        fits.PrimaryHDU(data, fits.Header([c for c in hdr.cards if not c.keyword.endswith(("3", "4"))
                                           and c.keyword not in ("NAXIS",)])).writeto(img)
    sx, sy = run_sextractor(sex, share, img, work)
    fx, fy, col = run_skyfind(skyfind, pipes, img, work)
    tx, ty = truth["x"], truth["y"]
    # a true source is findable when its peak is at least 5 sigma
    snr = truth["peak"]
    res = {}
    for name, x, y in (("SExtractor", sx, sy), ("skyfind", fx, fy)):
        m = match(tx, ty, x, y, 1.5)
        res[name] = dict(n=len(x), found=int(np.sum(m >= 0)), found5=int(np.sum((m >= 0) & (snr >= 5))),
                         purity=purity(tx, ty, x, y, 1.5), m=m)
        print(f"  {name:10s}: {len(x)} detections, {res[name]['found']} of {len(tx)} true sources "
              f"within 1.5 px ({res[name]['found5']} of {int(np.sum(snr >= 5))} above 5 sigma), "
              f"purity {res[name]['purity']:.4f}")
    print(f"  skyfind: {int(np.sum(col['nchildren'] > 1))} objects from "
          f"{len(set(col['parent'][col['nchildren'] > 1]))} deblended islands")
    s, k = res["SExtractor"], res["skyfind"]
    check(k["found"] >= s["found"], f"crowded field: skyfind recovers {k['found']} true sources, "
          f"SExtractor {s['found']}")
    check(k["purity"] >= s["purity"] - 1e-12, f"crowded field: purity {k['purity']:.4f} (SExtractor "
          f"{s['purity']:.4f})")
    # the pairs: resolved when both members are matched to distinct detections
    pid = truth["pair"].astype(int)
    fwhm = 3.0
    seps, ratios, res_s, res_k = [], [], [], []
    for p in range(1, pid.max() + 1):
        i, j = np.nonzero(pid == p)[0]
        seps.append(np.hypot(tx[i] - tx[j], ty[i] - ty[j]) / fwhm)
        ratios.append(max(truth["peak"][i], truth["peak"][j]) / min(truth["peak"][i], truth["peak"][j]))
        res_s.append(s["m"][i] >= 0 and s["m"][j] >= 0)
        res_k.append(k["m"][i] >= 0 and k["m"][j] >= 0)
    seps, ratios = np.array(seps), np.array(ratios)
    res_s, res_k = np.array(res_s), np.array(res_k)
    check(res_k.sum() >= res_s.sum(), f"pairs resolved: skyfind {res_k.sum()}, SExtractor "
          f"{res_s.sum()} of {len(seps)}")
    sep_bins = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    rat_bins = [1.0, 2.0, 5.0, 10.0]
    lines = ["| separation (FWHM) | flux ratio | pairs | SExtractor resolved | skyfind resolved |",
             "|---|---|---|---|---|"]
    for a, b in zip(sep_bins[:-1], sep_bins[1:]):
        for c, d in zip(rat_bins[:-1], rat_bins[1:]):
            sel = (seps >= a) & (seps < b) & (ratios >= c) & (ratios < d)
            lines.append(f"| {a:.1f}-{b:.1f} | {c:g}-{d:g} | {sel.sum()} | {res_s[sel].sum()} | "
                         f"{res_k[sel].sum()} |")
    print("\n".join("  " + l for l in lines))
    if table:
        with open(table, "w") as f:
            f.write("\n".join(lines) + "\n")


def optical(skyfind, sex, share, pipes, data, work):
    img = os.path.join(data, "optical_eso_ntt_emmi_256x256_int16_bscale.fits")
    if not os.path.exists(img):
        print("skip: no", img)
        return
    sx, sy = run_sextractor(sex, share, img, work)
    fx, fy, col = run_skyfind(skyfind, pipes, img, work)
    ms = match(sx, sy, fx, fy, 1.5)
    mk = match(fx, fy, sx, sy, 1.5)
    print(f"  optical: SExtractor {len(sx)}, skyfind {len(fx)} objects; {np.sum(ms >= 0)} of "
          f"SExtractor's within 1.5 px of skyfind's; "
          f"{int(np.sum(col['nchildren'] > 1))} skyfind objects from deblended islands")
    check(np.sum(ms >= 0) >= 0.9 * len(sx), "optical: skyfind holds >= 90% of SExtractor's objects")
    check(np.sum(mk >= 0) >= 0.9 * len(fx), "optical: SExtractor holds >= 90% of skyfind's objects")
    check(np.sum(col["nchildren"] > 1) > 0, "optical: some islands are deblended")


HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SKYFIND_SOURCE", os.path.normpath(os.path.join(HERE, "..", "..")))


def main():
    skyfind = os.environ.get("SKYFIND", os.path.join(SOURCE, "build", "skyfind"))
    data = os.environ.get("SKYFIND_TEST_DATA") or os.path.join(SOURCE, "..", "shared", "data")
    pipes = os.path.join(SOURCE, "pipelines")
    table = sys.argv[sys.argv.index("--table") + 1] if "--table" in sys.argv else None
    sex = shutil.which("source-extractor") or shutil.which("sex")
    share = sextractor_dir()
    if not sex or not share:
        print("skip: source-extractor is not installed (Debian package source-extractor)")
        return 77
    with tempfile.TemporaryDirectory() as work:
        crowded(skyfind, sex, share, pipes, work, table)
        os.makedirs(os.path.join(work, "opt"))
        optical(skyfind, sex, share, pipes, data, os.path.join(work, "opt"))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
