#!/usr/bin/env bash
# Files per second of two skyfind builds alternated on one batch (the
# whole process, `skyfind run -v --json` over N simulated files), for a
# before/after figure in one call on the GPU machine:
#   tests/gpu/batch-ab.sh OLD_SKYFIND NEW_SKYFIND [PIPES] [N] [ROUNDS] [SIZE]
# PIPES default "radio", N 32 files of SIZE^2 (default 4096), ROUNDS 2;
# BATCH_BACKEND (default gpu) is passed to -b, BATCH_WORK is the folder of
# the files (default /tmp/skyfind-ab). Prints a line a run (process wall
# time, files ok and failed, files/s) and skyfind's steady-state line.
set -u
OLD=${1:?usage: batch-ab.sh OLD_SKYFIND NEW_SKYFIND [PIPES] [N] [ROUNDS] [SIZE]}
NEW=${2:?usage: batch-ab.sh OLD_SKYFIND NEW_SKYFIND [PIPES] [N] [ROUNDS] [SIZE]}
PIPES=${3:-radio}
N=${4:-32}
ROUNDS=${5:-2}
SIZE=${6:-4096}
W=${BATCH_WORK:-/tmp/skyfind-ab}
mkdir -p "$W/in"
rm -f "$W"/in/*.fits
seq 1 "$N" | xargs -P 16 -I{} "$NEW" simulate -q -n "$SIZE" --seed {} -o "$W/in/s{}.fits"
for round in $(seq "$ROUNDS"); do
    for v in old new; do
        exe=$NEW
        [ $v = old ] && exe=$OLD
        for p in $PIPES; do
            rm -rf "$W/out"
            t1=$(date +%s%N)
            "$exe" run -v -b "${BATCH_BACKEND:-gpu}" -p "$p" --json -o "$W/out" "$W"/in/*.fits \
                >"$W/run.json" 2>"$W/run.err"
            rc=$?
            t=$((($(date +%s%N) - t1) / 1000000))
            python3 - "$p $v, round $round" "$rc" "$t" "$W/run.json" <<'PY'
import json, sys
what, rc, t, path = sys.argv[1:]
s = None
for line in open(path):
    o = json.loads(line)
    if 'summary' in o:
        s = o['summary']
print(f"batch {what}: rc={rc}, process {t} ms: " +
      (f"{s.get('ok')} ok, {s.get('failed')} failed, {s['files_per_s']:.1f} files/s" if s else "no summary"))
PY
            grep -E "steady" "$W/run.err"
        done
    done
done
