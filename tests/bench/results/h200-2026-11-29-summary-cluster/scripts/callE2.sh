#!/usr/bin/env bash
# Call E2 (the final GPU code against the CPU twins): every Check suite
# (tests/gpu/run-all.sh checks) beside compute-sanitizer memcheck and
# racecheck on test_background_bane (the summary's clusters),
# test_segment, test_deblend and test_fit and on whole radio and sextractor
# runs at 512^2; memcheck on a whole radio run at 4096^2 with --save all.
set -u
L=$OUT/callE2.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
t0=$(date +%s)
( SUITE_JOBS=8 timeout 380 tests/gpu/run-all.sh /tmp/ra checks > /tmp/ra.out 2>&1; echo "run-all checks rc=$? $(( $(date +%s) - t0 ))s" > /tmp/ra.rc ) &
p1=$!
( SAN_SUITES="background_bane segment deblend fit" SAN_PIPES="radio sextractor" SAN_JOBS=8 SAN_TIMEOUT=420 \
  timeout 440 tests/gpu/floor.sh /tmp/fs sanitizer > /tmp/san.out 2>&1; echo "sanitizer rc=$? $(( $(date +%s) - t0 ))s" > /tmp/san.rc ) &
p2=$!
( mkdir -p /tmp/s4; $SF simulate -q -n 4096 --seed 3 -o /tmp/s4/big.fits
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $SF run -q -b gpu -p radio --save all -o /tmp/s4/o_radio /tmp/s4/big.fits > /tmp/s4/mc_radio.log 2>&1
  echo "memcheck run radio 4096^2 --save all rc=$? $(grep 'ERROR SUMMARY' /tmp/s4/mc_radio.log)" >> /tmp/s4/mc.rc ) &
p3=$!
wait $p1 $p3
cat /tmp/ra.rc | tee -a $L
grep -E "rc=|ALL PASSED|FAIL" /tmp/ra.out | head -30 | tee -a $L
cat /tmp/s4/mc.rc | tee -a $L
wait $p2
cat /tmp/san.rc | tee -a $L
grep -E "rc=|SUMMARY|all passed|FAIL" /tmp/fs/floor.log | head -30 | tee -a $L
echo "=== done" | tee -a $L
