#!/usr/bin/env bash
# Call C1 (performance and agreement of the final GPU code): BANE's summary
# by clusters with the mean's chunks strided (coalesced; the CPU twin adds
# them in the same order), the labels image cleared on the zero lane beside
# BANE's summary, the deblend stage's waits folded, the fit's components
# brought down with the catalogue. bench_pipeline: radio.pipe against
# a4fff1d (the GPU code of 02a287a) and this build with
# SKYFIND_ZERO_LANE=0 and with SKYFIND_BANE_CLUSTER=1, alternated three
# times; lesson and sextractor old/new twice; the timeline of radio.pipe at
# 8192^2; skyfind compare of four pipelines; 32 images of 4096^2 in one
# batch; the CPU backend's thread scaling of radio.pipe at 4096^2.
set -u
L=$OUT/callC1.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="old new SKYFIND_ZERO_LANE=0 SKYFIND_BANE_CLUSTER=1" FLOOR_ROUNDS=3 timeout 240 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callC1-bench-radio.log
grep -E "^===|gpu +(background|segment|deblend|fit|stages|end-to-end)" /tmp/fl/floor.log | grep -E "===|8192" | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl2.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callC1-bench-lesson-sextractor.log
grep -E "^===|gpu +(stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callC1-trace.log
grep -E "window|bane_summary|memset" $OUT/callC1-trace.log | head -6 | tee -a $L
rm -f /tmp/fl/floor.log
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 170 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
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
PIPES="radio" timeout 120 tests/bench/threads.sh $SF /tmp/thr "4096" 3 > /tmp/thr.out 2>&1; echo "threads.sh rc=$?" | tee -a $L
cp /tmp/thr/threads.md $OUT/callC1-threads.md 2>/dev/null; cp /tmp/thr/threads.csv $OUT/callC1-threads.csv 2>/dev/null
cat /tmp/thr/threads.md 2>/dev/null | tee -a $L
echo "=== done" | tee -a $L
