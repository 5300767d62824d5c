#!/usr/bin/env bash
# Call P, 2026-12-02 (night), on the H200 host: the CUDA build of c38a081
# (no GPU file changed since e84d441; the CPU twins of deblend, measure and
# the global background did). compute-sanitizer memcheck and racecheck on
# the GPU cases of the measure, deblend, segment and background suites
# (quick sizes) and on whole GPU runs of radio, sextractor and lesson (a
# 512^2 sky with 20 blended pairs, every check image). Carry
# .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90, and ../shared/data).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callP.log
SAN_SUITES="measure deblend segment background" SAN_RUNS="radio sextractor lesson" \
    SANITIZER_TOOLS="memcheck racecheck" SAN_JOBS=8 SAN_TIMEOUT=400 \
    tests/gpu/run-all.sh /tmp/ra sanitizer 2>&1 | tee -a "$LOG"
echo "run-all.sh sanitizer rc=${PIPESTATUS[0]}" | tee -a "$LOG"
