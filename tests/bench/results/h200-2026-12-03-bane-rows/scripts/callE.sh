#!/usr/bin/env bash
# Call E, 2026-12-03 (stop 56), on the H200 host: the review's final build
# (3028048): the suites whose code changed (GPU against the CPU twins,
# test_background quick), compute-sanitizer memcheck and racecheck on whole
# GPU runs and racecheck on the threshold and measure cases, the CPU's and
# GPU's maps and catalogue rows, skyfind compare of the four pipelines.
# Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callE.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
P=/tmp/prof; mkdir -p $P
for n in 1024 2048 4096; do $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; done
PK=$SKYFIND_TEST_DATA/radio_parkes_1904-66_SIN.fits
say "suites (CUDA build)"
for t in background_mesh background_bane threshold measure deblend fit background; do
    q=; [ $t = background ] && q=1
    SKYFIND_TEST_QUICK=$q CK_FORK=no timeout 120 $B/tests/test_$t 2>&1 | grep -E "^[0-9]+%|test_.*\.c:[0-9]+" | head -5 | sed "s/^/$t: /" | tee -a "$LOG"
    echo "$t rc=${PIPESTATUS[0]}" | tee -a "$LOG"
done
say "compute-sanitizer on whole GPU runs"
for tool in memcheck racecheck; do
    for a in "-p radio --save all" "-p sextractor --save all" "-p aegean" "-p sextractor --set threshold.sign=both"; do
        timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/skyfind run -q -b gpu $a -o $P/san $PK $P/sim1024.fits 2>&1 |
            grep -E "SUMMARY" | sed "s/^/$tool $a: /" | tee -a "$LOG"
        echo "$tool $a rc=${PIPESTATUS[0]}" | tee -a "$LOG"
    done
done
for t in threshold measure; do
    SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu CK_FORK=no timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
        $B/tests/test_$t 2>&1 | grep -E "SUMMARY|^[0-9]+%" | sed "s/^/racecheck test_$t: /" | tee -a "$LOG"
    echo "racecheck test_$t rc=${PIPESTATUS[0]}" | tee -a "$LOG"
done
say "CPU and GPU: maps and catalogue rows"
for p in sextractor radio; do
    for n in 2048 4096; do
        for b in cpu gpu; do $B/skyfind run -q -b $b -p $p --save background,rms -o $P/rb_${p}_$b $P/sim$n.fits; done
        r=""
        for x in bkg.fits rms.fits; do cmp -s $P/rb_${p}_cpu/sim$n.$x $P/rb_${p}_gpu/sim$n.$x && r="$r $x same" || r="$r $x DIFFER"; done
        for x in cat.csv comp.csv; do
            [ -f $P/rb_${p}_cpu/sim$n.$x ] || continue
            cmp -s <(grep -v '^#' $P/rb_${p}_cpu/sim$n.$x) <(grep -v '^#' $P/rb_${p}_gpu/sim$n.$x) && r="$r, $x rows same" || r="$r, $x rows DIFFER"
        done
        echo "$p sim$n:$r" | tee -a "$LOG"
    done
done
say "skyfind compare: real images and two skies"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in sextractor lesson radio aegean; do
    $B/skyfind compare -q -p $p --json $real >$P/cmp_$p.json 2>$P/cmp_$p.err; rc=$?
    echo "real images, $p: rc=$rc, $(grep -c '"agree":true' $P/cmp_$p.json) agree, $(grep -c '"agree":false' $P/cmp_$p.json) disagree" | tee -a "$LOG"
    for n in 2048 4096; do
        $B/skyfind compare -p $p $P/sim$n.fits >$P/cmp_$n.txt 2>&1; rc=$?
        echo "sim$n $p: rc=$rc $(grep -E 'result' $P/cmp_$n.txt | tr -s ' ')" | tee -a "$LOG"
    done
done
say "done"
