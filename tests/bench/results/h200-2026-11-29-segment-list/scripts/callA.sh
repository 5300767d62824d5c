#!/usr/bin/env bash
# Call A (2026-11-29 session 2): where radio.pipe's device time goes on main
# (416ef11): Nsight Compute kernel times of one run at 8192^2 and 4096^2,
# the CUPTI timeline at both sizes, and the deblend stage's per-phase profile.
set -u
L=$OUT/callA.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; nproc; } | tee $L
rm -rf /tmp/fl
for n in 8192 4096; do
  NCU_SIZE=$n NCU_PIPES=radio SIZES="$n" timeout 150 tests/gpu/floor.sh /tmp/fl$n ncu > /tmp/ncu$n.out 2>&1
  cp /tmp/fl$n/floor.log $OUT/callA-ncu-$n.log 2>/dev/null
  TRACE_SIZE=$n TRACE_PIPES=radio SIZES="$n" timeout 150 tests/gpu/floor.sh /tmp/tr$n trace > /tmp/tr$n.out 2>&1
  cp /tmp/tr$n/floor.log $OUT/callA-trace-$n.log 2>/dev/null
  ls /tmp/fl$n /tmp/tr$n >> $L 2>&1
  for f in /tmp/fl$n/sim$n.fits /tmp/tr$n/sim$n.fits; do
    if [ -f $f ]; then
      for r in 1 2 3; do SKYFIND_DEBLEND_PROFILE=1 $B/bin/skyfind run -v -b gpu -p radio -o /tmp/dbp $f 2>&1 | grep -E "deblend|total|phases" ; done | tee -a $L
      break
    fi
  done
done
echo "=== done" | tee -a $L
