#!/usr/bin/env bash
# Call B: direct2d_rb's rows in float up to 225 taps, the fit's own segment
# sort (no count read back), the measure stage's scan reading the mask
# before the labels. Suites (GPU cases against the CPU twin), bench_pipeline
# against 3309ecd (old) alternated three times (radio) with the variant
# SKYFIND_CONV_ROWS_DOUBLE=1, lesson and sextractor twice, the timeline of
# radio at 8192^2, skyfind compare of four pipelines.
set -u
L=$OUT/callB.log
B=$SKYFIND_BUNDLE
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
for t in test_convolve test_fit test_measure; do
  ( CK_RUN_CASE=gpu timeout 300 $B/bin/tests/$t > /tmp/$t.log 2>&1; echo "$t rc=$? $(tail -1 /tmp/$t.log)" > /tmp/$t.rc ) &
done
wait
cat /tmp/test_*.rc | tee -a $L
for t in test_convolve test_fit test_measure; do grep -E "SKIP|Failure|failed|Error" /tmp/$t.log | head -5 | tee -a $L; done
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="old new SKYFIND_CONV_ROWS_DOUBLE=1" FLOOR_ROUNDS=3 timeout 220 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callB-bench-radio.log
grep -E "^===|gpu +(convolve|measure|fit|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl2.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callB-bench-lesson-sextractor.log
grep -E "^===|gpu +(measure|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callB-trace.log
grep -E "window|ms_scan|fit_sort|direct2d_rb|Segmented" $OUT/callB-trace.log | head -8 | tee -a $L
rm -f /tmp/fl/floor.log
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 170 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
