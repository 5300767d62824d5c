#!/usr/bin/env bash
# Call D (2026-11-29): the final GPU code: every Check suite against the CPU
# twins, then compute-sanitizer memcheck and racecheck on the bane and fit
# suites (quick sizes) and whole radio and sextractor runs.
set -u
L=$OUT/callD.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
t0=$(date +%s)
SUITE_JOBS=8 timeout 330 tests/gpu/run-all.sh /tmp/ra checks > /tmp/ra.out 2>&1
echo "run-all checks rc=$? $(( $(date +%s) - t0 ))s" | tee -a $L
grep -E "rc=|ALL PASSED|FAIL" /tmp/ra.out | head -30 | tee -a $L
t0=$(date +%s)
SAN_SUITES="background_bane fit" SAN_PIPES="radio sextractor" SAN_JOBS=8 SAN_TIMEOUT=200 \
  timeout 230 tests/gpu/floor.sh /tmp/fl sanitizer > /tmp/san.out 2>&1
echo "sanitizer rc=$? $(( $(date +%s) - t0 ))s" | tee -a $L
grep -E "rc=|SUMMARY|all passed|FAIL" /tmp/fl/floor.log | head -30 | tee -a $L
echo "=== done" | tee -a $L
