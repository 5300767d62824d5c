#!/usr/bin/env bash
# Call E1 (performance and agreement of the final code): BANE's summary by
# clusters of 8 blocks with the mean's chunks strided, the deblend stage's
# waits folded, the fit's components brought down with the catalogue after
# the stages. bench_pipeline against a4fff1d (the GPU code of 02a287a):
# radio.pipe with a variant SKYFIND_BANE_CLUSTER=1 alternated three times,
# lesson and sextractor twice; the timeline of radio.pipe at 8192^2;
# skyfind compare of four pipelines; 32 radio images of 4096^2 in one batch,
# 02a287a's skyfind and this one alternated twice.
set -u
L=$OUT/callE1.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; nproc; } | tee $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="old new SKYFIND_BANE_CLUSTER=1" FLOOR_ROUNDS=3 timeout 200 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callE1-bench-radio.log
grep -E "^===|gpu +(stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl2.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callE1-bench-lesson-sextractor.log
grep -E "^===|gpu +(stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callE1-trace.log
grep -E "window|bane_summary|memset" $OUT/callE1-trace.log | head -6 | tee -a $L
rm -f /tmp/fl/floor.log
COMPARE_PIPES="radio sextractor lesson aegean" SIZES="2048 4096 8192" timeout 170 tests/gpu/floor.sh /tmp/fl compare > /tmp/cmp.out 2>&1
grep -E "^===|real images|sim[0-9]+:" /tmp/fl/floor.log | tee -a $L
mkdir -p /tmp/b4
for i in $(seq 1 32); do $SF simulate -q -n 4096 --seed $i -o /tmp/b4/s$i.fits & [ $((i % 16)) = 0 ] && wait; done; wait
for round in 1 2; do
for v in old new; do
  exe=$SF; [ $v = old ] && exe=$B/extra/skyfind_old
  for p in radio sextractor; do
  rm -rf /tmp/bo; t1=$(date +%s%N)
  timeout 60 $exe run -v -b gpu -p $p --json -o /tmp/bo /tmp/b4/*.fits > /tmp/run.json 2>/tmp/run.err; rc=$?
  t=$(( ($(date +%s%N) - t1) / 1000000 ))
  python3 - "$p $v" "$rc" "$t" <<'PY' 2>&1 | tee -a $L
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
done
done
echo "=== done" | tee -a $L
