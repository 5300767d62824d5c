#!/usr/bin/env bash
# Call G (2026-11-29): end-to-end figures of the final code: the CPU backend's
# thread scaling (threads.sh, radio/sextractor/lesson at 4096 and 8192,
# catalogues byte-identical across thread counts) and files per second in a
# GPU batch (BATCH_QUICK batch-bench: 32 x 4096^2, 8 x 8192^2).
set -u
L=$OUT/callG.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; nproc; } | tee $L
t0=$(date +%s)
BATCH_QUICK=1 timeout 200 tests/gpu/batch-bench.sh /tmp/bb 32 8 > /tmp/bb.out 2>&1
echo "batch rc=$? $(( $(date +%s) - t0 ))s" | tee -a $L
cp /tmp/bb.out $OUT/callG-batch.txt
grep -iE "files/s|steady" /tmp/bb.out | head -20 | tee -a $L
t0=$(date +%s)
timeout 300 tests/bench/threads.sh $B/bin/skyfind /tmp/thr "4096 8192" 3 > /tmp/thr.out 2>&1
echo "threads rc=$? $(( $(date +%s) - t0 ))s" | tee -a $L
cp /tmp/thr/threads.md $OUT/callG-threads.md 2>/dev/null
cat /tmp/thr/threads.md 2>/dev/null | head -60 | tee -a $L
tail -5 /tmp/thr.out | tee -a $L
echo "=== done" | tee -a $L
