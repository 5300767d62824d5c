#!/usr/bin/env bash
# Call D, 2026-12-02, on the H200 host: racecheck on single comparisons of the
# bane suite (SKYFIND_TEST_PART=k/178 picks comparison k, and k + 178),
# eight side by side, each timed. Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no
for k in 0 90 108 126 144 149 162 169; do
    ( s=$(date +%s); SKYFIND_TEST_PART=$k/178 SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu timeout 230 compute-sanitizer --tool racecheck --error-exitcode 9 .gpu-bundle/bin/tests/test_background_bane >$O/rc_$k.log 2>&1; rc=$?; echo "part $k: rc=$rc $(( $(date +%s) - s )) s $(grep -E 'RACECHECK SUMMARY|^[0-9]+%' $O/rc_$k.log | tr '\n' ' ')" >>$O/callD.log ) &
done
wait
cat $O/callD.log
