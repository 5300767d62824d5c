#!/usr/bin/env bash
# Call A, 2026-12-02 (afternoon), on the H200 host (16 Xeon cores): where a
# CPU run's time goes that does not shrink with threads. The fixed cost of
# a process (`--version`, a 64x64 image) with OpenMP's default wait policy
# and with OMP_WAIT_POLICY=passive; the global background's phases
# (SKYFIND_BKG_PROFILE) and the mesh's (SKYFIND_MESH_PROFILE) at 1 and 16
# threads; the sampled first window gathered and sorted by the threads
# (old: HEAD 2333863, CPU-only; new: this tree, CPU-only) at 1 and 16
# threads beside each other (tests/bench/cpu-ab.sh); the GPU's global and
# mesh suites against the new CPU twin; threads.sh for lesson and sextractor
# with and without the passive policy. Carry .gpu-bundle.tar.xz (.gpu-bundle:
# the CUDA build, sm_90; .xb: the two CPU-only builds and their libraries).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no
LOG=$O/callA.log
S=.gpu-bundle/bin/skyfind
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
# the mean wall time of N runs of a command, in ms
wall() {
    local n=$1; shift
    local t0 t1
    t0=$(date +%s%N)
    for _ in $(seq "$n"); do "$@" >/dev/null 2>&1; done
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.2f\n", (b - a) / 1e6 / n }'
}
say "host"
{ nproc; nvidia-smi -L; lscpu | grep -E 'Model name|MHz|Thread|NUMA node'; } 2>&1 | tee -a "$LOG"
say "fixed cost of a process, mean of 40 (ms)"
$S simulate -q -n 64 --seed 1 -o /tmp/tiny.fits
for rep in 1 2; do
    {
        echo "true: $(wall 40 /bin/true)"
        echo "cuda build --version: $(wall 40 $S --version)"
        echo "cpu build --version: $(wall 40 .xb/bin/skyfind_new --version)"
        for pol in default passive; do
            e=X=1
            [ $pol = passive ] && e=OMP_WAIT_POLICY=passive
            for t in 1 16; do
                echo "cuda build run 64x64 lesson, $t threads, $pol: $(wall 40 env $e $S run -q -b cpu -p lesson --threads $t -o /tmp/ot /tmp/tiny.fits)"
                echo "cpu build run 64x64 lesson, $t threads, $pol: $(wall 40 env $e .xb/bin/skyfind_new run -q -b cpu -p lesson --threads $t -o /tmp/ot /tmp/tiny.fits)"
            done
        done
    } 2>&1 | tee -a "$LOG"
done
say "phases at 4096^2, fresh processes (-v and the profiles)"
$S simulate -q -n 4096 --seed 11 -o /tmp/sim4096.fits
cat /tmp/sim4096.fits >/dev/null
for pol in default passive; do
    e=X=1
    [ $pol = passive ] && e=OMP_WAIT_POLICY=passive
    for p in lesson sextractor; do
        for t in 16 1; do
            for r in 1 2 3 4 5; do
                t0=$(date +%s%N)
                env $e SKYFIND_BKG_PROFILE=1 SKYFIND_MESH_PROFILE=1 $S run -v -b cpu -p $p --threads $t -o /tmp/o4 /tmp/sim4096.fits >/tmp/v.txt 2>&1
                t1=$(date +%s%N)
                echo "$p $t threads $pol run $r: wall $(((t1 - t0) / 1000)) us" | tee -a "$LOG"
                grep -E "profile|^  (background|convolve|threshold|segment|deblend|measure|total)|phases|start-up" /tmp/v.txt | sed 's/^/    /' >>"$LOG"
            done
        done
    done
done
say "Check suites: the GPU against the new CPU twin"
for t in background background_mesh; do
    printf '%s: ' "$t" | tee -a "$LOG"
    .gpu-bundle/bin/tests/test_$t 2>&1 | grep -E "^[0-9]+%|Checks" | tail -1 | tee -a "$LOG"
done
say "old against new, 16 threads"
THREADS=16 PIPES="lesson sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new \
    /tmp/ab16 "4096 8192" 7 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callA-cpu-ab-16.md
say "old against new, one thread"
PIPES="lesson" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callA-cpu-ab-1.md
say "threads.sh, the CUDA build's CPU backend, default policy"
PIPES="sextractor lesson" tests/bench/threads.sh $S /tmp/th "4096" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callA-threads-default.csv
say "threads.sh, OMP_WAIT_POLICY=passive"
OMP_WAIT_POLICY=passive PIPES="sextractor lesson" tests/bench/threads.sh $S /tmp/thp "4096" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/thp/threads.md | tee -a "$LOG"
cp /tmp/thp/threads.csv $O/callA-threads-passive.csv
say "done"
