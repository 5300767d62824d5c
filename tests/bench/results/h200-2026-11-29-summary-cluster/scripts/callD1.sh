#!/usr/bin/env bash
# Call D1: where the zero lane clears the labels image (beside BANE's
# summary, the default; SKYFIND_ZERO_AT=convolve: at the convolve stage's
# start, while the host builds the kernel; SKYFIND_ZERO_LANE=0: inside the
# segment stage), radio.pipe at 4096^2 and 8192^2 against a4fff1d (the GPU
# code of 02a287a), alternated three times; 32 radio images of 4096^2 in
# one batch, 02a287a's skyfind and this one (and SKYFIND_ZERO_LANE=0)
# alternated twice; the timeline of radio.pipe at 8192^2.
set -u
L=$OUT/callD1.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio SIZES="4096 8192" \
  FLOOR_VARIANTS="old new SKYFIND_ZERO_AT=convolve SKYFIND_ZERO_LANE=0" FLOOR_ROUNDS=3 timeout 240 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callD1-bench-radio.log
grep -E "^===|gpu +(background|convolve|segment|stages)" /tmp/fl/floor.log | grep -E "===|8192" | tee -a $L
rm -f /tmp/fl/floor.log
mkdir -p /tmp/b4
for i in $(seq 1 32); do $SF simulate -q -n 4096 --seed $i -o /tmp/b4/s$i.fits & [ $((i % 16)) = 0 ] && wait; done; wait
for round in 1 2; do
for v in old new zero0; do
  exe=$SF; envv=""
  [ $v = old ] && exe=$B/extra/skyfind_old
  [ $v = zero0 ] && envv="SKYFIND_ZERO_LANE=0"
  rm -rf /tmp/bo; t1=$(date +%s%N)
  env $envv timeout 60 $exe run -v -b gpu -p radio --json -o /tmp/bo /tmp/b4/*.fits > /tmp/run.json 2>/tmp/run.err; rc=$?
  t=$(( ($(date +%s%N) - t1) / 1000000 ))
  python3 - "$v" "$rc" "$t" <<'PY' 2>&1 | tee -a $L
import json, sys
p, rc, t = sys.argv[1:]
s = None
for line in open('/tmp/run.json'):
    o = json.loads(line)
    if 'summary' in o: s = o['summary']
    elif 'files_per_s' in o: s = o
print(f"batch radio {p} rc={rc} process {t} ms: " + (f"{s.get('ok')} ok {s.get('failed')} failed, {s['files_per_s']:.1f} files/s" if s else "no summary"))
PY
  grep -E "steady" /tmp/run.err | tee -a $L
done
done
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callD1-trace.log
grep -E "window|bane_summary|memset" $OUT/callD1-trace.log | head -6 | tee -a $L
echo "=== done" | tee -a $L
