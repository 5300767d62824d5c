#!/usr/bin/env bash
# Call G, 2026-12-04 (stop 57), on the H200 host: the final code (50d6026:
# one copy of the band kernel) on the device. test_convolve (CUDA build: the
# CPU case's 780 convolutions against fmaf in AVX-512, the GPU case GPU
# against CPU); catalogues of radio and aegean against the previous main
# (e3d2337) with AVX-512, AVX2 + FMA and the baseline, and against the GPU;
# skyfind compare of radio and aegean. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callG.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
X=.xb/bin
P=/tmp/prof; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "test_convolve (CUDA build)"
s=$(date +%s)
CK_FORK=no timeout 400 $B/tests/test_convolve 2>&1 | grep -E "^[0-9]+%|SKIP|test_.*\.c:[0-9]+" | head -8 | tee -a "$LOG"
echo "test_convolve rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s" | tee -a "$LOG"
say "catalogues: old, new (AVX-512, AVX2 + FMA, baseline; 1 and 16 threads), GPU"
for p in radio aegean; do
    for n in 2048 4096 8192; do
        $X/skyfind_old run -q -b cpu -p $p -o $P/c_old $P/sim$n.fits
        $X/skyfind_new run -q -b cpu -p $p -o $P/c_new $P/sim$n.fits
        $X/skyfind_new run -q -b cpu -p $p --threads 1 -o $P/c_new1 $P/sim$n.fits
        SKYFIND_SIMD=avx2 $X/skyfind_new run -q -b cpu -p $p -o $P/c_avx2 $P/sim$n.fits
        SKYFIND_SIMD=0 $X/skyfind_new run -q -b cpu -p $p -o $P/c_base $P/sim$n.fits
        $B/skyfind run -q -b gpu -p $p -o $P/c_gpu $P/sim$n.fits
        r=""
        for w in new new1 avx2 base; do
            cmp -s $P/c_old/sim$n.cat.csv $P/c_$w/sim$n.cat.csv && r="$r $w same" || r="$r $w DIFFER"
        done
        cmp -s <(grep -v '^#' $P/c_new/sim$n.cat.csv) <(grep -v '^#' $P/c_gpu/sim$n.cat.csv) && r="$r, gpu rows same" || r="$r, gpu rows DIFFER"
        echo "$p sim$n against old:$r ($(grep -vc '^#' $P/c_new/sim$n.cat.csv) lines)" | tee -a "$LOG"
    done
done
say "one thread and 16 threads: old against new, radio"
PIPES="radio" tests/bench/cpu-ab.sh $X/skyfind_old $X/skyfind_new /tmp/ab1 "2048 4096" 5 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; grep -E "wall|convolve" /tmp/ab1/cpu-ab.md | tee -a "$LOG"
THREADS=16 PIPES="radio" tests/bench/cpu-ab.sh $X/skyfind_old $X/skyfind_new /tmp/ab16 "4096 8192" 5 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; grep -E "wall|convolve" /tmp/ab16/cpu-ab.md | tee -a "$LOG"
say "skyfind compare: radio, aegean on the real images and skies"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in radio aegean; do
    $B/skyfind compare -q -p $p --json $real >$P/cmp_$p.json 2>$P/cmp_$p.err; rc=$?
    echo "real images, $p: rc=$rc, $(grep -c '"agree":true' $P/cmp_$p.json) agree, $(grep -c '"agree":false' $P/cmp_$p.json) disagree" | tee -a "$LOG"
    for n in 2048 4096; do
        $B/skyfind compare -p $p $P/sim$n.fits >$P/cmp_$n.txt 2>&1; rc=$?
        echo "sim$n $p: rc=$rc $(grep -E 'result' $P/cmp_$n.txt | tr -s ' ')" | tee -a "$LOG"
    done
done
say "done"
