#!/usr/bin/env bash
# Call E (final): the upload without a wait (h2d leaves its last chunks on
# the stream; sf_pipeline_run reads the upload's time after the stages) and
# the timer's marks made before it: every Check suite against the CPU twins
# beside compute-sanitizer (memcheck and racecheck on the segment and
# deblend suites and whole radio and sextractor runs at 512^2; memcheck on
# whole lesson and radio runs at 4096^2, which take the staged upload, with
# --save all, whose maps come down through the same chunks); skyfind compare
# of four pipelines; the previous main (e295894) and this build alternated
# twice; 32 images of 4096^2 in one batch (the upload lane's path); the
# timeline of radio.pipe at 8192^2.
set -u
L=$OUT/callE.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
t0=$(date +%s)
( SUITE_JOBS=8 timeout 330 tests/gpu/run-all.sh /tmp/ra checks > /tmp/ra.out 2>&1; echo "run-all checks rc=$? $(( $(date +%s) - t0 ))s" > /tmp/ra.rc ) &
p1=$!
( SAN_SUITES="segment deblend" SAN_PIPES="radio sextractor" SAN_JOBS=6 SAN_TIMEOUT=200 \
  timeout 240 tests/gpu/floor.sh /tmp/fs sanitizer > /tmp/san.out 2>&1; echo "sanitizer rc=$? $(( $(date +%s) - t0 ))s" > /tmp/san.rc ) &
p2=$!
( mkdir -p /tmp/s4; $SF simulate -q -n 4096 --seed 3 -o /tmp/s4/big.fits
  for p in lesson radio; do
    timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $SF run -q -b gpu -p $p --save all -o /tmp/s4/o_$p /tmp/s4/big.fits > /tmp/s4/mc_$p.log 2>&1
    echo "memcheck run $p 4096^2 --save all rc=$? $(grep 'ERROR SUMMARY' /tmp/s4/mc_$p.log)" >> /tmp/s4/mc.rc
  done ) &
p3=$!
wait $p1 $p2 $p3
cat /tmp/ra.rc | tee -a $L
grep -E "rc=|ALL PASSED|FAIL" /tmp/ra.out | head -30 | tee -a $L
cat /tmp/san.rc | tee -a $L
grep -E "rc=|SUMMARY|all passed|FAIL" /tmp/fs/floor.log | head -30 | tee -a $L
cat /tmp/s4/mc.rc | tee -a $L
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 150 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callE-bench.log
grep -E "^===|gpu +(upload|background|stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
mkdir -p /tmp/b4
for i in $(seq 1 32); do $SF simulate -q -n 4096 --seed $i -o /tmp/b4/s$i.fits & [ $((i % 16)) = 0 ] && wait; done; wait
for p in radio radio sextractor; do
  rm -rf /tmp/bo; t1=$(date +%s%N)
  timeout 60 $SF run -v -b gpu -p $p --json -o /tmp/bo /tmp/b4/*.fits > /tmp/run.json 2>/tmp/run.err; rc=$?
  t=$(( ($(date +%s%N) - t1) / 1000000 ))
  python3 - "$p" "$rc" "$t" <<'PY' 2>&1 | tee -a $L
import json, sys
p, rc, t = sys.argv[1:]
s = None
for line in open('/tmp/run.json'):
    o = json.loads(line)
    if 'summary' in o: s = o['summary']
    elif 'files_per_s' in o: s = o
print(f"batch {p} rc={rc} process {t} ms: " + (f"{s.get('ok')} ok {s.get('failed')} failed, {s['files_per_s']:.1f} files/s" if s else "no summary"))
PY
  grep -E "steady" /tmp/run.err | tee -a $L
done
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 timeout 90 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callE-trace.log
grep -E "window|^ +[0-9.]+ +[0-9.]+ +memcpy HtoD|HtoD" /tmp/fl/floor.log | head -8 | tee -a $L
echo "=== done" | tee -a $L
