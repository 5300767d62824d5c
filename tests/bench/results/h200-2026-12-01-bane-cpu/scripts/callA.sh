#!/usr/bin/env bash
# Call A, 2026-12-01, on the H200 host (16 cores): BANE's CPU twin after
# 7268866..: the GPU against the new CPU twin (test_background_bane, skyfind
# compare of radio and aegean), the old and new CPU builds alternated at one
# thread beside SExtractor (tests/bench/cpu-ab.sh), the 16-core scaling of
# radio.pipe (tests/bench/threads.sh) and the benchmark harness with
# SExtractor. Carry .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90;
# .xb: the CPU-only builds of the previous main and of this change, and
# Debian's source-extractor with its libraries).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no
LOG=$O/callA.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "host"; { nproc; nvidia-smi -L; lscpu | grep -E 'Model name|MHz'; } 2>&1 | tee -a "$LOG"
say "test_background_bane: GPU against the CPU twin"
.gpu-bundle/bin/tests/test_background_bane 2>&1 | tail -4 | tee -a "$LOG"
say "compare radio and aegean"
COMPARE_PIPES="radio aegean" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
cat /tmp/fl/floor.log | tee -a "$LOG"
say "one thread: previous main (old) against this change (new), and SExtractor"
PIPES="radio sextractor lesson" SEXTRACTOR=.xb/bin/source-extractor \
    tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callA-cpu-ab.md
PIPES=radio tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab2 8192 3 2>&1 | tee -a "$LOG"
cp /tmp/ab2/cpu-ab.md $O/callA-cpu-ab-8192.md
say "16 cores: radio.pipe, the CUDA build's CPU backend"
PIPES=radio tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 3 >/dev/null 2>&1
cat /tmp/th/threads.md | tee -a "$LOG"; cp /tmp/th/threads.csv $O/callA-threads.csv
say "harness, one thread, SExtractor"
PATH=$PWD/.xb/bin:$PATH OMP_NUM_THREADS=1 timeout 200 python3 tests/bench/harness.py --build .gpu-bundle/bin \
    --sizes 2048,4096 --peers sextractor --threads 1 --out /tmp/h 2>&1 | tail -45 | tee -a "$LOG"
cp /tmp/h/results.md $O/callA-harness.md 2>/dev/null
say "done"
