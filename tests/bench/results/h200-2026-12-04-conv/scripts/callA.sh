#!/usr/bin/env bash
# Call A, 2026-12-04 (stop 57), on the H200 host: the CPU's general 2-D
# direct convolution with up to four output rows' chains side by side over
# each input vector (cpu/convolve_fma.c), against the previous main
# (e3d2337, skyfind_old). The band kernels alone (bench2: old and new
# object files in one binary, AVX-512 and AVX2 + FMA, bits compared); the
# CUDA build's test_convolve (CPU and GPU cases); catalogues by build
# (AVX-512, AVX2 + FMA, baseline) and backend; one thread old/new beside
# SExtractor; 16 threads old/new; threads.sh for radio.pipe; skyfind compare
# of radio, aegean and sextractor. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callA.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
X=.xb/bin
P=/tmp/prof; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*avx512f.*/Flags: ... avx512f .../' | tee -a "$LOG"
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "band kernels alone, one thread, 2048^2: old and new, median (lowest) of 9"
for simd in default avx2; do
    for k in "3 3" "5 5" "7 7" "9 9" "11 11" "15 15" "15 9" "21 21" "27 27" "31 31"; do
        if [ $simd = default ]; then $X/bench2 2048 $k 9; else SKYFIND_SIMD=avx2 $X/bench2 2048 $k 9; fi | sed "s/^/$simd /" | tee -a "$LOG"
    done
done
$X/bench2 4096 15 15 5 | sed "s/^/default /" | tee -a "$LOG"
say "test_convolve (CUDA build: CPU and GPU cases)"
s=$(date +%s)
CK_FORK=no timeout 400 $B/tests/test_convolve 2>&1 | grep -E "^[0-9]+%|SKIP|test_.*\.c:[0-9]+" | head -8 | tee -a "$LOG"
echo "test_convolve rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s" | tee -a "$LOG"
say "catalogues: old, new (AVX-512, AVX2 + FMA, baseline), GPU"
for p in radio sextractor aegean; do
    for n in 2048 4096; do
        $X/skyfind_old run -q -b cpu -p $p -o $P/c_old $P/sim$n.fits
        $X/skyfind_new run -q -b cpu -p $p -o $P/c_new $P/sim$n.fits
        SKYFIND_SIMD=avx2 $X/skyfind_new run -q -b cpu -p $p -o $P/c_avx2 $P/sim$n.fits
        SKYFIND_SIMD=0 $X/skyfind_new run -q -b cpu -p $p -o $P/c_base $P/sim$n.fits
        $B/skyfind run -q -b gpu -p $p -o $P/c_gpu $P/sim$n.fits
        r=""
        for w in new avx2 base; do
            cmp -s $P/c_old/sim$n.cat.csv $P/c_$w/sim$n.cat.csv && r="$r $w same" || r="$r $w DIFFER"
        done
        cmp -s <(grep -v '^#' $P/c_new/sim$n.cat.csv) <(grep -v '^#' $P/c_gpu/sim$n.cat.csv) && r="$r, gpu rows same" || r="$r, gpu rows DIFFER"
        echo "$p sim$n against old:$r ($(grep -vc '^#' $P/c_new/sim$n.cat.csv) lines)" | tee -a "$LOG"
    done
done
say "one thread: old against new, SExtractor (harness settings)"
SEXTRACTOR=$X/source-extractor SEXWORK=harness PIPES="radio" tests/bench/cpu-ab.sh $X/skyfind_old $X/skyfind_new /tmp/ab1 "2048 4096" 5 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; cat /tmp/ab1/cpu-ab.md | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callA-cpu-ab-1.md
say "16 threads: old against new"
THREADS=16 PIPES="radio" tests/bench/cpu-ab.sh $X/skyfind_old $X/skyfind_new /tmp/ab16 "4096 8192" 7 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; cat /tmp/ab16/cpu-ab.md | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callA-cpu-ab-16.md
say "16 cores: threads.sh radio, 5 rounds, the new CPU-only build"
PIPES="radio" tests/bench/threads.sh $X/skyfind_new /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callA-threads.csv
say "skyfind compare: radio, aegean, sextractor on the real images and skies"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in radio aegean sextractor; do
    $B/skyfind compare -q -p $p --json $real >$P/cmp_$p.json 2>$P/cmp_$p.err; rc=$?
    echo "real images, $p: rc=$rc, $(grep -c '"agree":true' $P/cmp_$p.json) agree, $(grep -c '"agree":false' $P/cmp_$p.json) disagree" | tee -a "$LOG"
    for n in 2048 4096; do
        $B/skyfind compare -p $p $P/sim$n.fits >$P/cmp_$n.txt 2>&1; rc=$?
        echo "sim$n $p: rc=$rc $(grep -E 'result' $P/cmp_$n.txt | tr -s ' ')" | tee -a "$LOG"
    done
done
say "done"
