#!/usr/bin/env bash
# Call B (2026-11-29): the grids packed (double nodes, column/row tables) and
# bane_maps' lerps kept along node rows: suites against the CPU twins, radio
# stages new vs SKYFIND_BANE_MAPS=1 alternated, Nsight Compute kernel times.
set -u
L=$OUT/callB.log
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
    grep -E "Failure|Error:|SKIP" /tmp/suite-$s.log | head -5 | sed "s/^/test_$s: /" | tee -a $L
done
echo "=== bench + ncu" | tee -a $L
FLOOR_PIPES=radio SIZES="4096 8192" FLOOR_VARIANTS="new SKYFIND_BANE_MAPS=1" FLOOR_ROUNDS=2 \
  timeout 400 tests/gpu/floor.sh /tmp/fl bench ncu > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]|ms in all|^ +[0-9.]+ ms" /tmp/fl/floor.log | head -120 | tee -a $L
echo "=== done" | tee -a $L
