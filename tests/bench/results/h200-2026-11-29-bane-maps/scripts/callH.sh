#!/usr/bin/env bash
# Call H (2026-11-29): call G's batch benchmark stopped (200 s limit) after
# its first bench_batch; this checks the final code's streaming batch
# directly: 32 radio images of 4096^2, skyfind run -b gpu (radio, lesson),
# each under a 60 s limit, files/s from the run report.
set -u
L=$OUT/callH.log
B=$SKYFIND_BUNDLE
SF=$B/bin/skyfind
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; } | tee $L
mkdir -p /tmp/b4
for i in $(seq 1 32); do $SF simulate -q -n 4096 --seed $i -o /tmp/b4/s$i.fits & [ $((i % 16)) = 0 ] && wait; done; wait
ls /tmp/b4 | wc -l | tee -a $L
for p in radio lesson radio; do
  rm -rf /tmp/bo; t0=$(date +%s%N)
  timeout 60 $SF run -v -b gpu -p $p --json -o /tmp/bo /tmp/b4/*.fits > /tmp/run.json 2>/tmp/run.err; rc=$?
  t=$(( ($(date +%s%N) - t0) / 1000000 ))
  python3 -c "import json,sys; s=json.load(open('/tmp/run.json'))['summary']; print(f\"$p rc=$rc process {$t} ms: {s['ok']} ok {s['failed']} failed, {s['files_per_s']:.1f} files/s, busy {100*s['busy']:.1f}%, stages {s['stages_ms']:.1f} ms\")" 2>&1 | tee -a $L
  grep -E "steady" /tmp/run.err | tee -a $L
done
echo "=== done" | tee -a $L
