#!/usr/bin/env bash
# Call C, 2026-12-03 (stop 56), on the H200 host: the final code (3e74dca).
# Where a 16-thread run of lesson.pipe and sextractor.pipe spends its
# stages (SKYFIND_BKG_PROFILE, SKYFIND_MESH_PROFILE, SKYFIND_BANE_PROFILE:
# the background stages' phases), and threads.sh for the three pipelines
# with 5 rounds. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callC.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
S=.xb/bin/skyfind_new
P=/tmp/prof; mkdir -p $P
for n in 4096 8192; do
    $S simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "phases at 1 and 16 threads, 5 runs each (the last three shown)"
for p in lesson sextractor radio; do
    for n in 4096 8192; do
        for t in 1 16; do
            for r in 1 2 3 4 5; do
                SKYFIND_BKG_PROFILE=1 SKYFIND_MESH_PROFILE=1 SKYFIND_BANE_PROFILE=1 \
                    $S run -b cpu -p $p --threads $t -v -o $P/o $P/sim$n.fits >$P/v.txt 2>&1
                [ $r -ge 3 ] && grep -E "profile|^  [a-z]+ +[0-9.]+ ms|total|phases" $P/v.txt |
                    sed 's/  */ /g' | tr '\n' '|' | sed "s/^/$p $n t$t: /" | tee -a "$LOG" && echo | tee -a "$LOG"
            done
        done
    done
done
say "16 cores: threads.sh radio sextractor lesson, 5 rounds"
PIPES="radio sextractor lesson" tests/bench/threads.sh $S /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callC-threads.csv
say "done"
