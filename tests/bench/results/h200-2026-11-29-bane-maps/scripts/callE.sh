#!/usr/bin/env bash
# Call E (2026-11-29): skyfind compare (radio, sextractor, lesson, aegean) on
# the real images and the 2048/4096/8192 skies; bench_pipeline of the previous
# main (7c00cd6, "old") and this build alternated twice (radio, lesson,
# sextractor at 4096 and 8192), and the radio trace.
set -u
L=$OUT/callE.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
t0=$(date +%s)
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 300 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
echo "compare rc=$? $(( $(date +%s) - t0 ))s" | tee -a $L
grep -E "^===|AGREE|DISAGREE|agree|FAIL|all passed" /tmp/fl/floor.log | sort | uniq -c | sort -rn | head -30 | tee -a $L
cp /tmp/fl/floor.log $OUT/callE-compare.log
rm -f /tmp/fl/floor.log
t0=$(date +%s)
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 240 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
echo "bench rc=$? $(( $(date +%s) - t0 ))s" | tee -a $L
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callE-bench.log
grep -E "^===| gpu +(threshold|stages|pipeline|end-to-end)" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
