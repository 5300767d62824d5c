#!/usr/bin/env bash
# Call A (2026-11-29, night): BANE's run summary by clusters of 8 blocks;
# the deblend stage's zeroing in one memset, its objects' count read while
# db_fill runs, its two arrays down after one wait. The suites of the stages
# touched against the CPU twins (background_bane, background, deblend),
# test_background_bane again with SKYFIND_BANE_CLUSTER=1 (a block a median),
# memcheck and racecheck on test_background_bane and whole radio and
# sextractor runs, skyfind compare radio at 2048^2 and 8192^2 and the real
# images, bench_pipeline against a4fff1d (same GPU code as 02a287a) with a
# variants SKYFIND_BANE_CLUSTER=1 and SKYFIND_FIT_SORT=radix (test_fit
# with it too), and the timeline of radio.pipe at 8192^2
# with the 12 longest gaps call by call.
set -u
L=$OUT/callA.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
for t in background_bane background deblend; do
  ( timeout 215 $B/bin/tests/test_$t > /tmp/t_$t.log 2>&1; echo "test_$t rc=$? $(grep -E '^[0-9]+%' /tmp/t_$t.log)" > /tmp/t_$t.rc ) &
done
( SKYFIND_FIT_SORT=radix timeout 215 $B/bin/tests/test_fit > /tmp/t_fitradix.log 2>&1; echo "test_fit SKYFIND_FIT_SORT=radix rc=$? $(grep -E '^[0-9]+%' /tmp/t_fitradix.log)" > /tmp/t_fitradix.rc ) &
( timeout 215 $B/bin/tests/test_fit > /tmp/t_fit.log 2>&1; echo "test_fit rc=$? $(grep -E '^[0-9]+%' /tmp/t_fit.log)" > /tmp/t_fit.rc ) &
( SKYFIND_BANE_CLUSTER=1 timeout 215 $B/bin/tests/test_background_bane > /tmp/t_bb1.log 2>&1; echo "test_background_bane SKYFIND_BANE_CLUSTER=1 rc=$? $(grep -E '^[0-9]+%' /tmp/t_bb1.log)" > /tmp/t_bb1.rc ) &
( SAN_SUITES="background_bane" SAN_PIPES="radio sextractor" SAN_JOBS=6 SAN_TIMEOUT=200 \
  timeout 215 tests/gpu/floor.sh /tmp/fs sanitizer > /tmp/san.out 2>&1; echo "sanitizer rc=$?" > /tmp/san.rc ) &
wait
cat /tmp/t_*.rc | tee -a $L
cat /tmp/san.rc | tee -a $L
grep -E "rc=|SUMMARY" /tmp/fs/floor.log | tee -a $L
for f in /tmp/t_*.log; do grep -E "^[0-9]+%|FAIL|fail" $f | head -5; done > $OUT/callA-suites.txt 2>&1
cp /tmp/fs/work/san_*test_background_bane*.log $OUT/ 2>/dev/null
SKYFIND_FIT_SORT=radix COMPARE_PIPES="radio" SIZES="2048 8192" timeout 100 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="8192" \
  FLOOR_VARIANTS="old new SKYFIND_BANE_CLUSTER=1 SKYFIND_FIT_SORT=radix" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callA-bench.log
grep -E "^===|gpu +(background|deblend|fit|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=12 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callA-trace.log
grep -E "window|bane_summary|db_" $OUT/callA-trace.log | head -20 | tee -a $L
echo "=== done" | tee -a $L
