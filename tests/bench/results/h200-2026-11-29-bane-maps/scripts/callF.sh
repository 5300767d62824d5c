#!/usr/bin/env bash
# Call F (2026-11-29): the final bane_maps (rows read first): the bane,
# threshold and fit suites against the CPU twins; memcheck on the bane suite
# and a radio run, racecheck on a radio run; compare radio and aegean; the
# previous main (old) and this build alternated twice.
set -u
L=$OUT/callF.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
rm -rf /tmp/fl /tmp/suites.sum
pids=()
for s in background_bane threshold fit; do
    ( t0=$(date +%s); $B/bin/tests/test_$s > /tmp/suite-$s.log 2>&1; rc=$?
      printf '%-22s rc=%d %4ss  %s\n' test_$s $rc $(( $(date +%s) - t0 )) "$(grep -E '^[0-9]+%' /tmp/suite-$s.log | tail -1)" >> /tmp/suites.sum ) &
    pids+=($!)
done
SAN_SUITES="background_bane" SAN_PIPES="radio" SAN_JOBS=3 SAN_TIMEOUT=150 timeout 170 tests/gpu/floor.sh /tmp/fs sanitizer > /tmp/san.out 2>&1 &
pids+=($!)
wait "${pids[@]}"
cat /tmp/suites.sum | tee -a $L
grep -E "rc=" /tmp/fs/floor.log | tee -a $L
COMPARE_PIPES="radio aegean" SIZES="2048 4096 8192" timeout 120 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 120 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callF-bench.log
grep -E "^===|radio +gpu +(threshold|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
