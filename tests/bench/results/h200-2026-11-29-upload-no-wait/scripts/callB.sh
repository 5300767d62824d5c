#!/usr/bin/env bash
# Call B: direct2d_rb_split (the 2-D convolution's tile rows in three parts)
# against direct2d_rb (SKYFIND_CONV_SPLIT=0) in the same process runs;
# test_convolve (GPU against the CPU twin); the kernel list (ncu) and the
# GPU's timeline (sftrace) of radio.pipe at 8192^2.
set -u
L=$OUT/callB.log
B=$SKYFIND_BUNDLE; SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
echo "=== test_convolve" | tee -a $L
timeout 200 $B/bin/tests/test_convolve > $OUT/test_convolve.log 2>&1; echo "test_convolve rc=$?" | tee -a $L
grep -E "^[0-9]+%|SKIP|FAIL|fail" $OUT/test_convolve.log | head -10 | tee -a $L
FLOOR_PIPES=radio SIZES="4096 8192" FLOOR_VARIANTS="SKYFIND_CONV_SPLIT=0 new" FLOOR_ROUNDS=2 timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callB-bench.log
grep -E "^===|gpu +(convolve|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
NCU_SIZE=8192 NCU_PIPES=radio timeout 120 tests/gpu/floor.sh /tmp/fl ncu > /tmp/ncu.out 2>&1
cp /tmp/fl/floor.log $OUT/callB-ncu.log; grep -E "ms " /tmp/fl/floor.log | head -30 | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 timeout 120 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callB-trace.log; tail -5 /tmp/tr.out >> $OUT/callB-trace.log
cp /tmp/fl/work/trace-radio-8192.csv $OUT/ 2>/dev/null
head -60 /tmp/fl/floor.log | tee -a $L
echo "=== compare radio" | tee -a $L
COMPARE_PIPES="radio" SIZES="2048 4096 8192" timeout 100 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
