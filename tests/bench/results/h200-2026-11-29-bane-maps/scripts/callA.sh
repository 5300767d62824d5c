#!/usr/bin/env bash
# Call A (2026-11-29): BANE's maps not made on the GPU (the grids read by
# threshold, deblend, measure and fit): the suites that cover it against the
# CPU twins, then radio.pipe's stages, the new way and SKYFIND_BANE_MAPS=1
# (the maps made in the threshold's pass, as before) alternated, then the trace.
set -u
L=$OUT/callA.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
echo "=== suites (GPU against the CPU twins), in parallel" | tee -a $L
pids=()
for s in background_bane fit measure deblend threshold; do
    ( t0=$(date +%s); $B/bin/tests/test_$s > /tmp/suite-$s.log 2>&1; rc=$?
      printf '%-22s rc=%d %4ss  %s\n' test_$s $rc $(( $(date +%s) - t0 )) "$(grep -E '^[0-9]+%' /tmp/suite-$s.log | tail -1)" >> /tmp/suites.sum ) &
    pids+=($!)
done
wait "${pids[@]}"
cat /tmp/suites.sum | tee -a $L
for s in background_bane fit measure deblend threshold; do
    grep -E "Failure|Error|SKIP" /tmp/suite-$s.log | head -5 | sed "s/^/test_$s: /" | tee -a $L
done
echo "=== bench + trace" | tee -a $L
FLOOR_PIPES=radio SIZES="4096 8192" FLOOR_VARIANTS="new SKYFIND_BANE_MAPS=1" FLOOR_ROUNDS=2 \
  timeout 300 tests/gpu/floor.sh /tmp/fl bench trace > /tmp/fl.out 2>&1
grep -E "^===|stage|upload|background|convolve|threshold|segment|deblend|measure|fit |stages|pipeline|end-to-end|window|bane_maps|^ +[0-9.]+ +[0-9]+ +_Z" /tmp/fl.out | head -150 | tee -a $L
cp /tmp/fl/floor.log $OUT/callA-floor.log 2>/dev/null
echo "=== done" | tee -a $L
