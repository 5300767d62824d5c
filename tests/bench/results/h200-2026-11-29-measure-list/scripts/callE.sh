#!/usr/bin/env bash
# Call E: the measure stage's runs listed first (ms_list_kernel, the mask's
# bytes where the labels were made from it) and walked from the list; the
# deblend and fit stages' short scans in one block (sf_scan_excl); small
# downloads through the pinned buffer. Suites measure, fit, deblend (GPU
# against the CPU twin); bench radio and sextractor at 8192^2 against
# 3309ecd with variants SKYFIND_MEASURE_MASK=0, SKYFIND_SCAN_CUB=1,
# SKYFIND_D2H_BOUNCE=0, two rounds; timeline of radio.
set -u
L=$OUT/callE.log
B=$SKYFIND_BUNDLE
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
( CK_RUN_CASE=gpu timeout 240 $B/bin/tests/test_measure > /tmp/tm.log 2>&1; echo "test_measure rc=$? $(tail -1 /tmp/tm.log)" > /tmp/tm.rc ) &
( CK_RUN_CASE=gpu timeout 240 $B/bin/tests/test_fit > /tmp/tf.log 2>&1; echo "test_fit rc=$? $(tail -1 /tmp/tf.log)" > /tmp/tf.rc ) &
( CK_RUN_CASE=gpu timeout 240 $B/bin/tests/test_deblend > /tmp/td.log 2>&1; echo "test_deblend rc=$? $(tail -1 /tmp/td.log)" > /tmp/td.rc ) &
( CK_RUN_CASE=gpu timeout 240 $B/bin/tests/test_segment > /tmp/ts.log 2>&1; echo "test_segment rc=$? $(tail -1 /tmp/ts.log)" > /tmp/ts.rc ) &
wait
cat /tmp/t?.rc | tee -a $L
grep -hE ":F:|:E:" /tmp/tm.log /tmp/tf.log /tmp/td.log /tmp/ts.log | head -5 | tee -a $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,sextractor SIZES="8192" \
  FLOOR_VARIANTS="old new SKYFIND_MEASURE_MASK=0 SKYFIND_SCAN_CUB=1 SKYFIND_D2H_BOUNCE=0" FLOOR_ROUNDS=2 timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callE-bench.log
grep -E "^===|8192.*gpu +(deblend|measure|fit|stages)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callE-trace.log
grep -E "window|ms_scan|ms_list|ms_accum|sf_scan" $OUT/callE-trace.log | head -8 | tee -a $L
echo "=== done" | tee -a $L
