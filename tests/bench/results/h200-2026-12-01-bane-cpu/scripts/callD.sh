#!/usr/bin/env bash
# Call D, 2026-12-01, H200 host (16 cores): one image on the CPU backend
# run on the calling thread (0a1a056) against the engine's threads
# (8278466), both CPU-only builds, at 16 threads and at one
# (tests/bench/cpu-ab.sh, five rounds); then the 16-core scaling of the
# three pipelines with the final CUDA build (tests/bench/threads.sh).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
LOG=$O/callD.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "16 threads: engine threads (old) against the calling thread (new)"
THREADS=16 PIPES="radio sextractor lesson" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callD-cpu-ab-16.md
say "1 thread: the same"
THREADS=1 PIPES="sextractor lesson" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callD-cpu-ab-1.md
say "threads.sh, the final CUDA build"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"; cp /tmp/th/threads.csv $O/callD-threads.csv
say "done"
