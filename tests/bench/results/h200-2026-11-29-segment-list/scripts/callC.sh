#!/usr/bin/env bash
# Call C: the 8-connected labelling from a list of the mask's set blocks.
# test_segment/test_deblend/test_measure/test_fit against the CPU twins;
# memcheck + initcheck on test_segment (quick sizes); compare radio and
# sextractor; bench old (416ef11) vs new alternated twice.
set -u
L=$OUT/callC.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
rm -f /tmp/suites.sum
pids=()
for s in segment deblend measure fit; do
    ( t0=$(date +%s); $B/bin/tests/test_$s > /tmp/suite-$s.log 2>&1; rc=$?
      printf '%-22s rc=%d %4ss  %s\n' test_$s $rc $(( $(date +%s) - t0 )) "$(grep -E '^[0-9]+%' /tmp/suite-$s.log | tail -1)" >> /tmp/suites.sum ) &
    pids+=($!)
done
for tool in memcheck initcheck; do
    ( SKYFIND_TEST_QUICK=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/tests/test_segment > $OUT/san-$tool.log 2>&1; echo "sanitizer $tool test_segment rc=$? $(grep -E 'ERROR SUMMARY|errors' $OUT/san-$tool.log | tail -1)" >> /tmp/suites.sum ) &
    pids+=($!)
done
wait "${pids[@]}"
cat /tmp/suites.sum | tee -a $L
for s in segment deblend measure fit; do grep -E "Failure|failed|Error" /tmp/suite-$s.log | head -5; done | tee -a $L
COMPARE_PIPES="radio sextractor" SIZES="2048 4096 8192" timeout 150 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callC-bench.log
grep -E "^===|gpu +(segment|deblend|measure|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
