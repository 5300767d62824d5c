#!/usr/bin/env bash
# Call J, 2026-12-02, on the H200 host: where lesson.pipe's and
# sextractor.pipe's background stages spend their time at 1 to 16 threads
# (the developer knobs SKYFIND_BKG_PROFILE=1, method=global's phases, and
# SKYFIND_MESH_PROFILE=1, the mesh's), 4096^2 and 8192^2, three runs each,
# alternated. Carry .gpu-bundle.tar.xz (call I's).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callJ.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
for n in 4096 8192; do
    .xb/bin/skyfind_new simulate -q -n $n --seed 11 -o /tmp/s$n.fits
    cat /tmp/s$n.fits >/dev/null
    say "lesson.pipe's global background, $n^2"
    for r in 1 2 3; do for t in 1 2 4 8 16; do
        SKYFIND_BKG_PROFILE=1 .xb/bin/skyfind_new run -q -b cpu -p lesson --threads $t -o /tmp/o /tmp/s$n.fits 2>&1 |
            grep "background profile" | tee -a "$LOG"
    done; done
    say "sextractor.pipe's mesh background, $n^2"
    for r in 1 2 3; do for t in 1 16; do
        SKYFIND_MESH_PROFILE=1 .xb/bin/skyfind_new run -q -b cpu -p sextractor --threads $t -o /tmp/o /tmp/s$n.fits 2>&1 |
            grep -i "profile" | tee -a "$LOG"
    done; done
done
say "done"
