#!/usr/bin/env bash
# Call G: the review's mends (a shared warp scan and scratch carve in
# common.cuh, used by the segment and deblend stages; deblend's label check
# in one helper): the suites of the stages they touch against the CPU twins
# (segment, deblend, measure, fit), compute-sanitizer memcheck on
# test_segment and test_deblend and memcheck/racecheck on whole radio and
# sextractor runs, skyfind compare of radio and sextractor, and the stages'
# times against e295894 (bench_pipeline, alternated twice).
set -u
L=$OUT/callG.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
for t in segment deblend measure fit; do
  ( timeout 300 $B/bin/tests/test_$t > /tmp/t_$t.log 2>&1; echo "test_$t rc=$? $(grep -E '^[0-9]+%' /tmp/t_$t.log)" > /tmp/t_$t.rc ) &
done
( SAN_SUITES="segment deblend" SAN_PIPES="radio sextractor" SAN_JOBS=6 SAN_TIMEOUT=280 \
  timeout 300 tests/gpu/floor.sh /tmp/fs sanitizer > /tmp/san.out 2>&1; echo "sanitizer rc=$?" > /tmp/san.rc ) &
wait
cat /tmp/t_*.rc | tee -a $L
cat /tmp/san.rc | tee -a $L
grep -E "rc=|SUMMARY" /tmp/fs/floor.log | tee -a $L
COMPARE_PIPES="radio sextractor" SIZES="2048 8192" timeout 120 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,sextractor SIZES="8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 90 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callG-bench.log
grep -E "^===|gpu +(segment|deblend|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
