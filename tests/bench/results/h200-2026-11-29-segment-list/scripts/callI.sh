#!/usr/bin/env bash
# Call I: the final GPU code of this session (522986d): every Check suite
# against the CPU twins beside compute-sanitizer memcheck and racecheck
# (the segment and deblend suites at quick sizes, whole radio and sextractor
# runs); skyfind compare of radio, sextractor, lesson and aegean; the
# previous main (416ef11) and this build alternated twice; 32 radio images
# of 4096^2 in one batch (files/s).
set -u
L=$OUT/callI.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
t0=$(date +%s)
( SUITE_JOBS=8 timeout 300 tests/gpu/run-all.sh /tmp/ra checks > /tmp/ra.out 2>&1; echo "run-all checks rc=$? $(( $(date +%s) - t0 ))s" > /tmp/ra.rc ) &
p1=$!
( SAN_SUITES="segment deblend" SAN_PIPES="radio sextractor" SAN_JOBS=8 SAN_TIMEOUT=200 \
  timeout 240 tests/gpu/floor.sh /tmp/fs sanitizer > /tmp/san.out 2>&1; echo "sanitizer rc=$? $(( $(date +%s) - t0 ))s" > /tmp/san.rc ) &
p2=$!
wait $p1 $p2
cat /tmp/ra.rc | tee -a $L
grep -E "rc=|ALL PASSED|FAIL" /tmp/ra.out | head -30 | tee -a $L
cat /tmp/san.rc | tee -a $L
grep -E "rc=|SUMMARY|all passed|FAIL" /tmp/fs/floor.log | head -30 | tee -a $L
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 120 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 120 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callI-bench.log
grep -E "^===|gpu +(segment|deblend|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
mkdir -p /tmp/b4
for i in $(seq 1 32); do $SF simulate -q -n 4096 --seed $i -o /tmp/b4/s$i.fits & [ $((i % 16)) = 0 ] && wait; done; wait
for p in radio radio; do
  rm -rf /tmp/bo; t1=$(date +%s%N)
  timeout 60 $SF run -v -b gpu -p $p --json -o /tmp/bo /tmp/b4/*.fits > /tmp/run.json 2>/tmp/run.err; rc=$?
  t=$(( ($(date +%s%N) - t1) / 1000000 ))
  python3 -c "import json,sys; s=json.load(open('/tmp/run.json'))['summary']; print(f\"batch $p rc=$rc process {$t} ms: {s['ok']} ok {s['failed']} failed, {s['files_per_s']:.1f} files/s, busy {100*s['busy']:.1f}%, stages {s['stages_ms']:.1f} ms\")" 2>&1 | tee -a $L
  grep -E "steady" /tmp/run.err | tee -a $L
done
echo "=== done" | tee -a $L
