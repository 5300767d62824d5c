#!/usr/bin/env bash
# Call D, 2026-12-03 (stop 55), on the H200 host: the review (f73e6b5; the
# float-rows limit one constant of both twins). The convolve suite (CUDA
# build), memcheck on its GPU case, radio.pipe's filtered images and rows on
# both backends. Carry .gpu-bundle.tar.xz (.gpu-bundle: skyfind,
# test_convolve, sm_90, ../shared/data).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callD.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
say "convolve suite"
CK_FORK=no $B/tests/test_convolve 2>&1 | grep -E "^[0-9]+%|gpu direct|direct 2-D|test_convolve.c" | tee -a "$LOG"
SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu CK_FORK=no compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/tests/test_convolve 2>&1 | grep -E "SUMMARY|^[0-9]+%" | tee -a "$LOG"
echo "memcheck rc=${PIPESTATUS[0]}" | tee -a "$LOG"
say "radio.pipe on both backends"
P=/tmp/prof; mkdir -p $P
for n in 2048 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits
    for b in cpu gpu; do $B/skyfind run -q -b $b -p radio --save filtered -o $P/rb_$b $P/sim$n.fits; done
    cmp -s $P/rb_cpu/sim$n.filt.fits $P/rb_gpu/sim$n.filt.fits && r=same || r=DIFFER
    cmp -s <(grep -v '^#' $P/rb_cpu/sim$n.cat.csv) <(grep -v '^#' $P/rb_gpu/sim$n.cat.csv) && c=same || c=DIFFER
    echo "sim$n filtered image cpu vs gpu: $r; catalogue rows: $c" | tee -a "$LOG"
done
say "done"
