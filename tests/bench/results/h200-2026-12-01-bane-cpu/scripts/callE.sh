#!/usr/bin/env bash
# Call E, 2026-12-01, H200 host: the final code (393313d: the cell maxima
# taken as the cells are sorted): test_background_bane's GPU cases against
# the CPU twin, `skyfind compare` of radio and aegean, and the previous main
# against this build at one thread beside SExtractor (tests/bench/cpu-ab.sh).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no
LOG=$O/callE.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "test_background_bane: GPU against the CPU twin"
.gpu-bundle/bin/tests/test_background_bane 2>&1 | tail -2 | tee -a "$LOG"
say "compare radio, aegean"
COMPARE_PIPES="radio aegean" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
grep -E "real images|sim|passed|FAIL" /tmp/fl/floor.log | tee -a "$LOG"
say "one thread: previous main (old) against the final build (new), and SExtractor"
PIPES="radio sextractor lesson" SEXTRACTOR=.xb/bin/source-extractor \
    tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callE-cpu-ab.md
say "done"
