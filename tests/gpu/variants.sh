#!/usr/bin/env bash
# Same bits from two GPU code paths: run skyfind on the GPU with environment
# A and with environment B (developer switches such as SKYFIND_CONV_RB=0,
# which takes an older kernel), saving check images, and cmp every output.
#   . .gpu-bundle/env.sh && tests/gpu/variants.sh OUT "A" "B" [IMAGE...]
# A and B: space-separated NAME=VALUE lists ("" for none). Images default
# to the shared FITS images (not the REF_ outputs) and the simulated skies
# in OUT/work (sim*.fits, made by floor.sh). Each run: every pipeline in
# VARIANT_PIPES (default radio), and for the convolution the direct method
# with rotated Gaussians of every padded width (3x3 to 15x15 taps), with
# --save filtered,mask,seg,background,rms. Prints one line per setting and
# exits 1 if any file differs.
set -u
OUTDIR=${1:?usage: variants.sh OUT A B [IMAGE...]}
A=$2
B=$3
shift 3
BIN=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}/bin
W=$OUTDIR/variants
mkdir -p "$W"
LOG=$OUTDIR/variants.log
if [ $# -gt 0 ]; then
    imgs=("$@")
else
    imgs=()
    for f in "${SKYFIND_TEST_DATA:?}"/*.fits "$OUTDIR"/work/sim*.fits; do
        case $f in *REF_*) ;; *) [ -f "$f" ] && imgs+=("$f") ;; esac
    done
fi
settings=()
for p in ${VARIANT_PIPES:-radio}; do settings+=("-p $p"); done
for f in 1 2 3.5 5; do
    settings+=("-p radio --set convolve.kernel=gauss --set convolve.fwhm=$f --set convolve.fwhm_min=$(awk -v f=$f 'BEGIN{print f*0.7}') --set convolve.pa=30 --set convolve.method=direct")
done
fail=0
for s in "${settings[@]}"; do
    for v in A B; do
        if [ $v = A ]; then e=$A; else e=$B; fi
        rm -rf "$W/$v"
        # shellcheck disable=SC2086
        env $e "$BIN/skyfind" run -q -b gpu $s --save filtered,mask,seg,background,rms -o "$W/$v" \
            "${imgs[@]}" >"$W/$v.log" 2>&1
    done
    n=0
    bad=0
    for f in $(cd "$W/A" && find . -type f -name '*.fits' -o -type f -name '*.csv'); do
        n=$((n + 1))
        cmp -s "$W/A/$f" "$W/B/$f" || { bad=$((bad + 1)); echo "  differs: $f" | tee -a "$LOG"; }
    done
    nb=$(cd "$W/B" && find . -type f \( -name '*.fits' -o -name '*.csv' \) | wc -l)
    [ "$nb" = "$n" ] || { bad=$((bad + 1)); echo "  file counts differ: $n against $nb" | tee -a "$LOG"; }
    printf '%-120s %d files, %d differ\n' "$s" "$n" "$bad" | tee -a "$LOG"
    [ $bad = 0 ] || fail=1
done
rm -rf "$W/A" "$W/B"
exit $fail
