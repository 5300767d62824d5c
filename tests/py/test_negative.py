#!/usr/bin/env python3
"""Negative detections (threshold sign=negative|both) and the false-detection
estimate they give, against the true false detections of simulated skies.

In an image whose noise is symmetric about the background, the detections of
the inverted image are as many, above any SNR, as the noise's own positive
(false) detections. skyfind's `threshold sign=both` runs the steps from
threshold on a second time on the inverted image and reports, per image and
per batch, the negative and positive counts above |snr| 3, 4, 5, ... (text
summary and --json "negatives").

Checked here, with pipelines/radio.pipe on `skyfind simulate` skies of
2048 x 2048 pixels (white noise 1e-4 Jy/beam, beam 5 x 3.5 px), at
nsigma 3.5 and 4 (flood 3), where there are enough false detections to count:

1. Noise-only skies (--nsrc 0), where every positive detection is false:
   the negative count equals the positive count within 3 Poisson sigma,
   summed over two seeds, at each nsigma (the estimate is unbiased).
2. Skies with 1000 sources: the negative count against the true false
   detections (positive detections with no true source within a beam FWHM of
   their centroid or peak). Reported, and asserted between 0.5 and 2.5
   times: the sources bias the background high by a few per cent of the
   filtered noise, which moves counts this far down the Gaussian tail in
   opposite directions for the two signs. The estimate errs on the side of
   more false detections. radio.pipe's BANE background (a median of a
   lightly clipped box of 6 x 4 beams, which keeps some source emission)
   is biased more than the SExtractor mesh it replaced: negatives exceed the
   true false detections by 1.8-2.2 times (1.3-1.5 with the mesh).
3. The catalogue convention: in a sign=both catalogue the positive rows are
   exactly the sign=positive catalogue, the negative rows have sign -1,
   negative id and parent, negative flux_sum, peak and snr; the segmentation
   map labels them -id and the mask marks their pixels 4 and 8; and sign=negative
   on an image equals sign=positive on the negated image (made with astropy)
   column for column, up to those sign flips (with background method=global,
   whose clipped median is odd in the image; the mesh estimator's is not
   exactly, so radio.pipe's own negative detections of the two differ a
   little).
4. The --json counts equal the counts made from the catalogue.

Measured (skyfind 0.1.0, CPU, November 2026; seeds 1 and 2; radio.pipe
with background method=bane):
   noise only, nsigma 3.5: 640 positive (all false), 636 negative
   noise only, nsigma 4:   119 positive, 127 negative
   1000 sources, nsigma 3.5: 341 true false detections, 619 negative
   1000 sources, nsigma 4:   57 true false detections, 123 negative
(with the mesh background of before: 894/823, 183/182, 620/795, 123/178)
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from astropy.io import fits
from scipy.spatial import cKDTree

from sfpy import Checks, read_catalog

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SKYFIND_SOURCE", os.path.normpath(os.path.join(HERE, "..", "..")))
SKYFIND = os.environ.get("SKYFIND", os.path.join(SOURCE, "build", "skyfind"))
SIZE, SEEDS, NSIGMAS, BEAM_PX = 2048, (1, 2), (3.5, 4.0), 5.0

check = Checks()


def simulate(path, seed, nsrc):
    subprocess.run([SKYFIND, "simulate", "-q", "-n", str(SIZE), "--nsrc", str(nsrc), "--seed",
                    str(seed), "-o", path], check=True)
    return read_catalog(path[:-len(".fits")] + ".truth.csv")


def run(path, out, *sets, save=None):
    args = [SKYFIND, "run", "-q", "-b", "cpu", "--json", "-o", out, path]
    if save:
        args += ["--save", save]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"skyfind run {' '.join(sets)} failed ({r.returncode}): {r.stderr.strip()}")
    objs = [json.loads(l) for l in r.stdout.strip().splitlines()]
    item = [o for o in objs if "file" in o][-1]
    summary = [o for o in objs if "summary" in o][-1]["summary"]
    return read_catalog(item["catalog"]), item, summary


def true_false(truth, cat):
    """Positive detections with no true source within a beam FWHM."""
    pos = cat["sign"] > 0
    if len(truth["x"]) == 0:
        return int(pos.sum())
    tt = cKDTree(np.c_[truth["x"] + 1, truth["y"] + 1])   # truth 0-based, catalogue 1-based
    dc = tt.query(np.c_[np.nan_to_num(cat["x"], nan=-1e9), np.nan_to_num(cat["y"], nan=-1e9)])[0]
    dp = tt.query(np.c_[cat["peak_x"], cat["peak_y"]])[0]
    return int((pos & (np.minimum(dc, dp) > BEAM_PX)).sum())


def json_counts_match(cat, item, what):
    neg = item.get("negatives")
    check(neg is not None, f"{what}: --json has no negatives object")
    if neg is None:
        return
    a = np.abs(cat["snr"])
    sign = cat["sign"]
    want_p = [int(((sign > 0) & (a >= s)).sum()) for s in neg["snr"]]
    want_n = [int(((sign < 0) & (a >= s)).sum()) for s in neg["snr"]]
    check(neg["positive"] == want_p and neg["negative"] == want_n and neg["n"] == int((sign < 0).sum()),
          f"{what}: --json counts {neg} differ from the catalogue's {want_p} {want_n}")


def main():
    with tempfile.TemporaryDirectory(prefix="sf_neg_") as tmp:
        out = os.path.join(tmp, "out")
        print("false-detection estimate on 2048 x 2048 skies (radio.pipe, flood 3, seeds 1, 2):")
        print(f"    {'sky':<13} {'nsigma':>6} {'true false':>10} {'negative':>9} {'ratio':>6}")
        for nsrc in (0, 1000):
            skies = []
            for seed in SEEDS:
                path = os.path.join(tmp, f"sky{nsrc}_{seed}.fits")
                skies.append((path, simulate(path, seed, nsrc)))
            for ns in NSIGMAS:
                nfalse = nneg = 0
                for path, truth in skies:
                    cat, item, summary = run(path, out, "threshold.sign=both", f"threshold.nsigma={ns}")
                    nfalse += true_false(truth, cat)
                    nneg += int((cat["sign"] < 0).sum())
                    json_counts_match(cat, item, f"{os.path.basename(path)} nsigma {ns}")
                    check(summary.get("negatives", {}).get("n") == int((cat["sign"] < 0).sum()),
                          f"{os.path.basename(path)}: the --json summary's negatives")
                ratio = nneg / nfalse if nfalse else float("inf")
                sky = "noise only" if nsrc == 0 else f"{nsrc} sources"
                print(f"    {sky:<13} {ns:6.1f} {nfalse:10d} {nneg:9d} {ratio:6.2f}")
                if nsrc == 0:
                    check(nfalse > 50, f"noise only, nsigma {ns}: only {nfalse} false detections")
                    check(abs(nneg - nfalse) <= 3 * math.sqrt(nneg + nfalse),
                          f"noise only, nsigma {ns}: {nneg} negative vs {nfalse} false detections "
                          f"(more than 3 Poisson sigma apart)")
                else:
                    check(0.5 <= ratio <= 2.5, f"{nsrc} sources, nsigma {ns}: {nneg} negative vs "
                          f"{nfalse} true false detections (ratio {ratio:.2f} outside 0.5-2.5)")

        # 3. the catalogue convention, on the first sky with sources
        path = os.path.join(tmp, "sky1000_1.fits")
        pos, _, _ = run(path, out, "threshold.sign=positive", "threshold.nsigma=4")
        both, _, _ = run(path, out, "threshold.sign=both", "threshold.nsigma=4")
        onlyneg, _, _ = run(path, out, "threshold.sign=negative", "threshold.nsigma=4")
        glob = ("background.method=global", "threshold.nsigma=4")
        gneg, _, _ = run(path, out, "threshold.sign=negative", *glob)
        npos = len(pos["id"])
        bp = {k: v[both["sign"] > 0] for k, v in both.items()}
        bn = {k: v[both["sign"] < 0] for k, v in both.items()}
        same = all(np.array_equal(bp[k], pos[k], equal_nan=True) for k in pos)
        check(same and len(bp["id"]) == npos and np.all(pos["sign"] == 1),
              "sign=both: the positive rows differ from the sign=positive catalogue")
        check(len(bn["id"]) > 0 and np.all(bn["id"] < 0) and np.all(bn["parent"] < 0) and
              np.all(bn["flux_sum"] < 0) and np.all(bn["peak"] < 0) and np.all(bn["snr"] < 0),
              "sign=both: a negative row without negative id, parent, flux_sum, peak or snr")
        check(len(set(both["id"])) == len(both["id"]), "sign=both: ids are not unique")
        # the check images: labels -id, mask bits 4 (seed) and 8 (flood)
        run(path, out, "threshold.sign=both", "threshold.nsigma=4", save="seg,mask")
        stem = os.path.join(out, "sky1000_1")
        seg = fits.getdata(stem + ".seg.fits")
        mask = fits.getdata(stem + ".mask.fits")
        check(set(np.unique(seg[seg < 0]).tolist()) == set(bn["id"].astype(int).tolist()),
              "sign=both: the segmentation map's negative labels are not the negative objects' ids")
        check(set(np.unique(mask).tolist()) <= {0, 1, 2, 4, 8} and
              np.all(np.isin(mask[seg < 0], (4, 8))) and np.all(np.isin(mask[seg > 0], (1, 2))),
              "sign=both: the mask does not mark negative pixels 4/8 and positive ones 1/2")
        check(all(np.array_equal(bn[k], onlyneg[k], equal_nan=True) for k in onlyneg),
              "sign=both: the negative rows differ from the sign=negative catalogue")
        # sign=negative == sign=positive on the negated image, up to the flips
        with fits.open(path) as h:
            h[0].data = -h[0].data
            inv = os.path.join(tmp, "inverted.fits")
            h.writeto(inv)
        ref, _, _ = run(inv, out, "threshold.sign=positive", *glob)
        onlyneg = gneg
        flipped = {"id", "parent", "flux_sum", "peak", "snr", "bkg", "flux_jy", "sign"}
        bad = [k for k in ref if k in onlyneg and not (
            np.allclose(onlyneg[k], -ref[k] if k in flipped else ref[k], rtol=1e-9, atol=0,
                        equal_nan=True) if len(ref[k]) == len(onlyneg[k]) else False)]
        print(f"  sign=negative: {len(onlyneg['id'])} detections; sign=positive on the negated "
              f"image: {len(ref['id'])}; columns that differ: {bad or 'none'}")
        check(not bad, f"sign=negative differs from the negated image's catalogue in {bad}")

    print(f"{check.passed} checks passed, {check.failed} failed")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
