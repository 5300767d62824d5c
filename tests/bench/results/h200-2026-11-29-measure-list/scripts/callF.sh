#!/usr/bin/env bash
# Call F (final code): every Check suite (GPU against the CPU twins,
# tests/gpu/run-all.sh checks, 8 at once), then skyfind compare of radio,
# sextractor, lesson and aegean on the real images and the 2048/4096/8192
# skies.
set -u
L=$OUT/callF.log
B=$SKYFIND_BUNDLE
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
SUITE_JOBS=8 timeout 400 tests/gpu/run-all.sh /tmp/ra checks > /tmp/ra.out 2>&1
echo "suites rc=$?" | tee -a $L
cp /tmp/ra.out $OUT/callF-suites.out 2>/dev/null
grep -E "test_|Checks|SKIP|FAIL|rc=" /tmp/ra.out | head -60 | tee -a $L
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 170 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
echo "compare rc=$?" | tee -a $L
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
echo "=== done" | tee -a $L
