#!/usr/bin/env bash
# Call B, 2026-12-03 (stop 55), on the H200 host: why the library's AVX-512
# 2-D sums took twice the prototype's time here in call A. sf_convolve_tool
# of call A's code (tool_a: the rows' sums in a float block of the stack's
# own alignment) against this code (tool_b: the block 64-byte aligned; the
# AVX2 build's input in registers up to 15 columns) and the prototype
# (convh: the same chains over a padded image, tests/bench/results/
# h200-2026-12-03-fma/proto/convh.c), one and two column blocks at 15
# columns; radio.pipe's catalogues on both backends without their comment
# lines; old (b1cf9c3) against new at one thread beside SExtractor;
# threads.sh for radio.pipe; skyfind compare of radio and aegean on the real
# images and three skies. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callB.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
P=/tmp/prof; mkdir -p $P
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "15x15 at 2048^2 and 4096^2: tool_a, tool_b, the prototype (rounds alternated, median of 7 each)"
ker=gauss:5,3.5,30,15
for r in 1 2; do
    for n in 2048 4096; do
        for th in 1 16; do
            for t in tool_a tool_b; do
                for e in SKYFIND_X= SKYFIND_CONV2D_NB2=15 SKYFIND_SIMD=avx2; do
                    env $e .xb/bin/$t --fits $P/sim$n.fits --kernel $ker --method direct --threads $th --nan 0 --repeat 7 2>&1 |
                        tail -1 | sed "s/^/round $r $n t$th $t $e: /" | tee -a "$LOG"
                done
            done
            [ $th = 1 ] && .xb/bin/convh $n 15 | sed "s/^/round $r $n t1 proto /" | tee -a "$LOG"
        done
    done
done
for k in 9 21; do
    ker=gauss:$(python3 -c "print($k/3.0)"),$(python3 -c "print($k/4.5)"),30,$k
    for m in direct fft; do
        .xb/bin/tool_b --fits $P/sim2048.fits --kernel $ker --method $m --threads 1 --nan 0 --repeat 7 2>&1 |
            tail -1 | sed "s/^/2048 k$k t1 tool_b $m: /" | tee -a "$LOG"
    done
done
say "radio.pipe on both backends: catalogues without their comment lines"
for n in 2048 4096 8192; do
    for b in cpu gpu; do
        $B/skyfind run -q -b $b -p radio --save filtered -o $P/rb_$b $P/sim$n.fits
    done
    cmp -s $P/rb_cpu/sim$n.filt.fits $P/rb_gpu/sim$n.filt.fits && r=same || r=DIFFER
    echo "sim$n filtered image cpu vs gpu: $r" | tee -a "$LOG"
    for x in cat.csv comp.csv; do
        cmp -s <(grep -v '^#' $P/rb_cpu/sim$n.$x) <(grep -v '^#' $P/rb_gpu/sim$n.$x) && r=same || r=DIFFER
        echo "sim$n $x cpu vs gpu (rows): $r, $(grep -vc '^#' $P/rb_cpu/sim$n.$x) lines" | tee -a "$LOG"
    done
done
say "one thread: old (b1cf9c3) against new, SExtractor (harness settings)"
SEXTRACTOR=.xb/bin/source-extractor SEXWORK=harness PIPES="radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callB-cpu-ab-1.md
say "16 cores: threads.sh radio, 3 rounds, the new CPU-only build"
PIPES="radio" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callB-threads.csv
say "skyfind compare: radio and aegean, real images and skies"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in radio aegean; do
    $B/skyfind compare -q -p $p --json $real >$P/cmp_$p.json 2>$P/cmp_$p.err; rc=$?
    echo "real images, $p: rc=$rc, $(grep -c '"agree":true' $P/cmp_$p.json) agree, $(grep -c '"agree":false' $P/cmp_$p.json) disagree" | tee -a "$LOG"
    for n in 2048 4096 8192; do
        $B/skyfind compare -p $p $P/sim$n.fits >$P/cmp_$n.txt 2>&1; rc=$?
        echo "sim$n $p: rc=$rc $(grep -E 'result' $P/cmp_$n.txt | tr -s ' ')" | tee -a "$LOG"
    done
done
say "done"
