#!/usr/bin/env bash
# Call B, 2026-12-02, on the H200 host (16 Xeon cores): the reader's and the
# writer's parallel loops on plain threads (src/io/parfor.h) in place of
# OpenMP teams, and the first window sorted by the threads. old: HEAD
# 2333863, new: this tree, both CPU-only (.xb/bin/skyfind_old, _new), at 16
# threads and at one (tests/bench/cpu-ab.sh, beside SExtractor); the fixed
# cost of a process on a 64x64 image; threads.sh of the three pipelines
# (the CUDA build's CPU backend); every Check suite, the fault tests and
# `skyfind compare` of lesson, sextractor and radio (the CUDA build, whose
# reads go through the same code). Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callB.log
S=.gpu-bundle/bin/skyfind
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
wall() {
    local n=$1; shift
    local t0 t1
    t0=$(date +%s%N)
    for _ in $(seq "$n"); do "$@" >/dev/null 2>&1; done
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.2f\n", (b - a) / 1e6 / n }'
}
say "fixed cost of a process on a 64x64 image, mean of 40 (ms)"
$S simulate -q -n 64 --seed 1 -o /tmp/tiny.fits
for rep in 1 2; do
    for b in old new; do
        for t in 1 16; do
            echo "$b run 64x64 lesson, $t threads: $(wall 40 .xb/bin/skyfind_$b run -q -b cpu -p lesson --threads $t -o /tmp/ot /tmp/tiny.fits)" | tee -a "$LOG"
        done
    done
done
say "old against new, 16 threads"
THREADS=16 PIPES="lesson sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new \
    /tmp/ab16 "4096 8192" 7 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callB-cpu-ab-16.md
say "old against new, one thread, and SExtractor"
PIPES="lesson sextractor" SEXTRACTOR=.xb/bin/source-extractor tests/bench/cpu-ab.sh .xb/bin/skyfind_old \
    .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callB-cpu-ab-1.md
say "threads.sh, the CUDA build's CPU backend"
PIPES="radio sextractor lesson" tests/bench/threads.sh $S /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callB-threads.csv
say "Check suites (GPU against the CPU twins), the fault tests and compare, side by side"
SUITES="background background_mesh fits decode" tests/gpu/run-all.sh /tmp/g checks >$O/callB-checks.log 2>&1 &
tests/gpu/run-all.sh /tmp/gf faults >$O/callB-faults.log 2>&1 &
COMPARE_PIPES="lesson sextractor radio" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1 &
wait
grep -E "rc=|failed" $O/callB-checks.log | tee -a "$LOG"
tail -15 $O/callB-faults.log | tee -a "$LOG"
grep -E "real images|sim|passed|FAIL|AGREE|DISAGREE" /tmp/fl/floor.log | tail -30 | tee -a "$LOG"
say "done"
