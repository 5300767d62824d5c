#!/usr/bin/env bash
# The CPU twins' AVX2 loops (src/calc/simd.h) give the same bits as the
# baseline build: every pipeline on a crowded simulated sky with blank
# (NaN) pixels and on real images of the shared data (BITPIX -32, int16
# with BSCALE, tile-compressed), run with the AVX2 copies and with
# SKYFIND_SIMD=0, writes the same catalogues, component tables and
# background, rms, filtered and segmentation images, byte for byte; also a
# direct (not FFT) convolution, a wide general kernel (the 2-D direct sums'
# copy without registers), the mesh background's bilinear maps and a
# second thread count. On a CPU with AVX-512 a third run with
# SKYFIND_SIMD=avx2 (the 2-D direct sums' AVX2 + FMA build) must give the
# same bytes too. The verbose report names the build that ran.
# Skipped (77) on a CPU without AVX2, where both runs are the baseline.
set -u
SKYFIND=${SKYFIND:-build/skyfind}
DATA=${SKYFIND_TEST_DATA:-}
. "$(dirname "$0")/tally.sh" # $T, ok, bad, check

if ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    echo "SKIP: this CPU has no AVX2, so both runs would be the baseline build"
    exit 77
fi
"$SKYFIND" simulate -q --nx 700 --ny 520 --nsrc 300 --pairs 40 --seed 9 -o "$T/sky.fits" ||
    { echo "simulate failed"; exit 1; }
# blank a block and a few lines (a NaN footprint for the convolution and
# the maps) with Python's standard library only: float32 big-endian data
python3 - "$T/sky.fits" <<'EOF' || { echo "blanking failed"; exit 1; }
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
hdr = 0
while True:  # the header's end: the END card, then the block's padding
    card = b[hdr:hdr + 80]
    hdr += 80
    if card[:8] == b"END     ":
        break
start = (hdr + 2879) // 2880 * 2880
nan = struct.pack(">f", float("nan"))
nx, ny = 700, 520
for y in range(100, 140):
    for x in range(200, 260):
        o = start + 4 * (y * nx + x)
        b[o:o + 4] = nan
for x in range(nx):
    o = start + 4 * (300 * nx + x)
    b[o:o + 4] = nan
open(p, "wb").write(bytes(b))
EOF

inputs=("$T/sky.fits")
if [ -n "$DATA" ] && [ -d "$DATA" ]; then
    for f in radio_parkes_1904-66_SIN.fits radio_atca_scorpio_s17_1000x1000.fits \
             optical_eso_ntt_emmi_256x256_int16_bscale.fits optical_ngc1316_440x300_RICE_tilecompressed.fits; do
        [ -f "$DATA/$f" ] && inputs+=("$DATA/$f")
    done
fi
echo "inputs: ${#inputs[@]}"

# the build the default run takes, and whether SKYFIND_SIMD=avx2 is another
has512=0
grep -qw avx512f /proc/cpuinfo && grep -qw fma /proc/cpuinfo && has512=1
builds="base"
[ $has512 = 1 ] && builds="base avx2"
echo "builds compared with the default: $builds"

run_both() { # name, then skyfind run's options
    local name=$1
    shift
    for f in "${inputs[@]}"; do
        local stem
        stem=$(basename "$f" .fits)
        "$SKYFIND" run -q -b cpu "$@" --save seg,background,rms,filtered -o "$T/$name-avx2" "$f" ||
            bad "$name on $stem: exit $?"
        SKYFIND_SIMD=0 "$SKYFIND" run -q -b cpu "$@" --save seg,background,rms,filtered \
            -o "$T/$name-base" "$f" || bad "$name on $stem (SKYFIND_SIMD=0): exit $?"
        if [ $has512 = 1 ]; then
            SKYFIND_SIMD=avx2 "$SKYFIND" run -q -b cpu "$@" --save seg,background,rms,filtered \
                -o "$T/$name-avx2fma" "$f" || bad "$name on $stem (SKYFIND_SIMD=avx2): exit $?"
        fi
    done
    local n=0
    for g in "$T/$name-avx2"/*; do
        b=$(basename "$g")
        n=$((n + 1))
        if cmp -s "$g" "$T/$name-base/$b"; then ok; else bad "$name: $b differs between the default build and baseline"; fi
        if [ $has512 = 1 ]; then
            if cmp -s "$g" "$T/$name-avx2fma/$b"; then ok; else bad "$name: $b differs between avx512 and SKYFIND_SIMD=avx2"; fi
        fi
    done
    [ "$n" -ge $((2 * ${#inputs[@]})) ] && ok || bad "$name: only $n outputs"
}

for p in radio aegean sextractor lesson; do
    run_both "$p" -p "$p" --threads 1
done
run_both radio-t3 -p radio --threads 3
run_both direct -p sextractor --threads 2 --set convolve.method=direct
run_both beam-direct -p radio --threads 1 --set convolve.kernel=beam --set convolve.method=direct
run_both wide-direct -p radio --threads 2 --set convolve.kernel=gauss --set convolve.fwhm=10 \
    --set convolve.fwhm_min=5 --set convolve.pa=40 --set convolve.size=31 --set convolve.method=direct
run_both bilinear -p sextractor --threads 1 --set background.interp=bilinear
[ "$(wc -l <"$T/radio-avx2/sky.cat.csv")" -gt 100 ] && ok || bad "radio: too few sources on the sky to mean anything"

# the global clipping (lesson.pipe's background: its FULL and EDGE passes
# have AVX2 copies of their own) on awkward value distributions, rows of
# odd length (701): rounded Gaussian noise (ties), two values (the window
# overflows its regions), +0 and -0 mixed, an exponential (a skewed
# distribution: many iterations). Standard library only: float32
# big-endian data after a minimal header.
python3 - "$T" <<'EOF' || { echo "writing the clipping images failed"; exit 1; }
import random, struct, sys
rng = random.Random(7)
nx, ny = 701, 333
make = {
    "ties": lambda: float(round(rng.gauss(0, 3))),
    "two": lambda: rng.choice((1.0, 2.0)),
    "zeros": lambda: rng.choice((0.0, -0.0)),
    "skew": lambda: rng.expovariate(1.0),
}
for name, f in make.items():
    cards = ["SIMPLE  =                    T", "BITPIX  =                  -32", "NAXIS   =                    2",
             "NAXIS1  = %20d" % nx, "NAXIS2  = %20d" % ny, "END"]
    h = "".join(c.ljust(80) for c in cards)
    h += " " * (-len(h) % 2880)
    d = struct.pack(">%df" % (nx * ny), *[f() for _ in range(nx * ny)])
    d += b"\0" * (-len(d) % 2880)
    open("%s/clip_%s.fits" % (sys.argv[1], name), "wb").write(h.encode() + d)
EOF
for f in "$T"/clip_*.fits; do
    stem=$(basename "$f" .fits)
    for t in 1 3; do
        "$SKYFIND" run -q -b cpu -p lesson --threads $t --json -o "$T/clip-avx2" "$f" >"$T/clip-avx2.json" ||
            bad "lesson on $stem: exit $?"
        SKYFIND_SIMD=0 "$SKYFIND" run -q -b cpu -p lesson --threads $t --json -o "$T/clip-base" "$f" \
            >"$T/clip-base.json" || bad "lesson on $stem (SKYFIND_SIMD=0): exit $?"
        a=$(grep -o '"background":{[^}]*}' "$T/clip-avx2.json")
        b=$(grep -o '"background":{[^}]*}' "$T/clip-base.json")
        [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "lesson on $stem, $t threads: $a against $b"
        cmp -s <(grep -v '^# skyfind' "$T/clip-avx2/$stem.cat.csv") <(grep -v '^# skyfind' "$T/clip-base/$stem.cat.csv") &&
            ok || bad "lesson on $stem, $t threads: the catalogues differ"
    done
done

# the verbose report says which build ran
want=avx2
grep -qw fma /proc/cpuinfo && want=avx2+fma
[ $has512 = 1 ] && want=avx512
"$SKYFIND" run -b cpu -v -o "$T/v" "$T/sky.fits" 2>"$T/err" >/dev/null
grep -qF "backend cpu ($want)" "$T/err" && ok || bad "verbose report (want $want): $(head -1 "$T/err")"
if [ $has512 = 1 ]; then
    SKYFIND_SIMD=avx2 "$SKYFIND" run -b cpu -v -o "$T/v" "$T/sky.fits" 2>"$T/err" >/dev/null
    grep -qF "backend cpu (avx2+fma)" "$T/err" && ok || bad "verbose report, SKYFIND_SIMD=avx2: $(head -1 "$T/err")"
fi
SKYFIND_SIMD=0 "$SKYFIND" run -b cpu -v -o "$T/v" "$T/sky.fits" 2>"$T/err" >/dev/null
grep -q "backend cpu (baseline)" "$T/err" && ok || bad "verbose report, SKYFIND_SIMD=0: $(head -1 "$T/err")"

echo "simd: $pass passed, $fail failed"
[ $fail = 0 ]
