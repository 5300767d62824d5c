#!/usr/bin/env bash
# Call A (experiment): direct2d_rb's 15x15 sums with rows added in float
# (SKYFIND_CONV_FLOAT=1) and/or 8 output rows a thread (SKYFIND_CONV_RB8=1):
# bench_convolve 15x15, bench_pipeline radio at 8192^2 (stages), Nsight
# Compute of direct2d_rb, test_convolve's GPU case with FLOAT=1.
set -u
L=$OUT/callA.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
VARS="base SKYFIND_CONV_FLOAT=1 SKYFIND_CONV_RB8=1 SKYFIND_CONV_FLOAT=1,SKYFIND_CONV_RB8=1"
for round in 1 2; do
for v in $VARS; do
  envv=(); [ $v != base ] && IFS=, read -ra envv <<< "$v"
  echo "--- bench_convolve 15 at 8192, $v, round $round" | tee -a $L
  env "${envv[@]}" timeout 60 $B/bin/tests/bench/bench_convolve --sizes 8192 --kernels 15 --repeat 20 2>&1 | grep -vE "^#|^$" | tail -8 | tee -a $L
done
done
FLOOR_PIPES=radio SIZES="8192" FLOOR_VARIANTS="new SKYFIND_CONV_FLOAT=1 SKYFIND_CONV_RB8=1 SKYFIND_CONV_FLOAT=1,SKYFIND_CONV_RB8=1" FLOOR_ROUNDS=3 timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callA-bench-radio.log
grep -E "^===|gpu +(convolve|stages)" /tmp/fl/floor.log | tee -a $L
$B/bin/skyfind simulate -q -n 8192 --seed 1 -o /tmp/s8192.fits
for v in $VARS; do
  envv=(); [ $v != base ] && IFS=, read -ra envv <<< "$v"
  echo "--- ncu direct2d_rb, $v" | tee -a $L
  env "${envv[@]}" timeout 60 ncu --kernel-name "regex:direct2d_rb$|direct2d_rb<" --section SpeedOfLight --section Occupancy --section LaunchStats --metrics smsp__inst_executed.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
     $B/bin/skyfind run -q -b gpu -p radio -o /tmp/ncuo /tmp/s8192.fits 2>&1 | grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|inst_executed|fma_cycles|issue_active|Compute \(SM\) Throughput|Block Limit|direct2d" | tee -a $L
done
echo "--- test_convolve gpu, FLOAT=1" | tee -a $L
SKYFIND_CONV_FLOAT=1 CK_RUN_CASE=gpu timeout 200 $B/bin/tests/test_convolve 2>&1 | tail -5 | tee -a $L
echo "--- compare radio FLOAT=1 on real images" | tee -a $L
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null | grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
SKYFIND_CONV_FLOAT=1 timeout 120 $B/bin/skyfind compare -q -p radio --json $real > /tmp/cmp.json 2>/tmp/cmp.err; echo "rc=$? agree $(grep -c '"agree":true' /tmp/cmp.json) disagree $(grep -c '"agree":false' /tmp/cmp.json)" | tee -a $L
SKYFIND_CONV_FLOAT=1 timeout 60 $B/bin/skyfind compare -p radio /tmp/s8192.fits 2>&1 | tail -3 | tee -a $L
echo "=== done" | tee -a $L
