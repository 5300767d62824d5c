#!/usr/bin/env bash
# Call T, 2026-12-03, on the H200 host: the working tree after 3fba656
# (BANE's CPU twin: median_near's searches by a 16-value window, vector
# counts in middle_small, vector extremes, the pixel-reading nodes in AVX2
# with their median binned over the clipping bounds) against 3fba656, both
# CPU-only. The GPU background suites (bane among them) against the new
# twin; test_simd.sh on this host's CPU; `skyfind compare` for radio and
# aegean on the real images and the skies; BANE's phases in fresh runs;
# old against new at one thread (with SExtractor, harness settings) and at
# 16; threads.sh for radio.pipe, 3 rounds. Carry .gpu-bundle.tar.xz
# (.gpu-bundle: the CUDA build, sm_90, and ../shared/data; .xb:
# skyfind_old and skyfind_new, CPU-only, and source-extractor).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callT.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-300 | tee -a "$LOG"
say "GPU background suites (global, mesh, bane) against the new CPU twins"
SUITES="background background_bane background_mesh" tests/gpu/run-all.sh /tmp/ra checks 2>&1 | tee -a "$LOG"
say "test_simd.sh on this host (the CPU-only build)"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -3 | tee -a "$LOG"
say "compare radio, aegean"
COMPARE_PIPES="radio aegean" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
echo "floor.sh rc=$?" | tee -a "$LOG"
grep -E "AGREE|DISAGREE|real images|sim" /tmp/fl/floor.log | tail -12 | tee -a "$LOG"
cp /tmp/fl/floor.log $O/callT-compare.log 2>/dev/null
say "BANE's phases, fresh runs of radio.pipe"
P=/tmp/prof; mkdir -p $P
for n in 2048 4096; do
    .xb/bin/skyfind_new simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
    for b in old new old new old new; do
        for t in 1 16; do
            echo "-- ${n}^2, $t threads, $b" | tee -a "$LOG"
            SKYFIND_BANE_PROFILE=1 .xb/bin/skyfind_$b run -b cpu -p radio --threads $t -o $P/o $P/sim$n.fits -v 2>&1 |
                grep -E "profile|background|convolve|total" | tee -a "$LOG"
        done
    done
done
say "one thread: old against new, SExtractor (harness settings)"
SEXTRACTOR=.xb/bin/source-extractor SEXWORK=harness PIPES="radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 7 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callT-cpu-ab-1.md
say "16 threads: old against new"
THREADS=16 PIPES="radio aegean" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callT-cpu-ab-16.md
say "16 cores: threads.sh, round by round, the new CPU-only build"
PIPES="radio" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callT-threads.csv
say "done"
