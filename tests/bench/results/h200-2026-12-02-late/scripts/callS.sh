#!/usr/bin/env bash
# Call S, 2026-12-02 (late), on the H200 host: the working tree after
# 1f41817 (measure's strips merged and finished by the threads; the global
# clipping's window binned instead of radix-sorted) against 1f41817, both
# CPU-only. The GPU global-background and measure suites against the new
# twins; test_simd.sh on this host's CPU; `skyfind compare` for lesson and
# sextractor on the real images and the skies; lesson.pipe's background
# phases; old against new at 16 threads; threads.sh, 3 rounds. Carry
# .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90, and
# ../shared/data; .xb: skyfind_old and skyfind_new, CPU-only).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callS.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-300 | tee -a "$LOG"
say "GPU background (global, mesh) and measure suites against the new CPU twins"
SUITES="background measure" tests/gpu/run-all.sh /tmp/ra checks 2>&1 | tee -a "$LOG"
say "test_simd.sh on this host (the CPU-only build)"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -3 | tee -a "$LOG"
say "compare lesson, sextractor"
COMPARE_PIPES="lesson sextractor" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
echo "floor.sh rc=$?" | tee -a "$LOG"
grep -E "AGREE|DISAGREE|real images|sim" /tmp/fl/floor.log | tail -12 | tee -a "$LOG"
cp /tmp/fl/floor.log $O/callS-compare.log 2>/dev/null
say "lesson.pipe's global background phases, fresh runs"
P=/tmp/prof; mkdir -p $P
for n in 4096 8192; do
    .xb/bin/skyfind_new simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
    for b in old new old new; do
        for t in 1 16; do
            echo "-- ${n}^2, $t threads, $b" | tee -a "$LOG"
            SKYFIND_BKG_PROFILE=1 .xb/bin/skyfind_$b run -b cpu -p lesson --threads $t -o $P/o $P/sim$n.fits -v 2>&1 |
                grep -E "profile|background|measure|total" | tee -a "$LOG"
        done
    done
done
say "16 threads: old against new"
THREADS=16 PIPES="lesson sextractor" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callS-cpu-ab-16.md
say "16 cores: threads.sh, round by round, the new CPU-only build"
PIPES="sextractor lesson" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callS-threads.csv
say "done"
