#!/usr/bin/env bash
# Call G (final code): compute-sanitizer memcheck and racecheck on the GPU
# cases of the suites whose kernels changed (fit: fit_sort, the one-block
# scans; deblend: the scans; measure: ms_list/ms_scan; convolve:
# direct2d_rb's float rows) and on whole radio runs (512^2 sky); then
# bench_pipeline against 3309ecd (radio alternated three times, lesson and
# sextractor twice), the timeline of radio at 8192^2, and a batch of 32
# images of 4096^2 (skyfind run -b gpu), 3309ecd's skyfind and this one.
set -u
L=$OUT/callG.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
CK_RUN_CASE=gpu SAN_SUITES="fit deblend measure convolve" SAN_PIPES=radio SAN_JOBS=10 SAN_TIMEOUT=240 \
  timeout 260 tests/gpu/floor.sh /tmp/fs sanitizer > /tmp/fs.out 2>&1
echo "sanitizer rc=$?" | tee -a $L
grep -E "memcheck|racecheck" /tmp/fs/floor.log | tee -a $L
cp /tmp/fs/floor.log $OUT/callG-sanitizer.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=3 timeout 150 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callG-bench-radio.log
grep -E "^===|gpu +(stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=2 timeout 110 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl2.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callG-bench-lesson-sextractor.log
grep -E "^===|gpu +(stages|end-to-end)" /tmp/fl/floor.log | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 50 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callG-trace.log
grep -E "window" $OUT/callG-trace.log | head -2 | tee -a $L
mkdir -p /tmp/b4
for i in $(seq 1 32); do $SF simulate -q -n 4096 --seed $i -o /tmp/b4/s$i.fits & [ $((i % 16)) = 0 ] && wait; done; wait
for round in 1 2; do
for v in old new; do
  exe=$SF; [ $v = old ] && exe=$B/extra/skyfind_old
  p=radio
  rm -rf /tmp/bo; t1=$(date +%s%N)
  timeout 40 $exe run -v -b gpu -p $p --json -o /tmp/bo /tmp/b4/*.fits > /tmp/run.json 2>/tmp/run.err; rc=$?
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
echo "=== done" | tee -a $L
