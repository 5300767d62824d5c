#!/usr/bin/env bash
# Call K, 2026-12-02, on the H200 host: how often lesson.pipe's first
# window stalls at 16 threads and 4096^2 (call J: 26 ms instead of 2 in two
# runs of three), 20 runs each with libgomp's default wait policy,
# OMP_WAIT_POLICY=passive and GOMP_SPINCOUNT=10000, alternated; each run's
# background phases and the process's wall time. Carry .gpu-bundle.tar.xz
# (call I's).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callK.log
.xb/bin/skyfind_new simulate -q -n 4096 --seed 11 -o /tmp/s.fits
cat /tmp/s.fits >/dev/null
for r in $(seq 20); do
    for v in default passive spin10k; do
        env=""
        [ $v = passive ] && env="OMP_WAIT_POLICY=passive"
        [ $v = spin10k ] && env="GOMP_SPINCOUNT=10000"
        t0=$(date +%s%N)
        p=$(env $env SKYFIND_BKG_PROFILE=1 .xb/bin/skyfind_new run -q -b cpu -p lesson --threads 16 \
            -o /tmp/o /tmp/s.fits 2>&1 | grep -o "first window [0-9.]* ms\|FULL passes [0-9.]* ms" | tr '\n' ' ')
        t1=$(date +%s%N)
        echo "$v wall $(((t1 - t0) / 1000)) us: $p" >>"$LOG"
    done
done
for v in default passive spin10k; do
    echo "$v: first window ms: $(grep "^$v " "$LOG" | grep -o 'first window [0-9.]*' | awk '{print $3}' | sort -n | tr '\n' ' ')"
    echo "$v: wall ms: $(grep "^$v " "$LOG" | awk '{printf "%.1f\n", $3/1000}' | sort -n | tr '\n' ' ')"
done | tee -a "$LOG.summary"
cat "$LOG.summary" >>"$LOG"
