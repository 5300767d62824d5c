#!/usr/bin/env bash
# Call D: the lazy maps and the measure's mask scan dropped (call C); the
# noise's filtered rows in a grid of ~2 blocks an SM beside the whole
# convolution (variant SKYFIND_NOISE_ROWS_GRID=0: a block an output row);
# suites of convolve and fit; bench radio against 3309ecd, three rounds.
set -u
L=$OUT/callD.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
for t in test_convolve test_fit; do
  ( CK_RUN_CASE=gpu timeout 300 $B/bin/tests/$t > /tmp/$t.log 2>&1; echo "$t rc=$? $(tail -1 /tmp/$t.log)" > /tmp/$t.rc ) &
done
wait
cat /tmp/test_*.rc | tee -a $L
grep -hE "Failure|failed|Error|:F:|:E:" /tmp/test_convolve.log /tmp/test_fit.log | head -5 | tee -a $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="old new SKYFIND_NOISE_ROWS_GRID=0" FLOOR_ROUNDS=3 timeout 220 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callD-bench-radio.log
grep -E "^===|8192.*gpu +(convolve|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
