#!/usr/bin/env bash
# Call V, 2026-12-03 (stop 54), on the H200 host: where lesson.pipe's
# global background spends its first window at 16 threads
# (SKYFIND_BKG_PROFILE=1 now splits it into the samples' gather and sort),
# and the same with SKYFIND_BKG_FIRST_THREADS=1, 4, 8 (16 is the default),
# fresh processes alternated, 4096^2 and 8192^2; the same runs with
# OMP_WAIT_POLICY=active for the cost of waking the team. Carry .xb
# (skyfind_new: the CPU-only build of the working tree).
set -u
O=${OUT:-/tmp/out}
. .xb/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callV.log
P=/tmp/prof; mkdir -p $P
for n in 4096 8192; do
    .xb/bin/skyfind_new simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
for n in 4096 8192; do
    for r in 1 2 3 4 5 6 7; do
        for ft in 16 8 4 1 active; do
            if [ $ft = active ]; then e="OMP_WAIT_POLICY=active"; f=16; else e="X=1"; f=$ft; fi
            t0=$(date +%s%N)
            out=$(env $e SKYFIND_BKG_FIRST_THREADS=$f SKYFIND_BKG_PROFILE=1 .xb/bin/skyfind_new run -b cpu -p lesson --threads 16 -o $P/o $P/sim$n.fits -v 2>&1)
            t1=$(date +%s%N)
            echo "$n $ft wall $(((t1 - t0) / 1000)) us | $(echo "$out" | grep -E 'profile' | sed 's/background profile: //') | $(echo "$out" | grep -E '^  background' | awk '{print $2}')" | tee -a $LOG
        done
    done
done
echo "--- one thread" | tee -a $LOG
for n in 4096 8192; do for r in 1 2 3; do
    SKYFIND_BKG_PROFILE=1 .xb/bin/skyfind_new run -b cpu -p lesson --threads 1 -o $P/o $P/sim$n.fits -v 2>&1 | grep profile | tee -a $LOG
done; done
echo done | tee -a $LOG
