#!/usr/bin/env bash
# Call F (the rest of call E2, the same final code): the three Check suites
# that ran past run-all's limit beside the sanitizers in E2
# (test_background, test_convolve, test_measure), alone; compute-sanitizer
# racecheck and memcheck of whole radio runs (BANE's summary clusters) on
# real images with NaN borders, odd and even node counts (Parkes 1904-66
# SIN, its half, the AMI-LA 512^2 and ATCA 1000^2 images) and racecheck of
# test_background_bane's GPU case (CK_RUN_CASE=gpu) alone.
set -u
L=$OUT/callF.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
D=$SKYFIND_TEST_DATA
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
for t in background convolve measure; do
  ( s=$(date +%s); timeout 400 $B/bin/tests/test_$t > /tmp/t_$t.log 2>&1; echo "test_$t rc=$? $(( $(date +%s) - s ))s $(grep -E '^[0-9]+%' /tmp/t_$t.log)" > /tmp/t_$t.rc ) &
done
( SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu timeout 450 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/tests/test_background_bane > /tmp/rc_bb.log 2>&1
  echo "racecheck test_background_bane (gpu case) rc=$? $(grep -E 'RACECHECK SUMMARY' /tmp/rc_bb.log) $(grep -E '^[0-9]+%' /tmp/rc_bb.log)" > /tmp/rc_bb.rc ) &
( for f in radio_parkes_1904-66_SIN.fits radio_parkes_1904-66_SIN_half.fits radio_amila_GRB120422A_512x512x1x1.fits radio_atca_scorpio_s17_1000x1000.fits; do
    for tool in racecheck memcheck; do
      timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $SF run -q -b gpu -p radio -o /tmp/so_$tool $D/$f > /tmp/s_$tool.log 2>&1
      echo "$tool run radio $f rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/s_$tool.log)" >> /tmp/s.rc
    done
  done ) &
wait
cat /tmp/t_*.rc /tmp/rc_bb.rc /tmp/s.rc | tee -a $L
echo "=== done" | tee -a $L
