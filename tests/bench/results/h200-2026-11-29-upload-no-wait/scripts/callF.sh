#!/usr/bin/env bash
# Call F: compute-sanitizer racecheck on test_segment and test_deblend (quick
# sizes) alone (call E ran them beside the whole suite and cut them at 200 s).
set -u
L=$OUT/callF.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
for t in segment deblend; do
  ( SKYFIND_TEST_QUICK=1 timeout 520 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/tests/test_$t > /tmp/rc_$t.log 2>&1
    echo "racecheck test_$t rc=$? $(grep -E 'RACECHECK SUMMARY' /tmp/rc_$t.log) $(grep -E '^[0-9]+%' /tmp/rc_$t.log)" > /tmp/rc_$t.rc ) &
done
wait
cat /tmp/rc_segment.rc /tmp/rc_deblend.rc | tee -a $L
echo "=== done" | tee -a $L
