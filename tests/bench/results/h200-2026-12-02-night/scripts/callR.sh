#!/usr/bin/env bash
# Call R, 2026-12-02 (night), on the H200 host: 08d1071 (review mends:
# sf_uf_join_root, the deblend's db_scale, measure's list carrying label and
# value). The GPU measure, deblend and segment suites against the mended CPU
# twins; test_simd.sh on the host's CPU (CPU-only build). Carry
# .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callR.log
SUITES="measure deblend segment" SUITE_JOBS=3 tests/gpu/run-all.sh /tmp/ra checks 2>&1 | tee -a "$LOG"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -1 | tee -a "$LOG"
