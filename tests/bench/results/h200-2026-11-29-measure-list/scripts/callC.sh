#!/usr/bin/env bash
# Call C: + BANE's maps left as grids (the threshold writes the mask alone;
# deblend, measure and fit evaluate the pixels they read), the measure scan's
# labels loaded after the mask. The suites of the changed stages (GPU
# against the CPU twin); bench_pipeline against 3309ecd alternated three
# times with variants SKYFIND_BANE_LAZY=0 and SKYFIND_MEASURE_MASK=0; lesson
# and sextractor twice; timeline of radio at 8192^2; compare of 4 pipelines.
set -u
L=$OUT/callC.log
B=$SKYFIND_BUNDLE
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
SUITES="fit measure deblend threshold convolve background_bane segment" SUITE_JOBS=7 timeout 300 tests/gpu/run-all.sh /tmp/ra checks > /tmp/ra.out 2>&1
echo "suites rc=$?" | tee -a $L
grep -hE "Checks|SKIP|Failure|rc=" /tmp/ra/*.log /tmp/ra.out 2>/dev/null | grep -v "^$" | sort | uniq -c | head -40 | tee -a $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="old new SKYFIND_BANE_LAZY=0 SKYFIND_MEASURE_MASK=0" FLOOR_ROUNDS=3 timeout 260 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callC-bench-radio.log
grep -E "^===|8192.*gpu +(threshold|deblend|measure|fit|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl2.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callC-bench-lesson-sextractor.log
grep -E "^===|gpu +(measure|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callC-trace.log
grep -E "window|ms_scan|fit_sort|direct2d_rb|bane_maps|db_split|fit_lm" $OUT/callC-trace.log | head -12 | tee -a $L
rm -f /tmp/fl/floor.log
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 170 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
