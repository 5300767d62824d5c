#!/usr/bin/env bash
# Call J: test_background (the suite call I's 300 s limit cut), and the
# 32-image radio batch with its summary read from the JSON lines.
set -u
L=$OUT/callJ.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
echo "code: $(cat $B/extra/HEAD)" | tee $L
( t0=$(date +%s); timeout 200 $B/bin/tests/test_background > /tmp/suite-bg.log 2>&1; echo "test_background rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^[0-9]+%' /tmp/suite-bg.log | tail -1)" > /tmp/bg.rc ) &
p1=$!
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
  grep -E "steady|files/s" /tmp/run.err | tee -a $L
done
wait $p1
cat /tmp/bg.rc | tee -a $L
echo "=== done" | tee -a $L
