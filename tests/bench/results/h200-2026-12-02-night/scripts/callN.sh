#!/usr/bin/env bash
# Call N, 2026-12-02 (night), on the H200 host: HEAD 8818acc (measure's
# second pass over the listed pixels) against f981983, both CPU-only. The
# global background's phases of lesson.pipe at 1 and 16 threads
# (SKYFIND_BKG_PROFILE=1, 3 fresh runs each, 4096^2 and 8192^2); old against
# new at 16 and at 1 thread (cpu-ab.sh); threads.sh round by round, 5 rounds,
# on the CUDA build's CPU backend; the GPU measure suite against the new twin
# and `skyfind compare` of the four pipelines on the real images and the
# skies. Carry .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90, and
# ../shared/data; .xb: skyfind_old and skyfind_new, CPU-only).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callN.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "GPU measure suite against the new CPU twin"
SUITES="measure" tests/gpu/run-all.sh /tmp/ra checks 2>&1 | tee -a "$LOG"
say "compare lesson, sextractor, radio, aegean"
COMPARE_PIPES="lesson sextractor radio aegean" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
echo "floor.sh rc=$?" | tee -a "$LOG"
grep -E "AGREE|DISAGREE|real images|sim" /tmp/fl/floor.log | tail -24 | tee -a "$LOG"
cp /tmp/fl/floor.log $O/callN-compare.log 2>/dev/null
say "lesson.pipe's global background phases, fresh runs"
P=/tmp/prof; mkdir -p $P
for n in 4096 8192; do
    .xb/bin/skyfind_new simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
    for t in 1 16 1 16 1 16; do
        echo "-- ${n}^2, $t threads" | tee -a "$LOG"
        SKYFIND_BKG_PROFILE=1 .xb/bin/skyfind_new run -b cpu -p lesson --threads $t -o $P/o $P/sim$n.fits 2>&1 |
            grep -E "profile|background|threshold|segment|measure|total" | tee -a "$LOG"
    done
done
say "16 threads: old against new"
THREADS=16 PIPES="lesson sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 7 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callN-cpu-ab-16.md
say "1 thread: old against new"
PIPES="lesson sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callN-cpu-ab-1.md
say "16 cores: threads.sh, round by round, the CUDA build's CPU backend"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callN-threads.csv
say "done"
