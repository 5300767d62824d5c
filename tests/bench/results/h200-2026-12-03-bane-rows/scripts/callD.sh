#!/usr/bin/env bash
# Call D, 2026-12-03 (stop 56), on the H200 host: the GPU fault tests
# (tests/gpu/faults.sh: out of device memory and sticky errors, with the
# batch engine's fallback to the CPU, which now leaves its maps unmade) and
# the non-finite pixels of both backends (tests/gpu/nonfinite.sh), on the
# final code. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callD.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "tests/gpu/faults.sh"
tests/gpu/faults.sh 2>&1 | tail -15 | tee -a "$LOG"
echo "faults rc=${PIPESTATUS[0]}" | tee -a "$LOG"
say "tests/gpu/nonfinite.sh"
tests/gpu/nonfinite.sh 2>&1 | tail -15 | tee -a "$LOG"
echo "nonfinite rc=${PIPESTATUS[0]}" | tee -a "$LOG"
say "done"
