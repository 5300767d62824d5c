#!/usr/bin/env bash
# Call B1 (performance and agreement of the final GPU code): BANE's summary
# by clusters with its serial part spread (the passes' most and the finite
# count over the cluster, the mean's chunks loaded 16 at a time), the
# deblend stage's waits folded, the fit's components brought down with the
# catalogue after the stages. bench_pipeline against a4fff1d (the GPU code
# of 02a287a) alternated three times; the timeline of radio.pipe at 8192^2
# (and the summary's kernel with SKYFIND_BANE_CLUSTER=1, a block a group);
# skyfind compare of four pipelines on the real images and three skies; 32
# images of 4096^2 in one batch.
set -u
L=$OUT/callB1.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
cp $B/extra/libsftrace.so $B/extra/libcupti.so.13 /tmp/ 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
FLOOR_OLD_BENCH=$B/extra/bench_pipeline_old FLOOR_PIPES=radio,lesson,sextractor SIZES="4096 8192" \
  FLOOR_VARIANTS="old new" FLOOR_ROUNDS=3 timeout 230 tests/gpu/floor.sh /tmp/fl bench > /tmp/fl.out 2>&1
grep -E "^===| gpu +[a-z]" /tmp/fl/floor.log > $OUT/callB1-bench.log
grep -E "^===|gpu +(background|deblend|fit|stages|end-to-end)" /tmp/fl/floor.log | grep -E "===|radio|stages" | tee -a $L
rm -f /tmp/fl/floor.log
SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=10 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr.out 2>&1
cp /tmp/fl/floor.log $OUT/callB1-trace.log
grep -E "window|bane_summary|fit_|db_split" $OUT/callB1-trace.log | head -12 | tee -a $L
rm -f /tmp/fl/floor.log
SKYFIND_BANE_CLUSTER=1 SFTRACE_LIB=/tmp/libsftrace.so LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/tmp TRACE_PIPES=radio TRACE_SIZE=8192 TRACE_DETAIL=0 timeout 60 tests/gpu/floor.sh /tmp/fl trace > /tmp/tr1.out 2>&1
cp /tmp/fl/floor.log $OUT/callB1-trace-cluster1.log
echo "SKYFIND_BANE_CLUSTER=1:" | tee -a $L
grep -E "window|bane_summary" $OUT/callB1-trace-cluster1.log | head -4 | tee -a $L
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
echo "=== done" | tee -a $L
