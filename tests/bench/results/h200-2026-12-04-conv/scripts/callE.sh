#!/usr/bin/env bash
# Call E, 2026-12-04 (stop 57), on the H200 host: the final build (dd53ea5)
# once more. The suites whose CPU twins changed (CUDA build, GPU against
# them); compute-sanitizer memcheck and racecheck on whole GPU runs;
# catalogues against the previous main (e3d2337) at 1 and 16 threads and
# against the GPU; threads.sh for radio and lesson with 5 rounds; skyfind
# compare of the four pipelines. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callE.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
X=.xb/bin
P=/tmp/prof; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "suites (CUDA build): convolve, background"
for t in convolve background; do
    s=$(date +%s)
    CK_FORK=no timeout 400 $B/tests/test_$t 2>&1 | grep -E "^[0-9]+%|SKIP|test_.*\.c:[0-9]+" | head -8 | sed "s/^/$t: /" | tee -a "$LOG"
    echo "$t rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s" | tee -a "$LOG"
done
say "compute-sanitizer on whole GPU runs"
for a in "-p radio --save all" "-p lesson --save all" "-p sextractor"; do
    compute-sanitizer --tool memcheck --error-exitcode 9 $B/skyfind run -q -b gpu $a -o $P/ms \
        $SKYFIND_TEST_DATA/radio_parkes_1904-66_SIN.fits $P/sim2048.fits 2>&1 | grep -E "SUMMARY" | tee -a "$LOG"
    echo "memcheck $a rc=${PIPESTATUS[0]}" | tee -a "$LOG"
done
compute-sanitizer --tool racecheck --error-exitcode 9 $B/skyfind run -q -b gpu -p radio -o $P/rc $P/sim2048.fits 2>&1 | grep -E "SUMMARY" | tee -a "$LOG"
echo "racecheck radio rc=${PIPESTATUS[0]}" | tee -a "$LOG"
say "catalogues: old against new (1 and 16 threads), new CPU against GPU"
for p in lesson radio sextractor aegean; do
    for n in 2048 4096 8192; do
        $X/skyfind_old run -q -b cpu -p $p -o $P/c_old $P/sim$n.fits
        $X/skyfind_new run -q -b cpu -p $p --threads 1 -o $P/c_new1 $P/sim$n.fits
        $X/skyfind_new run -q -b cpu -p $p -o $P/c_new $P/sim$n.fits
        $B/skyfind run -q -b gpu -p $p -o $P/c_gpu $P/sim$n.fits
        r=""
        for w in new1 new; do
            cmp -s $P/c_old/sim$n.cat.csv $P/c_$w/sim$n.cat.csv && r="$r $w same" || r="$r $w DIFFER"
        done
        cmp -s <(grep -v '^#' $P/c_new/sim$n.cat.csv) <(grep -v '^#' $P/c_gpu/sim$n.cat.csv) && r="$r, gpu rows same" || r="$r, gpu rows DIFFER"
        echo "$p sim$n against old:$r ($(grep -vc '^#' $P/c_new/sim$n.cat.csv) lines)" | tee -a "$LOG"
    done
done
say "16 cores: threads.sh radio lesson, 5 rounds, the new CPU-only build"
PIPES="radio lesson" tests/bench/threads.sh $X/skyfind_new /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callE-threads.csv
say "skyfind compare: the four pipelines, real images and skies"
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
