#!/usr/bin/env bash
# Call C, 2026-12-03 (stop 55), on the H200 host: the final code (two
# column blocks up to 15 columns, the knob of call B gone). The convolve
# suite (CUDA build) and its CPU case in each build, memcheck and racecheck
# on its GPU case, test_simd.sh, radio.pipe's filtered images and catalogue
# rows on both backends, the 15x15 beam's times (sf_convolve_tool, CPU-only
# build) and threads.sh for radio.pipe. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callC.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
say "convolve suite (CUDA build), and its CPU case in each build"
CK_FORK=no $B/tests/test_convolve 2>&1 | grep -E "^[0-9]+%|gpu direct|direct 2-D|test_convolve.c" | tee -a "$LOG"
for lv in avx2 0; do
    SKYFIND_SIMD=$lv CK_RUN_CASE=cpu CK_FORK=no $B/tests/test_convolve 2>&1 | grep -E "^[0-9]+%|direct 2-D|test_convolve.c" | tee -a "$LOG"
done
for tool in memcheck racecheck; do
    SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu CK_FORK=no compute-sanitizer --tool $tool --error-exitcode 9 \
        $B/tests/test_convolve 2>&1 | grep -E "SUMMARY|^[0-9]+%|gpu direct" | tee -a "$LOG"
    echo "$tool rc=${PIPESTATUS[0]}" | tee -a "$LOG"
done
say "test_simd.sh (the CPU-only build)"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -2 | tee -a "$LOG"
P=/tmp/prof; mkdir -p $P
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "radio.pipe on both backends"
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
say "15x15 beam, sf_convolve_tool (CPU-only), median of 7, two rounds"
for r in 1 2; do
    for n in 2048 4096; do
        for th in 1 16; do
            for m in direct fft; do
                .xb/bin/tool_b --fits $P/sim$n.fits --kernel gauss:5,3.5,30,15 --method $m --threads $th --nan 0 --repeat 7 2>&1 |
                    tail -1 | sed "s/^/round $r $n t$th $m: /" | tee -a "$LOG"
            done
        done
    done
done
say "16 cores: threads.sh radio, 3 rounds"
PIPES="radio" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callC-threads.csv
say "done"
