#!/usr/bin/env bash
# The batch engine's threads under ThreadSanitizer (CI, a build with
# -fsanitize=thread, no CUDA): readers, CPU workers and writers on 16 images
# with FITS, CSV and PNG outputs, three times; any data race fails.
# Usage: tests/cli/tsan-batch.sh PATH/TO/skyfind
set -u
SF=${1:?skyfind built with -fsanitize=thread}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
export OMP_NUM_THREADS=1 # libgomp is not instrumented: one OpenMP thread, no false reports
for i in $(seq 1 16); do "$SF" simulate -q -n $((200 + 8 * (i % 4))) --seed $i -o "$T/i$i.fits" || exit 1; done
for r in 1 2 3; do
    TSAN_OPTIONS="halt_on_error=0 exitcode=66" OMP_NUM_THREADS=1 \
        "$SF" run -q -b cpu -j 6 --readers 6 --save seg,png --format csv,fits -o "$T/o$r" "$T"/i*.fits 2>"$T/err$r"
    rc=$?
    races=$(grep -c "WARNING: ThreadSanitizer" "$T/err$r")
    if [ $rc = 0 ] && [ "$races" = 0 ] && [ "$(ls "$T/o$r"/*.cat.csv | wc -l)" = 16 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: run $r: exit $rc, $races ThreadSanitizer reports"
        grep -A20 "WARNING: ThreadSanitizer" "$T/err$r" | head -40
    fi
done
echo "tsan-batch: $pass passed, $fail failed"
[ $fail = 0 ]
