#!/usr/bin/env bash
# Call G: the noise clippings' blocks beside the convolution
# (SKYFIND_NOISE_BLOCKS 4, 8, 16 = default, 32) and the serial order, radio.pipe.
set -u
L=$OUT/callG.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
FLOOR_PIPES=radio SIZES="4096 8192" FLOOR_VARIANTS="new SKYFIND_NOISE_BLOCKS=8 SKYFIND_NOISE_BLOCKS=4 SKYFIND_NOISE_BLOCKS=32 SKYFIND_NOISE_SERIAL=1" FLOOR_ROUNDS=2 \
  timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callG-bench.log
grep -E "^===|gpu +(convolve|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
