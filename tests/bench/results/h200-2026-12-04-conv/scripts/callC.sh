#!/usr/bin/env bash
# Call C, 2026-12-04 (stop 57), on the H200 host: the two changes of this
# stop together (3300edc: the convolution's row groups and the global
# clipping's first window by rank selection) against the previous main
# (e3d2337, skyfind_old), CPU-only builds; the CUDA build for the suites
# and skyfind compare. The host's cores; the suites whose CPU twins changed
# (GPU against them); catalogues by build and backend; the first window's
# time at 1 and 16 threads; one thread old/new beside SExtractor; 16
# threads old/new; threads.sh for the three pipelines with 5 rounds;
# skyfind compare. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callC.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
X=.xb/bin
P=/tmp/prof; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L3|Hypervisor" | tee -a "$LOG"
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "suites (CUDA build): background, convolve"
for t in background convolve; do
    s=$(date +%s)
    CK_FORK=no timeout 400 $B/tests/test_$t 2>&1 | grep -E "^[0-9]+%|SKIP|test_.*\.c:[0-9]+" | head -8 | sed "s/^/$t: /" | tee -a "$LOG"
    echo "$t rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s" | tee -a "$LOG"
done
say "catalogues: old against new (1 and 16 threads), new CPU against GPU"
for p in lesson radio sextractor; do
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
say "the global clipping's first window (SKYFIND_BKG_PROFILE), lesson.pipe 4096^2, alternated"
for t in 1 16; do
    for r in 1 2 3 4 5; do
        for w in old new; do
            SKYFIND_BKG_PROFILE=1 $X/skyfind_$w run -q -b cpu -p lesson --threads $t -o $P/bp_$w $P/sim4096.fits 2>&1 |
                grep -o "first window.*FULL passes [0-9.]* ms" | sed "s/^/$w $t threads: /" | tee -a "$LOG"
        done
    done
done
say "one thread: old against new, SExtractor (harness settings)"
SEXTRACTOR=$X/source-extractor SEXWORK=harness PIPES="radio lesson sextractor" tests/bench/cpu-ab.sh $X/skyfind_old $X/skyfind_new /tmp/ab1 "2048 4096" 5 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; cat /tmp/ab1/cpu-ab.md | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callC-cpu-ab-1.md
say "16 threads: old against new"
THREADS=16 PIPES="radio lesson" tests/bench/cpu-ab.sh $X/skyfind_old $X/skyfind_new /tmp/ab16 "4096 8192" 7 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; cat /tmp/ab16/cpu-ab.md | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callC-cpu-ab-16.md
say "16 cores: threads.sh radio sextractor lesson, 5 rounds, the new CPU-only build"
PIPES="radio sextractor lesson" tests/bench/threads.sh $X/skyfind_new /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callC-threads.csv
say "skyfind compare: lesson and radio on the real images and skies"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in lesson radio; do
    $B/skyfind compare -q -p $p --json $real >$P/cmp_$p.json 2>$P/cmp_$p.err; rc=$?
    echo "real images, $p: rc=$rc, $(grep -c '"agree":true' $P/cmp_$p.json) agree, $(grep -c '"agree":false' $P/cmp_$p.json) disagree" | tee -a "$LOG"
    for n in 2048 4096 8192; do
        $B/skyfind compare -p $p $P/sim$n.fits >$P/cmp_$n.txt 2>&1; rc=$?
        echo "sim$n $p: rc=$rc $(grep -E 'result' $P/cmp_$n.txt | tr -s ' ')" | tee -a "$LOG"
    done
done
say "done"
