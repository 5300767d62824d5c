#!/usr/bin/env bash
# Call E: db_collect by 16-byte mask loads; test_deblend + test_segment;
# memcheck on test_deblend (quick); compare radio sextractor; bench old vs
# new; ncu kernel times (radio 8192) and ncu detail of ms_scan_kernel,
# bke_init, db_collect.
set -u
L=$OUT/callE.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
rm -f /tmp/suites.sum
pids=()
for s in deblend segment; do
    ( t0=$(date +%s); $B/bin/tests/test_$s > /tmp/suite-$s.log 2>&1; rc=$?
      printf '%-22s rc=%d %4ss  %s\n' test_$s $rc $(( $(date +%s) - t0 )) "$(grep -E '^[0-9]+%' /tmp/suite-$s.log | tail -1)" >> /tmp/suites.sum ) &
    pids+=($!)
done
( SKYFIND_TEST_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/tests/test_deblend > $OUT/san-memcheck-deblend.log 2>&1; echo "sanitizer memcheck test_deblend rc=$? $(grep -E 'ERROR SUMMARY' $OUT/san-memcheck-deblend.log | tail -1)" >> /tmp/suites.sum ) &
pids+=($!)
wait "${pids[@]}"
cat /tmp/suites.sum | tee -a $L
for s in deblend segment; do grep -E "Failure|failed|Error" /tmp/suite-$s.log | head -5; done | tee -a $L
COMPARE_PIPES="radio sextractor" SIZES="2048 4096 8192" timeout 150 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callE-bench.log
grep -E "^===|gpu +(segment|deblend|measure|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
NCU_SIZE=8192 NCU_PIPES=radio SIZES=8192 timeout 120 tests/gpu/floor.sh /tmp/fl ncu > /tmp/ncu.out 2>&1
cat /tmp/fl/floor.log > $OUT/callE-ncu.log
head -40 /tmp/fl/floor.log | tee -a $L
ncu --kernel-name "regex:ms_scan_kernel|bke_init|db_collect|bke_final" --section SpeedOfLight --section Occupancy --section LaunchStats \
   $B/bin/skyfind run -q -b gpu -p radio -o /tmp/ncu /tmp/fl/work/sim8192.fits > $OUT/callE-ncudetail.log 2>&1
echo "=== done" | tee -a $L
