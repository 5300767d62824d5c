#!/usr/bin/env bash
# Call H (final code): the sanitizer runs call G's ten-at-once left
# unfinished, four at once: racecheck of test_fit's gpu_big_islands (fit_sort's
# merges), of test_deblend's and test_measure's GPU cases (quick sizes), and
# memcheck of test_measure's GPU cases.
set -u
L=$OUT/callH.log
B=$SKYFIND_BUNDLE
echo "code: $(cat $B/extra/HEAD)" | tee $L
san() { local tool=$1 name=$2; shift 2
  ( SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu timeout 330 compute-sanitizer --tool $tool --error-exitcode 9 "$@" > $OUT/san_${tool}_$name.log 2>&1
    echo "$tool $name rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Checks' $OUT/san_${tool}_$name.log | tr '\n' ' ')" > /tmp/san_${tool}_$name.rc ) # (in call H written as $tool_$name: the rc files failed, the logs are whole) & }
CK_RUN_TEST=gpu_big_islands san racecheck test_fit_big $B/bin/tests/test_fit
san racecheck test_deblend $B/bin/tests/test_deblend
san racecheck test_measure $B/bin/tests/test_measure
san memcheck test_measure $B/bin/tests/test_measure
wait
for f in $OUT/san_*.log; do echo "$(basename $f): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Checks:' $f | tr '\n' ' ')"; done | tee -a $L
echo "=== done" | tee -a $L
