#!/usr/bin/env bash
# Command-line behaviour of skyfind: help and version, exit codes (0 ok,
# 1 runtime failure, 2 usage, 3 pipeline file), clear one-line errors that
# name the file, batches that go on past a bad file, no half-written outputs.
set -u
SKYFIND=${SKYFIND:-build/skyfind}
DATA=${SKYFIND_TEST_DATA:-../shared/data}
PY=/usr/bin/python3
. "$(dirname "$0")/tally.sh" # $T, ok, bad, check
# expect CODE "stderr-substring|" cmd...
expect() {
    local code=$1 want=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"; local rc=$?
    if [ "$rc" != "$code" ]; then bad "$* -> exit $rc, wanted $code; stderr: $(head -c 300 "$T/err")"; return; fi
    if [ -n "$want" ] && ! grep -qF -- "$want" "$T/err" "$T/out"; then
        bad "$* -> output lacks '$want': $(head -c 300 "$T/err")"; return; fi
    ok
}

expect 0 "Usage: skyfind" "$SKYFIND" --help
expect 0 "skyfind 0." "$SKYFIND" --version
expect 2 "Try 'skyfind" "$SKYFIND"
expect 2 "unknown command 'frobnicate'" "$SKYFIND" frobnicate
expect 0 "Usage: skyfind run" "$SKYFIND" run --help
expect 2 "no input FILE" "$SKYFIND" run
expect 2 "--backend must be" "$SKYFIND" run -b tpu x.fits
expect 2 "Try 'skyfind run --help'" "$SKYFIND" run --bogus x.fits
expect 0 "background" "$SKYFIND" stages
expect 2 "give the size" "$SKYFIND" simulate -o "$T/x.fits"

# a sample to work on
expect 0 "" "$SKYFIND" simulate -q -n 300 --ny 200 --nsrc 30 --seed 3 -o "$T/sim.fits"
[ -s "$T/sim.truth.csv" ] && ok || bad "simulate wrote no truth catalogue"
expect 0 "wrote $T/o/sim.cat.csv" "$SKYFIND" run -b cpu -o "$T/o" "$T/sim.fits"
grep -qE '^id,x,y,npix,flux_sum,peak,peak_x,peak_y,x_err,y_err,flux_err,flux_jy,flux_jy_err,snr,bkg,rms,x2,y2,xy,a,b,theta,xmin,xmax,ymin,ymax,npeaks,parent,nchildren,flags,sign,ra,dec,peak_ra,peak_dec,a_arcsec,b_arcsec,pa_deg$' "$T/o/sim.cat.csv" && ok || bad "catalogue header"
grep -q '^# x,y .*1-based FITS pixel' "$T/o/sim.cat.csv" && ok || bad "catalogue pixel-convention comment"
n=$(grep -vc '^#' "$T/o/sim.cat.csv"); [ "$n" -gt 5 ] && ok || bad "only $n catalogue lines"
expect 0 "" "$SKYFIND" run -q -b cpu --save seg,mask -o "$T/o" "$T/sim.fits"
[ -s "$T/o/sim.seg.fits" ] && [ -s "$T/o/sim.mask.fits" ] && ok || bad "--save seg,mask wrote nothing"
$PY - "$T/o/sim.seg.fits" "$T/sim.fits" <<'PY' && ok || bad "segmentation map: type or WCS"
import sys
from astropy.io import fits
from astropy.wcs import WCS
s, i = fits.open(sys.argv[1])[0], fits.open(sys.argv[2])[0]
assert s.data.dtype.kind == 'i' and s.data.dtype.itemsize == 4 and s.data.shape == (200, 300)
assert 'BUNIT' not in s.header and s.header['CTYPE1'] == 'RA---SIN' and 'BMAJ' in s.header
w1, w2 = WCS(s.header, naxis=2), WCS(i.header, naxis=2)
import numpy as np
p = np.array([[10.0, 20.0], [150.0, 99.0]])
assert np.allclose(w1.all_pix2world(p, 0), w2.all_pix2world(p, 0), atol=1e-10, rtol=0)
PY
# catalogue formats and previews through the CLI
expect 0 "" "$SKYFIND" run -q -b cpu --format csv,fits,votable,reg --save png -o "$T/f" "$T/sim.fits"
for x in cat.csv cat.fits cat.vot reg png segmap.png overlay.png; do
    [ -s "$T/f/sim.$x" ] && ok || bad "--format/--save png: no sim.$x"
done
head -1 "$T/f/sim.reg" | grep -q "DS9 version 4.1" && ok || bad "region file header"
expect 2 "--format takes" "$SKYFIND" run -b cpu --format xls -o "$T/f" "$T/sim.fits"
expect 2 "--stretch must be" "$SKYFIND" run -b cpu --stretch log -o "$T/f" "$T/sim.fits"
# JSON report for scripts
expect 0 "" "$SKYFIND" run -q -b cpu --json -o "$T/o" "$T/sim.fits"
$PY -c "import json,sys; L=[json.loads(l) for l in open('$T/out')]; d=L[0]; s=L[-1]['summary']; assert len(L)==2 and d['status']=='ok' and d['nsources']>3 and d['background']['converged'] and s['ok']==1 and s['failed']==0 and s['nsources']==d['nsources']" && ok || bad "--json output"
# --set, and errors in it
expect 0 "" "$SKYFIND" run -q -b cpu --set threshold.nsigma=50 -o "$T/o" "$T/sim.fits"
expect 2 "threshold.nsigma=abc is not a number" "$SKYFIND" run -b cpu --set threshold.nsigma=abc -o "$T/o" "$T/sim.fits"
expect 2 "no stage named 'nosuch'" "$SKYFIND" run -b cpu --set nosuch.x=1 -o "$T/o" "$T/sim.fits"
expect 2 "has no parameter 'bogus'" "$SKYFIND" run -b cpu --set segment.bogus=1 -o "$T/o" "$T/sim.fits"
expect 2 "segment.connectivity=6: choose one of 4|8" "$SKYFIND" run -b cpu --set segment.connectivity=6 -o "$T/o" "$T/sim.fits"
expect 2 "filter" "$SKYFIND" run -b cpu --set background.method=mesh --set background.filter=4 -o "$T/o" "$T/sim.fits"
printf 'background method=mesh filter=2\n' >"$T/bad5.pipe"
expect 3 "$T/bad5.pipe:1:" "$SKYFIND" run -b cpu -p "$T/bad5.pipe" "$T/sim.fits"
expect 0 "" "$SKYFIND" run -q -b cpu --save background,rms -o "$T/m" "$T/sim.fits"
$PY - "$T/m/sim.bkg.fits" "$T/m/sim.rms.fits" <<'PY' && ok || bad "mesh maps: shape or values"
import sys, numpy as np
from astropy.io import fits
b, r = fits.getdata(sys.argv[1]), fits.getdata(sys.argv[2])
assert b.shape == (200, 300) and r.shape == (200, 300)
assert np.isfinite(b).all() and (r > 5e-5).all() and (r < 2e-4).all() and np.ptp(r) > 0
PY
expect 2 "background.kappa=0 is outside" "$SKYFIND" run -b cpu --set background.kappa=0 -o "$T/o" "$T/sim.fits"
# pipeline files: errors as file:line: message, exit 3
printf 'background\n# comment\nthreshold nsigma=5\nsegmnt\n' >"$T/bad1.pipe"
expect 3 "$T/bad1.pipe:4: unknown stage 'segmnt'" "$SKYFIND" run -b cpu -p "$T/bad1.pipe" "$T/sim.fits"
printf 'background\nsegment\n' >"$T/bad2.pipe"
expect 3 "$T/bad2.pipe:2: stage 'segment' needs a mask" "$SKYFIND" run -b cpu -p "$T/bad2.pipe" "$T/sim.fits"
printf 'background kappa\n' >"$T/bad3.pipe"
expect 3 "$T/bad3.pipe:1: 'kappa' is not key=value" "$SKYFIND" run -b cpu -p "$T/bad3.pipe" "$T/sim.fits"
printf 'background maxiter=-4\n' >"$T/bad4.pipe"
expect 3 "$T/bad4.pipe:1: background.maxiter=-4 is outside" "$SKYFIND" run -b cpu -p "$T/bad4.pipe" "$T/sim.fits"
expect 2 "no pipeline named 'nonesuch'" "$SKYFIND" run -b cpu -p nonesuch "$T/sim.fits"

# bad inputs: one-line errors naming the file; the batch goes on; nothing half-written
printf 'this is not FITS at all\n%.0s' {1..200} >"$T/text.fits"
head -c 30000 "$DATA/radio_parkes_1904-66_SIN.fits" >"$T/trunc.fits"
$PY - "$T" <<'PY'
import sys, numpy as np
from astropy.io import fits
t = sys.argv[1]
fits.PrimaryHDU(np.full((40, 30), np.nan, np.float32)).writeto(t + '/allnan.fits')
fits.PrimaryHDU(np.array([[3.5]], np.float32)).writeto(t + '/one.fits')
fits.PrimaryHDU(np.arange(10, dtype=np.float32)).writeto(t + '/oned.fits')
fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([fits.Column(name='a', format='E', array=np.arange(3.0))])]).writeto(t + '/table.fits')
PY
rm -rf "$T/b"
expect 1 "5 of 7 files failed" "$SKYFIND" run -q -b cpu -o "$T/b" "$T/text.fits" "$T/sim.fits" "$T/trunc.fits" "$T/one.fits" "$T/allnan.fits" "$T/oned.fits" "$T/table.fits"
for f in text trunc allnan oned table; do
    grep -q "$T/$f.fits: " "$T/err" && ok || bad "no error line naming $f.fits: $(cat "$T/err")"
done
grep -q "no finite pixels" "$T/err" && ok || bad "all-NaN message"
[ -s "$T/b/sim.cat.csv" ] && [ -s "$T/b/one.cat.csv" ] && ok || bad "good files of a bad batch not processed"
[ -z "$(ls "$T/b" | grep -v -e '\.cat\.csv$' -e '\.comp\.csv$')" ] && ok || bad "left-over files: $(ls "$T/b")"
[ "$(grep -c '' "$T/err")" -le 6 ] && ok || bad "too chatty on errors"
grep -q '^id,' "$T/b/one.cat.csv" && ok || bad "1x1 image catalogue"
# unwritable output folder
mkdir -p "$T/ro" && chmod 555 "$T/ro"
if [ "$(id -u)" != 0 ]; then
    expect 1 "cannot create or write the output folder" "$SKYFIND" run -b cpu -o "$T/ro/x" "$T/sim.fits"
fi
printf 'x' >"$T/afile"
expect 1 "cannot create or write the output folder" "$SKYFIND" run -b cpu -o "$T/afile/sub" "$T/sim.fits"
# a GPU asked for where there is none
if ! "$SKYFIND" compare "$T/sim.fits" >/dev/null 2>&1; then
    expect 1 "no CUDA device" "$SKYFIND" run -b gpu -o "$T/o" "$T/sim.fits"
    expect 0 "running on the CPU" "$SKYFIND" run -b auto -o "$T/o" "$T/sim.fits"
fi
# info
expect 0 "" "$SKYFIND" info "$DATA/radio_vla_nvas_W51_22GHz_114x124x1x1.fits"
grep -qi "beam" "$T/out" && grep -q "2827" "$T/out" && ok || bad "info: beam or NaN count missing: $(cat "$T/out")"
expect 1 "text.fits" "$SKYFIND" info "$T/text.fits"
expect 0 "a cube of 10 planes" "$SKYFIND" run -b cpu -o "$T/o" "$DATA/radio_parkes_1904-66_SIN_cube10.fits"
expect 0 "" "$SKYFIND" run -q -b cpu --plane 10 -o "$T/o" "$DATA/radio_parkes_1904-66_SIN_cube10.fits"
expect 1 "plane" "$SKYFIND" run -b cpu --plane 11 -o "$T/o" "$DATA/radio_parkes_1904-66_SIN_cube10.fits"
# convolve: the filtered image is saved with the input's WCS; kernel errors name the problem
expect 0 "" "$SKYFIND" run -q -b cpu --save filtered -o "$T/cv" "$T/sim.fits"
[ -s "$T/cv/sim.filt.fits" ] && ok || bad "--save filtered wrote no sim.filt.fits"
expect 0 "convolve" "$SKYFIND" run -b cpu -o "$T/cv" "$T/sim.fits"
grep -q "gauss fwhm" "$T/err" && ok || bad "run report lacks the kernel: $(cat "$T/err")"
expect 0 "no beam" "$SKYFIND" run -b cpu -o "$T/cv" "$DATA/optical_dss_100x100.fits.gz"
expect 1 "needs file=PATH" "$SKYFIND" run -b cpu --set convolve.kernel=file -o "$T/cv" "$T/sim.fits"
expect 1 "nosuch.conv" "$SKYFIND" run -b cpu --set convolve.kernel=file --set convolve.file=nosuch.conv -o "$T/cv" "$T/sim.fits"
printf 'CONV NORM\n1 2\n3\n' >"$T/bad.conv"
expect 1 "bad.conv" "$SKYFIND" run -b cpu --set convolve.kernel=file --set "convolve.file=$T/bad.conv" -o "$T/cv" "$T/sim.fits"
expect 2 "convolve.edge=mirror: choose one of" "$SKYFIND" run -b cpu --set convolve.edge=mirror -o "$T/cv" "$T/sim.fits"
expect 2 "outside" "$SKYFIND" run -b cpu --set convolve.fwhm=0 -o "$T/cv" "$T/sim.fits"
expect 1 "flood" "$SKYFIND" run -b cpu --set threshold.flood=9 -o "$T/cv" "$T/sim.fits"
expect 0 "" "$SKYFIND" run -q -b cpu -p sextractor -o "$T/cv" "$DATA/optical_eso_ntt_emmi_256x256_int16_bscale.fits"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
