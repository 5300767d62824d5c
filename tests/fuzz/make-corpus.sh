#!/bin/sh
# Seed corpora for the fuzzing harnesses, made from the small real files of
# $SKYFIND_TEST_DATA (default ../shared/data from the repository root) and
# the shipped pipelines/: OUT/fits, OUT/pipe, OUT/kernel; and the FITS
# regression inputs (crashes found and fixed), remade from their edits of the
# data folder's files (tests/fuzz/regressions/remake.py): OUT/regressions/fits.
# Usage: tests/fuzz/make-corpus.sh OUT
set -eu
out=${1:?usage: make-corpus.sh OUT}
src=$(cd "$(dirname "$0")/../.." && pwd)
data=${SKYFIND_TEST_DATA:-$src/../shared/data}
[ -d "$data" ] || { echo "make-corpus.sh: no test data folder $data" >&2; exit 1; }
rm -rf "$out/fits" "$out/pipe" "$out/kernel" "$out/regressions"
mkdir -p "$out/fits" "$out/pipe" "$out/kernel"
n=0
# FITS: every plain or tile-compressed file of at most 100 kB, and the crash
# reproducers of fuzz/ (src/io/fits.c and src/io/wcs.c refuse them now: as seeds
# they keep the fuzzer near those checks, and the replay test runs them)
for f in "$data"/*.fits "$data"/*.fz "$data"/fuzz/*; do
    [ -f "$f" ] || continue
    [ "$(wc -c <"$f")" -le 100000 ] || continue
    cp "$f" "$out/fits/$(basename "$f")"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "make-corpus.sh: no FITS file of at most 100 kB in $data" >&2; exit 1; }
# the corrupt RICE tile that made CFITSIO 4.2.0 read past its buffer (RESULTS.md)
"$src"/tests/fuzz/known/cfitsio-rice-overread.sh "$out/fits/cfitsio-rice-overread.fits"
# the same with ZIMAGE = THEAP..., true for CFITSIO (RESULTS.md crash 6)
"$src"/tests/fuzz/known/cfitsio-rice-overread-theap.sh "$out/fits/cfitsio-rice-overread-theap.fits"
python3 "$src"/tests/fuzz/regressions/remake.py apply "$data" \
    "$src"/tests/fuzz/regressions/fits-edits/*.edits "$out/regressions/fits"
# .pipe: each shipped pipeline, alone and with --set assignments after NULs
i=0
for p in "$src"/pipelines/*.pipe; do
    b=$(basename "$p" .pipe)
    cp "$p" "$out/pipe/$b.pipe"
    for a in threshold.nsigma=3 background.method=global convolve.kernel=gauss \
             segment.min_area=auto measure.subtract=no background.box=64; do
        i=$((i + 1))
        { cat "$p"; printf '\0%s' "$a"; } >"$out/pipe/$b-set$i"
    done
done
# kernels: byte 0 picks the reader (even: .conv text, odd: FITS PSF; bit 1
# normalise, bits 2-3 the method, bits 4-5 the edge mode), then the file
for c in "$src"/pipelines/*.conv; do
    { printf '\000'; cat "$c"; } >"$out/kernel/$(basename "$c")"
done
printf '\000CONV NONORM\n# mexican hat\n-1 -1 -1\n-1 8 -1\n-1 -1 -1\n' >"$out/kernel/hat.conv"
printf '\024CONV\n1 2 1\n2 4 2\n1 2 1\n' >"$out/kernel/g3.conv"
for f in radio_askap_racs_10x10x1x1.fits quirk_2mass_20x21_int16_bscale.fits \
         radio_parkes_small_20x20x1x1.fits quirk_obit_bitpix64_3x2.fits; do
    [ -f "$data/$f" ] || continue
    { printf '\003'; cat "$data/$f"; } >"$out/kernel/n-$f"
    { printf '\065'; cat "$data/$f"; } >"$out/kernel/r-$f"
done
echo "make-corpus.sh: $(ls "$out/fits" | wc -l) FITS, $(ls "$out/pipe" | wc -l) pipe, $(ls "$out/kernel" | wc -l) kernel seeds and $(ls "$out/regressions/fits" | wc -l) FITS regression inputs in $out"
