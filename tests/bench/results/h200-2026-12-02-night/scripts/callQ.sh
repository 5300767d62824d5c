#!/usr/bin/env bash
# Call Q, 2026-12-02 (night), on the H200 host: af18a61 (the global
# background's EDGE rule and lane reduction written once: a refactor of
# b914679). The GPU global-background suite against the CPU twin, its GPU
# cases under memcheck, test_simd.sh on this host's CPU (CPU-only build),
# `skyfind compare -p lesson` on the real images and the skies. Carry
# .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build and ../shared/data; .xb:
# skyfind_new, CPU-only).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callQ.log
SUITES="background" SAN_SUITES="background" SAN_RUNS="lesson" SANITIZER_TOOLS="memcheck" SAN_JOBS=2 \
    tests/gpu/run-all.sh /tmp/ra suites 2>&1 | tee -a "$LOG"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -2 | tee -a "$LOG"
COMPARE_PIPES="lesson" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
echo "floor.sh rc=$?" | tee -a "$LOG"
grep -E "AGREE|DISAGREE|real images|sim" /tmp/fl/floor.log | tail -6 | tee -a "$LOG"
