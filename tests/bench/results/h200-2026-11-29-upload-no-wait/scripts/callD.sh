#!/usr/bin/env bash
# Call D: BANE's maps beside the threshold's mask (a side stream that the
# deblend stage's readers wait for) and the upload without a wait:
# test_background_bane and test_threshold (GPU against the CPU twin);
# bench_pipeline of e295894 (old), this build, and this build with
# SKYFIND_BANE_MAPS_SIDE=0 (the one fused launch), alternated twice;
# skyfind compare radio on the real images and the skies; the timeline.
set -u
L=$OUT/callD.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
for t in background_bane threshold; do
  timeout 200 $B/bin/tests/test_$t > $OUT/test_$t.log 2>&1; echo "test_$t rc=$? $(grep -E '^[0-9]+%' $OUT/test_$t.log)" | tee -a $L
done
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new SKYFIND_BANE_MAPS_SIDE=0" FLOOR_ROUNDS=2 timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callD-bench.log
grep -E "^===|gpu +(threshold|segment|deblend|stages|end-to-end)" /tmp/fl/floor.log | grep -v "sim_4096.*(threshold|segment|deblend)" | tee -a $L
rm -f /tmp/fl/floor.log
COMPARE_PIPES="radio" SIZES="2048 4096 8192" timeout 100 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 timeout 90 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callD-trace.log; cp /tmp/fl/work/trace-radio-8192.csv $OUT/ 2>/dev/null
grep -E "window" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
