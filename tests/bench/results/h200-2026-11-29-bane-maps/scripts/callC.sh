#!/usr/bin/env bash
# Call C (2026-11-29): bane_maps with its rows' reads issued together:
# suites against the CPU twins; radio stages, 4 builds/paths alternated in one
# call: new (this build), grid1 (the grids read by the stages, rows read one by
# one: commit 2 of today), SKYFIND_BANE_MAPS=1 (this kernel, the maps made and
# read), old (the previous main, 7c00cd6); then Nsight Compute kernel times.
set -u
L=$OUT/callC.log
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
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="new exe:$B/extra/bench_pipeline_grid1 SKYFIND_BANE_MAPS=1 old" FLOOR_ROUNDS=2 \
  timeout 420 tests/gpu/floor.sh /tmp/fl bench ncu > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]|ms in all|^ +[0-9.]+ ms" /tmp/fl/floor.log | head -200 > $OUT/callC-bench.log
grep -E "^===|radio +gpu +(threshold|measure|deblend|fit|stages|end-to-end)|ms in all|bane_maps|ms_scan" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
