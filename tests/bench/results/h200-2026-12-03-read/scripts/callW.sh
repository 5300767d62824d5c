#!/usr/bin/env bash
# Call W, 2026-12-03 (stop 54), on the H200 host: edce6b7 (the first
# window's sample keys sorted on one thread, radix_sort_serial) against
# 566f191, both CPU-only. The GPU background suite (global, the CPU twin
# of edce6b7); the first window's phases at 16 threads and at one, fresh
# processes alternated; old against new at 16 threads and at one;
# threads.sh for lesson.pipe, 3 rounds. Carry .gpu-bundle.tar.xz
# (.gpu-bundle: skyfind and test_background, CUDA, sm_90, ../shared/data;
# .xb: skyfind_old, skyfind_new).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callW.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "GPU background suite (global) against the new CPU twin"
(SUITES="background" tests/gpu/run-all.sh /tmp/ra checks 2>&1 | tee -a "$LOG") &
sleep 1
P=/tmp/prof; mkdir -p $P
for n in 4096 8192; do
    .xb/bin/skyfind_new simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
wait
say "the first window's phases, fresh runs"
for n in 4096 8192; do for t in 16 1; do for r in 1 2 3 4 5; do for b in old new; do
    echo "$n $t $b $(SKYFIND_BKG_PROFILE=1 .xb/bin/skyfind_$b run -b cpu -p lesson --threads $t -o $P/o $P/sim$n.fits -v 2>&1 | grep -o 'first window.*sort [0-9.]*)')" | tee -a "$LOG"
done; done; done; done
say "16 threads: old against new"
THREADS=16 PIPES="lesson" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 7 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callW-cpu-ab-16.md
say "one thread: old against new"
PIPES="lesson" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callW-cpu-ab-1.md
say "threads.sh, lesson.pipe, the new build"
PIPES="lesson" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callW-threads.csv
say "done"
