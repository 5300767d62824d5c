#!/usr/bin/env bash
# Call L, 2026-12-02, on the H200 host: the tool with the static libgomp and
# its 10000-round spin (a15e5db) against the one before (b74b24b, the shared
# libgomp's 300000 rounds), both CUDA builds on their CPU backend: lesson.pipe
# and sextractor.pipe at 4096^2 and 16 threads, 20 runs each, alternated
# (each run's wall time); threads.sh of the new build (5 rounds); its GPU
# and CPU catalogues side by side. Carry .gpu-bundle.tar.xz (.gpu-bundle:
# the new CUDA build; .xb: skyfind_gpu_old, the previous CUDA build).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callL.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
NEW=.gpu-bundle/bin/skyfind OLD=.xb/bin/skyfind_gpu_old
$NEW simulate -q -n 4096 --seed 11 -o /tmp/s.fits
cat /tmp/s.fits >/dev/null
say "20 runs each at 16 threads, alternated: old (shared libgomp) and new (static, 10000 spins)"
for p in lesson sextractor; do
    for r in $(seq 20); do for b in old new; do
        x=$OLD; [ $b = new ] && x=$NEW
        t0=$(date +%s%N)
        $x run -q -b cpu -p $p --threads 16 -o /tmp/o$b /tmp/s.fits
        t1=$(date +%s%N)
        echo "$p $b $(((t1 - t0) / 1000))" >>/tmp/runs.txt
    done; done
    cmp -s /tmp/oold/s.cat.csv /tmp/onew/s.cat.csv && echo "$p: catalogues same" | tee -a "$LOG"
    for b in old new; do
        echo "$p $b wall ms: $(awk -v p=$p -v b=$b '$1 == p && $2 == b {printf "%.1f\n", $3 / 1000}' /tmp/runs.txt | sort -n | tr '\n' ' ')" | tee -a "$LOG"
    done
done
say "the new build's GPU and CPU catalogues (radio.pipe, 2048^2)"
$NEW simulate -q -n 2048 --seed 3 -o /tmp/g.fits
for b in cpu gpu; do $NEW run -q -b $b -o /tmp/g$b /tmp/g.fits; done
for f in g.cat.csv g.comp.csv; do
    diff <(tail -n +2 /tmp/gcpu/$f) <(tail -n +2 /tmp/ggpu/$f) >/dev/null && r=same || r=DIFFERENT
    echo "$f: cpu and gpu $r past the first line" | tee -a "$LOG"
done
say "threads.sh, the new build, round by round"
PIPES="radio sextractor lesson" tests/bench/threads.sh $NEW /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callL-threads.csv
say "done"
