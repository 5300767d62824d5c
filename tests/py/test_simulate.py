#!/usr/bin/env python3
"""Checks skyfind's simulator from outside with astropy: the FITS header, that the
truth catalogue's ra/dec are what astropy.wcs makes of its x,y (1e-9 deg), that
bright sources sit where the truth says with the convolved shapes it lists, and
(with $SKYFIND only) that --noise-corr beam correlates the noise as the header's
beam predicts. Uses $SKYFIND simulate, else the helper
$SKYFIND_BUILD/tests/sf_simulate_tool. Prints `N passed, M failed`."""
import math
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from astropy.io import fits
from astropy.wcs import WCS, FITSFixedWarning

NX, NY, SEED, NSRC = 300, 200, 4242, 40
COMMENT = ("# skyfind simulate truth catalogue; x,y are 0-based pixel coordinates "
           "(add 1 for FITS/ds9 convention); flux in Jy, peak in Jy/beam; sizes are "
           "intrinsic FWHM in arcsec; conv_* is the observed shape (intrinsic convolved "
           "with the beam; the beam for point sources): FWHM in arcsec, PA in deg east of north")
HEADER = ("id,x,y,ra,dec,peak,flux,maj_arcsec,min_arcsec,pa_deg,pair,"
          "conv_maj_arcsec,conv_min_arcsec,conv_pa_deg")

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def executable(path):
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def simulate(tmp):
    """Write sim.fits and its truth CSV; returns (fits, csv, how) or None."""
    fits_path = os.path.join(tmp, "sim.fits")
    csv_path = os.path.join(tmp, "sim.truth.csv")
    cli = os.environ.get("SKYFIND", "")
    if executable(cli):
        cmd = [cli, "simulate", "-q", "--nx", str(NX), "--ny", str(NY), "--seed", str(SEED),
               "--nsrc", str(NSRC), "-o", fits_path, "--truth", csv_path]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0 and os.path.exists(fits_path) and os.path.exists(csv_path):
            return fits_path, csv_path, " ".join(cmd)
        print("note: %s failed (rc %d: %s); trying the helper tool"
              % (" ".join(cmd), r.returncode, r.stderr.strip()[:200]))
    build = os.environ.get("SKYFIND_BUILD", "")
    cands = [os.path.join(build, "tests", "sf_simulate_tool")] if build else []
    here = os.path.dirname(os.path.abspath(__file__))
    for b in ("build-sim", "build"):  # when run by hand from the checkout
        cands.append(os.path.join(here, "..", "..", b, "tests", "sf_simulate_tool"))
    for tool in cands:
        if executable(tool):
            cmd = [tool, str(NX), str(NY), str(SEED), fits_path, csv_path, str(NSRC)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL: %s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr))
                return None
            return fits_path, csv_path, " ".join(cmd)
    return "skip"


def main():
    with tempfile.TemporaryDirectory(prefix="sf_pysim_") as tmp:
        got = simulate(tmp)
        if got == "skip":
            print("SKIP: neither $SKYFIND nor $SKYFIND_BUILD/tests/sf_simulate_tool is built")
            return 77
        if got is None:
            check(False, "simulation ran")
            return report()
        fits_path, csv_path, how = got
        print("simulated with:", how)
        check(sorted(os.listdir(tmp)) == ["sim.fits", "sim.truth.csv"],
              "no temporary files left: %s" % os.listdir(tmp))

        with open(csv_path) as fh:
            lines = fh.read().splitlines()
        check(len(lines) >= 2 and lines[0] == COMMENT, "truth comment line: %r" % lines[:1])
        check(len(lines) >= 2 and lines[1] == HEADER, "truth header: %r" % lines[1:2])
        truth = np.genfromtxt(csv_path, delimiter=",", skip_header=1, names=True,
                              ndmin=1)
        n = len(truth)
        check(n == NSRC, "truth has %d rows, want %d" % (n, NSRC))
        check(list(truth["id"]) == list(range(1, n + 1)), "ids 1..n")

        with fits.open(fits_path) as hdul:
            hdr = hdul[0].header
            data = hdul[0].data
        check(hdr["BITPIX"] == -32, "BITPIX -32")
        check(hdr["NAXIS"] == 4, "NAXIS 4")
        check((hdr["NAXIS1"], hdr["NAXIS2"], hdr["NAXIS3"], hdr["NAXIS4"]) == (NX, NY, 1, 1),
              "NAXISn")
        check(data.shape == (1, 1, NY, NX), "data shape %s" % (data.shape,))
        for k, v in (("CTYPE1", "RA---SIN"), ("CTYPE2", "DEC--SIN"), ("CTYPE3", "FREQ"),
                     ("CTYPE4", "STOKES"), ("CUNIT1", "deg"), ("CUNIT2", "deg"),
                     ("CUNIT3", "Hz"), ("BUNIT", "JY/BEAM"), ("RADESYS", "ICRS")):
            check(hdr.get(k, "").strip() == v, "%s = %r, want %r" % (k, hdr.get(k), v))
        check(hdr["CRPIX1"] == NX // 2 + 1 and hdr["CRPIX2"] == NY // 2 + 1, "CRPIX nx/2+1")
        check(hdr["CDELT1"] < 0 and hdr["CDELT1"] == -hdr["CDELT2"], "CDELT1 = -CDELT2 < 0")
        check(hdr["CRVAL4"] == 1, "Stokes I")
        bmaj, bmin = hdr["BMAJ"], hdr["BMIN"]
        check(0 < bmin <= bmaj < 1, "BMAJ/BMIN in degrees: %g %g" % (bmaj, bmin))
        check(abs(bmaj * 3600 - 10) < 1e-9 and abs(bmin * 3600 - 7) < 1e-9,
              "default beam 10x7 arcsec: %g x %g" % (bmaj * 3600, bmin * 3600))
        check(abs(hdr["BPA"] - 30) < 1e-12, "BPA 30 deg")
        check(int(hdr["SIMSEED"]) == SEED, "SIMSEED")
        check(int(hdr["SIMNSRC"]) == n, "SIMNSRC %s vs %d rows" % (hdr["SIMNSRC"], n))
        noise = float(hdr["SIMNOISE"])
        check(any("skyfind simulate" in str(h) for h in hdr.get("HISTORY", [])), "HISTORY")
        img = data[0, 0].astype(np.float64)
        check(bool(np.all(np.isfinite(img))), "all pixels finite")
        mad = 1.4826 * np.median(np.abs(img - np.median(img)))
        check(abs(mad / noise - 1) < 0.1, "robust rms %g vs SIMNOISE %g" % (mad, noise))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FITSFixedWarning)
            w = WCS(hdr).celestial
        ra, dec = w.all_pix2world(truth["x"], truth["y"], 0)
        dra = (ra - truth["ra"] + 180.0) % 360.0 - 180.0
        worst = max(np.max(np.abs(dra)), np.max(np.abs(dec - truth["dec"])))
        check(worst < 1e-9, "truth ra/dec vs astropy WCS: worst %.3g deg" % worst)
        cx, cy = w.all_pix2world([NX // 2], [NY // 2], 0)
        check(abs(cx[0] - hdr["CRVAL1"]) < 1e-10 and abs(cy[0] - hdr["CRVAL2"]) < 1e-10,
              "0-based pixel (nx/2, ny/2) is the pointing")

        # the whole image less a model written here from the truth is pure noise:
        # checks positions, peaks, the beam's PA (north through east, east = -x)
        # and the extended sources' convolved shapes at once
        fw2sig = 1.0 / (2.0 * math.sqrt(2.0 * math.log(2.0)))
        pix = abs(hdr["CDELT2"]) * 3600

        def cov(maj, mn, pa_deg):
            sa, sb, t = maj / pix * fw2sig, mn / pix * fw2sig, math.radians(pa_deg)
            u = np.array([-math.sin(t), math.cos(t)])
            v = np.array([math.cos(t), math.sin(t)])
            return sa * sa * np.outer(u, u) + sb * sb * np.outer(v, v)

        beam = cov(bmaj * 3600, bmin * 3600, hdr["BPA"])
        yy, xx = np.mgrid[0:NY, 0:NX].astype(np.float64)
        model = np.zeros_like(img)
        for s in truth:
            c = beam + (cov(s["maj_arcsec"], s["min_arcsec"], s["pa_deg"])
                        if s["maj_arcsec"] > 0 else 0)
            ci = np.linalg.inv(c)
            dx, dy = xx - s["x"], yy - s["y"]
            q = ci[0, 0] * dx * dx + 2 * ci[0, 1] * dx * dy + ci[1, 1] * dy * dy
            model += s["peak"] * np.exp(-0.5 * q)
            area = math.sqrt(np.linalg.det(c) / np.linalg.det(beam))
            check(abs(s["flux"] / (s["peak"] * area) - 1) < 1e-8,
                  "source %d: flux = peak * convolved/beam area" % s["id"])
            # the truth's observed shape is that convolved Gaussian
            co = cov(s["conv_maj_arcsec"], s["conv_min_arcsec"], s["conv_pa_deg"])
            check(np.abs(co - c).max() < 1e-8 * np.trace(c) and 0 <= s["conv_pa_deg"] < 180
                  and s["conv_maj_arcsec"] >= s["conv_min_arcsec"],
                  "source %d: conv_* shape %s vs beam + intrinsic %s" % (s["id"], co, c))

        # bright sources: the pixel nearest each truth position is near its peak
        # (half a pixel off on both axes costs at most ~11% with this beam; any
        # overlapping neighbour only adds, and the model says by how much)
        bright = 0
        for s in truth:
            if s["peak"] < 10 * noise:
                continue
            ix, iy = int(round(s["x"])), int(round(s["y"]))
            v = img[iy, ix]
            bright += 1
            check(0.85 * s["peak"] - 5 * noise < v < model[iy, ix] + 5 * noise,
                  "source %d: pixel %g vs peak %g (model %g)"
                  % (s["id"], v, s["peak"], model[iy, ix]))
        print("bright sources checked:", bright)
        check(bright >= 1, "at least one source with peak >= 10 noise")

        res = img - model
        check(abs(res.std() / noise - 1) < 0.03, "residual rms %g vs noise %g" % (res.std(), noise))
        check(np.abs(res).max() < 5.5 * noise,
              "largest residual %.2f noise" % (np.abs(res).max() / noise))

        correlated_noise(tmp, cov)
    return report()


def correlated_noise(tmp, cov):
    """--noise-corr beam: SIMCORR in the header, rms = SIMNOISE, and neighbours
    correlated as exp(-d'C^-1 d / 4) with C the covariance of the header's beam
    (cov: pixel covariance of a beam for the default 2 arcsec pixels)."""
    cli = os.environ.get("SKYFIND", "")
    if not executable(cli):
        print("note: no $SKYFIND: --noise-corr not checked from outside")
        return
    path = os.path.join(tmp, "corr.fits")
    r = subprocess.run([cli, "simulate", "-q", "--nx", "640", "--ny", "512", "--nsrc", "0",
                        "--beam", "12,6,-50", "--noise-corr", "beam", "-o", path],
                       capture_output=True, text=True)
    check(r.returncode == 0, "simulate --noise-corr beam: rc %d %s" % (r.returncode, r.stderr))
    if r.returncode != 0:
        return
    r2 = subprocess.run([cli, "simulate", "-q", "-n", "8", "--noise-corr", "pink",
                         "-o", os.path.join(tmp, "bad.fits")], capture_output=True, text=True)
    check(r2.returncode == 2 and "noise-corr" in r2.stderr,
          "--noise-corr pink: usage error, rc %d: %s" % (r2.returncode, r2.stderr.strip()))
    with fits.open(path) as hdul:
        hdr = hdul[0].header
        img = hdul[0].data[0, 0].astype(np.float64)
    check(hdr.get("SIMCORR", "").strip() == "BEAM", "SIMCORR = %r" % hdr.get("SIMCORR"))
    noise = float(hdr["SIMNOISE"])
    img -= img.mean()
    var = img.var()
    check(abs(math.sqrt(var) / noise - 1) < 0.03,
          "correlated rms %g vs SIMNOISE %g" % (math.sqrt(var), noise))
    c = cov(hdr["BMAJ"] * 3600, hdr["BMIN"] * 3600, hdr["BPA"])
    ci = np.linalg.inv(c)
    ny, nx = img.shape
    for dx, dy in ((1, 0), (0, 1), (1, 1), (-1, 1), (2, 0), (-2, 2)):
        a = img[0:ny - dy, max(0, -dx):nx - max(0, dx)]
        b = img[dy:ny, max(0, dx):nx + min(0, dx)]
        rho = float(np.mean(a * b) / var)
        d = np.array([dx, dy], dtype=np.float64)
        expect = math.exp(-0.25 * d @ ci @ d)
        check(abs(rho - expect) < 0.05, "correlated noise lag (%d, %d): %.4f vs %.4f"
              % (dx, dy, rho, expect))
        print("correlated noise lag (%+d, %+d): rho %.4f, beam predicts %.4f" % (dx, dy, rho, expect))


def report():
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        rc = main()
    except Exception as e:  # an unexpected error counts as a failure, not a crash
        import traceback
        traceback.print_exc()
        check(False, "unexpected %s: %s" % (type(e).__name__, e))
        rc = report()
    sys.exit(rc)
