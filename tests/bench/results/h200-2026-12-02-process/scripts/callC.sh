#!/usr/bin/env bash
# Call C, 2026-12-02, on the H200 host: compute-sanitizer racecheck on the
# bane suite's GPU cases, its comparisons split between 8 processes run side
# by side (SKYFIND_TEST_PART, tests/sftest.h; tests/gpu/run-all.sh's
# SAN_PARTS), which one process had not finished in 540 s; then `skyfind
# compare -p lesson` of the simulated 2048^2 and 4096^2 skies, which call B
# lost to its fault tests' filling of the GPU's memory beside them. Carry
# .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callC.log
S=.gpu-bundle/bin/skyfind
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "racecheck, background_bane, 8 parts"
SAN_SUITES=background_bane SANITIZER_TOOLS=racecheck SAN_RUNS="" SAN_JOBS=8 SAN_PARTS=8 SAN_TIMEOUT=430 \
    tests/gpu/run-all.sh /tmp/san sanitizer 2>&1 | tee -a "$LOG"
for f in /tmp/san/work/san_background_bane_racecheck_*.log; do
    echo "--- $f" >>"$LOG"
    grep -E "RACECHECK SUMMARY|^[0-9]+%|hazard" "$f" >>"$LOG"
done
say "compare -p lesson, simulated 2048^2 and 4096^2"
for n in 2048 4096; do
    $S simulate -q -n $n --seed $n -o /tmp/sim$n.fits
    $S compare -p lesson /tmp/sim$n.fits 2>&1 | tail -3 | tee -a "$LOG"
done
say "done"
