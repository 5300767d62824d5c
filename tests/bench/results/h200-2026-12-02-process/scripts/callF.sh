#!/usr/bin/env bash
# Call F, 2026-12-02, on the H200 host: the final code (the first window by
# the threads, the mesh clipping's carried sums) at one thread against old
# (HEAD 2333863), both CPU-only, beside SExtractor (tests/bench/cpu-ab.sh),
# and threads.sh of the three pipelines on the CUDA build's CPU backend.
# Carry .gpu-bundle.tar.xz (call E's: the same skyfind).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callF.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "threads.sh, the CUDA build's CPU backend"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callF-threads.csv
say "old against new, one thread, and SExtractor"
PIPES="radio sextractor lesson" SEXTRACTOR=.xb/bin/source-extractor tests/bench/cpu-ab.sh .xb/bin/skyfind_old \
    .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callF-cpu-ab-1.md
say "done"
