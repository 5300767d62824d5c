#!/usr/bin/env bash
# Where a short batch loses to the bound (issue 13): the same 64 x 4096^2
# files (radio pipeline) with the read-ahead pool (--queue), the readers and
# the writers varied, beside bench_batch's bound; per run, the medians of the
# per-image phases (--json).
# Usage: tests/gpu/batch-queue.sh OUTDIR [N]
set -u
OUT=${1:?OUTDIR}
N=${2:-64}
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
SF=$B/bin/skyfind
W=${BATCH_WORK:-/tmp/skyfind-bq}
mkdir -p "$OUT" "$W/s"
seq 1 "$N" | xargs -P 16 -I{} "$SF" simulate -q -n 4096 --seed {} -o "$W/s/img{}.fits"
files=$(ls "$W"/s/*.fits | sort -V)
cat $files >/dev/null
for r in 4 8; do "$B/bin/tests/bench/bench_batch" --readers $r $files | grep -E '^bound|^host'; done
run() { # label, options...
    local label=$1; shift
    rm -rf "$W/o"
    env ${ENVV:-} "$SF" run -v -b gpu -p radio "$@" --json -o "$W/o" $files >"$OUT/q_$label.json" 2>"$OUT/q_$label.err"
    python3 - "$label" "$OUT/q_$label.json" <<'PY'
import json, statistics as S, sys
L = [json.loads(l) for l in open(sys.argv[2])]
s = L[-1]["summary"]; ph = [d["phases"] for d in L[:-1] if "phases" in d]
med = lambda k: S.median(p.get(k, 0) for p in ph) if ph else 0
print(f"{sys.argv[1]:<22} {s['ok']:>3} ok {s['wall_ms']:7.1f} ms {s['files_per_s']:7.1f} files/s busy {100*s['busy']:5.1f}% "
      f"first {s.get('first_done_ms', 0):6.1f} last {s.get('last_done_ms', 0):6.1f} | median read {med('read_ms'):5.1f} queue {med('queue_ms'):6.1f} "
      f"upload {med('upload_ms'):5.2f} stages {med('stages_ms'):5.2f} write {med('write_ms'):5.1f}")
PY
    grep -E "start-up|summed phases" "$OUT/q_$label.err" | sed 's/^ *skyfind: /    /'
}
# VARIANTS: which runs (default: all); ENVV: developer knobs for one run
# (SKYFIND_BATCH_PIN=1: pin the pool's buffers whatever its size, src/engine/batch.c)
for rep in 1 2; do
    for v in ${VARIANTS:-default q24 q64 q64r6 q64r8 q24r6 q16pin q24pin q64pin}; do
        case $v in
            default) run default ;;
            q24) run q24 --queue 24 ;;
            q64) run q64 --queue 64 ;;
            q64r6) run q64r6 --queue 64 --readers 6 ;;
            q64r8) run q64r8 --queue 64 --readers 8 ;;
            q24r6) run q24r6 --queue 24 --readers 6 ;;
            q16pin) ENVV=SKYFIND_BATCH_PIN=1 run q16pin --queue 16 ;;
            q24pin) ENVV=SKYFIND_BATCH_PIN=1 run q24pin --queue 24 ;;
            q64pin) ENVV=SKYFIND_BATCH_PIN=1 run q64pin --queue 64 ;;
        esac
    done
done
rm -rf "$W"
