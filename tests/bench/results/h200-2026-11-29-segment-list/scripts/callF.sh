#!/usr/bin/env bash
# Call F: bke_init four blocks a lane; db_slots skips a sky warp; test_deblend + test_segment;
# memcheck on test_deblend (quick); compare radio sextractor; bench old vs
# new; ncu kernel times (radio 8192) and ncu detail of ms_scan_kernel,
# bke_init, db_collect.
set -u
L=$OUT/callF.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
rm -f /tmp/suites.sum
pids=()
for s in deblend segment measure; do
    ( t0=$(date +%s); $B/bin/tests/test_$s > /tmp/suite-$s.log 2>&1; rc=$?
      printf '%-22s rc=%d %4ss  %s\n' test_$s $rc $(( $(date +%s) - t0 )) "$(grep -E '^[0-9]+%' /tmp/suite-$s.log | tail -1)" >> /tmp/suites.sum ) &
    pids+=($!)
done
for t in "memcheck deblend" "memcheck segment" "initcheck segment"; do
    ( set -- $t; SKYFIND_TEST_QUICK=1 timeout 200 compute-sanitizer --tool $1 --error-exitcode 9 $B/bin/tests/test_$2 > $OUT/san-$1-$2.log 2>&1; echo "sanitizer $1 test_$2 rc=$? $(grep -E "ERROR SUMMARY" $OUT/san-$1-$2.log | tail -1)" >> /tmp/suites.sum ) &
    pids+=($!)
done
pids+=($!)
wait "${pids[@]}"
cat /tmp/suites.sum | tee -a $L
for s in deblend segment measure; do grep -E "Failure|failed|Error" /tmp/suite-$s.log | head -5; done | tee -a $L
COMPARE_PIPES="radio sextractor" SIZES="2048 4096 8192" timeout 150 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callF-bench.log
grep -E "^===|gpu +(segment|deblend|measure|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
NCU_SIZE=8192 NCU_PIPES=radio SIZES=8192 timeout 120 tests/gpu/floor.sh /tmp/fl ncu > /tmp/ncu.out 2>&1
cat /tmp/fl/floor.log > $OUT/callF-ncu.log
head -40 /tmp/fl/floor.log | tee -a $L
ncu --kernel-name "regex:bke_init|db_collect" --section SpeedOfLight --section Occupancy --section LaunchStats \
   $B/bin/skyfind run -q -b gpu -p radio -o /tmp/ncu /tmp/fl/work/sim8192.fits > $OUT/callF-ncudetail.log 2>&1
echo "=== done" | tee -a $L
