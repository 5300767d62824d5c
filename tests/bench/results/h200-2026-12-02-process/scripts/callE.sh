#!/usr/bin/env bash
# Call E, 2026-12-02, on the H200 host: the mesh background's backguess
# with its two moment sums carried from pass to pass (src/calc/
# background_mesh.h, sf_bkg_range_sums) in place of their prefix arrays.
# The GPU's mesh suite against the new CPU twin, `skyfind compare -p
# sextractor` (real images and skies), and old (HEAD 2333863) against new
# (this tree), both CPU-only, at one thread beside SExtractor and at 16
# threads (tests/bench/cpu-ab.sh). Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callE.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "test_background_mesh (GPU against the CPU twin)"
.gpu-bundle/bin/tests/test_background_mesh 2>&1 | grep -E "^[0-9]+%|Checks|SKIP" | tee -a "$LOG"
say "compare -p sextractor"
COMPARE_PIPES="sextractor" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
grep -E "real images|sim|AGREE|DISAGREE" /tmp/fl/floor.log | tail -8 | tee -a "$LOG"
say "old against new, one thread, and SExtractor"
PIPES="sextractor" SEXTRACTOR=.xb/bin/source-extractor tests/bench/cpu-ab.sh .xb/bin/skyfind_old \
    .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 7 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callE-cpu-ab-1.md
say "old against new, 16 threads"
THREADS=16 PIPES="sextractor" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new \
    /tmp/ab16 "4096 8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callE-cpu-ab-16.md
say "done"
