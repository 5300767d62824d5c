#!/usr/bin/env bash
# Call C0: the upload without a wait, before/after (bench_pipeline of e295894
# and of this build alternated twice), and the timeline of radio.pipe at 8192^2.
set -u
L=$OUT/callC0.log
B=$SKYFIND_BUNDLE
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callC0-bench.log
grep -E "^===|gpu +(upload|background|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 timeout 90 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callC0-trace.log; cp /tmp/fl/work/trace-radio-8192.csv $OUT/ 2>/dev/null
grep -E "window" /tmp/fl/floor.log | tee -a $L
sed -n '/idle gaps of/,/idle time by/p' /tmp/fl/floor.log | head -8 | tee -a $L
echo "=== done" | tee -a $L
