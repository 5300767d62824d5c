#!/usr/bin/env bash
# Call H: measure's runs of 16 (this build), 32 and 64 pixels a thread.
set -u
L=$OUT/callH.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
FLOOR_PIPES=radio,sextractor SIZES="4096 8192" FLOOR_VARIANTS="new exe:$B/extra/bench_pipeline_msrun32 exe:$B/extra/bench_pipeline_msrun64" FLOOR_ROUNDS=2 \
  timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callH-bench.log
grep -E "^===|gpu +(measure|stages)" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
