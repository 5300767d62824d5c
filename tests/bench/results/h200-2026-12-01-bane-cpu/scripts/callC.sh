#!/usr/bin/env bash
# Call C, 2026-12-01, H200 host (16 cores), the final code (8278466 and
# later, docs only): the GPU against the CPU twin of bane again and `skyfind
# compare` of four pipelines; the 16-core scaling of radio, sextractor and
# lesson (tests/bench/threads.sh, the CUDA build's CPU backend); the previous
# main and this build alternated at one thread beside SExtractor
# (tests/bench/cpu-ab.sh; numfmt now writes the catalogues). Carry
# .gpu-bundle.tar.xz (.gpu-bundle: skyfind and test_background_bane, sm_90;
# .xb: the two CPU-only builds and source-extractor).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no
LOG=$O/callC.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "test_background_bane: GPU against the CPU twin"
.gpu-bundle/bin/tests/test_background_bane 2>&1 | tail -2 | tee -a "$LOG"
say "compare radio, aegean, sextractor, lesson"
COMPARE_PIPES="radio aegean sextractor lesson" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
grep -E "real images|sim|passed|FAIL" /tmp/fl/floor.log | tee -a "$LOG"
say "16 cores: radio, sextractor, lesson"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"; cp /tmp/th/threads.csv $O/callC-threads.csv
say "one thread: previous main (old) against the final build (new), and SExtractor"
PIPES="radio sextractor lesson" SEXTRACTOR=.xb/bin/source-extractor \
    tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callC-cpu-ab.md
say "done"
