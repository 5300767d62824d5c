#!/usr/bin/env bash
# Call A, 2026-12-02, on the H200 host (16 Xeon cores): the CPU twins' AVX2
# loops (c7e2794, src/calc/simd.h). On the host: that they give the same
# bytes as the baseline (tests/cli/test_simd.sh on the CPU-only build), the
# GPU against the CPU twins whose loops changed (the Check suites of
# background, mesh, BANE, convolve, decode and threshold, CUDA build),
# `skyfind compare` of the four pipelines, the baseline against AVX2 at one
# thread beside SExtractor (tests/bench/cpu-ab.sh: SKYFIND_SIMD=0 against
# the default, the same binary) and the 16-core scaling of every pipeline
# (tests/bench/threads.sh, the CUDA build's CPU backend). Carry
# .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90; .xb: the CPU-only
# build, its SKYFIND_SIMD=0 wrapper, Debian's source-extractor and their
# libraries).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no
LOG=$O/callA.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "host"
{ nproc; nvidia-smi -L; lscpu | grep -E 'Model name|MHz'; grep -m1 -ow avx2 /proc/cpuinfo; } 2>&1 | tee -a "$LOG"
say "test_simd.sh: AVX2 against the baseline, byte for byte"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -6 | tee -a "$LOG"
SKYFIND=.gpu-bundle/bin/skyfind bash tests/cli/test_simd.sh 2>&1 | tail -3 | tee -a "$LOG"
say "Check suites: the GPU against the CPU twins"
for t in background background_mesh background_bane convolve decode threshold; do
    printf '%s: ' "$t" | tee -a "$LOG"
    .gpu-bundle/bin/tests/test_$t 2>&1 | grep -E "^[0-9]+%|Checks" | tail -1 | tee -a "$LOG"
done
say "compare: radio aegean sextractor lesson"
COMPARE_PIPES="radio aegean sextractor lesson" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
grep -E "real images|sim|passed|FAIL|AGREE|DISAGREE" /tmp/fl/floor.log | tail -40 | tee -a "$LOG"
say "one thread: baseline (old) against AVX2 (new), and SExtractor"
PIPES="radio sextractor lesson" SEXTRACTOR=.xb/bin/source-extractor \
    tests/bench/cpu-ab.sh .xb/bin/skyfind_base .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 7 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callA-cpu-ab.md
say "16 threads: baseline against AVX2"
THREADS=16 PIPES="radio sextractor lesson" tests/bench/cpu-ab.sh .xb/bin/skyfind_base .xb/bin/skyfind_new \
    /tmp/ab16 "4096 8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callA-cpu-ab-16.md
say "threads.sh, the CUDA build's CPU backend"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callA-threads.csv
say "done"
