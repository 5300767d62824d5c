#!/usr/bin/env bash
# Thread scaling of the CPU backend: each pipeline (radio, sextractor,
# lesson) on a simulated SIZE^2 image, run end to end (`skyfind run -b cpu
# --threads T`, a file in and a catalogue out, the process's wall time) at
# 1, 2, 4, ... threads up to the cores of the machine; the median and the
# lowest of REPS runs, each stage's time from the run report (--json) of
# the median run, and a check that every run's CSV catalogue is
# byte-identical to the first one-thread run's. The runs go round by round
# (one at each thread count, then the next round), so that a busy spell of
# a shared host falls on every thread count alike rather than on one; the
# speed-up is given from the medians and from the lowest times.
# Beside the stages, the rest of the process from the same report: start
# (process start to main, /proc's clock ticks, so up to 10 ms high), read,
# decode, write, and "other" (the wall time none of those explain: the
# engine's set-up, freeing, exit).
#   [PIPES="radio lesson"] tests/bench/threads.sh SKYFIND OUTDIR [SIZES] [REPS]
# Writes OUTDIR/threads.md (a table) and OUTDIR/threads.csv; exits 1 if any
# catalogue differs between thread counts.
set -u
SF=${1:?skyfind binary}
OUT=${2:?output folder}
SIZES=${3:-"4096 8192"}
REPS=${4:-3}
mkdir -p "$OUT/threads"
W=$OUT/threads
ncpu=$(nproc)
T=""; t=1
while [ $t -le "$ncpu" ]; do T="$T $t"; t=$((t * 2)); done
[ $((t / 2)) -lt "$ncpu" ] && T="$T $ncpu"
PY=$(command -v python3)
fail=0
echo "size,pipeline,threads,wall_ms,lowest_ms,stages_ms,stage_ms,identical,start_ms,read_ms,decode_ms,write_ms,other_ms" >"$OUT/threads.csv"
for n in $SIZES; do
    "$SF" simulate -q -n "$n" --seed 11 -o "$W/sim$n.fits" || exit 2
    cat "$W/sim$n.fits" >/dev/null # in the page cache
    for p in ${PIPES:-radio sextractor lesson}; do
        rm -f "$W/differ.txt"
        for t in $T; do rm -f "$W/runs$t.txt" "$W/o$t/sim$n.cat.csv"; done
        for r in $(seq "$REPS"); do
            for t in $T; do
                t0=$(date +%s%N)
                "$SF" run -q -b cpu -p "$p" --threads "$t" --json -o "$W/o$t" "$W/sim$n.fits" \
                    >"$W/j$t.$r.json" || fail=1
                t1=$(date +%s%N)
                echo "$(((t1 - t0) / 1000)) $r" >>"$W/runs$t.txt"
                if [ "$t" = 1 ] && [ "$r" = 1 ]; then
                    cp "$W/o$t/sim$n.cat.csv" "$W/ref.csv"
                elif ! cmp -s "$W/o$t/sim$n.cat.csv" "$W/ref.csv"; then
                    echo "threads.sh: ${n}^2 $p, $t threads, round $r: the catalogue differs" >&2
                    echo "$t" >>"$W/differ.txt"
                    fail=1
                fi
            done
        done
        for t in $T; do
            med=$(sort -n "$W/runs$t.txt" | awk -v k=$(((REPS + 1) / 2)) 'NR==k{print $2}')
            wall=$(sort -n "$W/runs$t.txt" | awk -v k=$(((REPS + 1) / 2)) 'NR==k{printf "%.1f", $1/1000}')
            low=$(sort -n "$W/runs$t.txt" | awk 'NR==1{printf "%.1f", $1/1000}')
            if [ "$t" = 1 ]; then same=ref
            elif [ -f "$W/differ.txt" ] && grep -qx "$t" "$W/differ.txt"; then same=NO
            else same=yes; fi
            "$PY" - "$W/j$t.$med.json" "$n" "$p" "$t" "$wall" "$low" "$same" >>"$OUT/threads.csv" <<'EOF'
import json, sys
f, n, p, t, wall, low, same = sys.argv[1:]
row, summ = None, None
for line in open(f):
    d = json.loads(line)
    if "stages" in d:
        row = d
    elif "summary" in d:
        summ = d["summary"]
st = " ".join("%s=%.1f" % (s["name"], s["ms"]) for s in row["stages"])
ph = row["phases"]
known = summ["main_ms"] + ph["read_ms"] + ph["decode_ms"] + ph["stages_ms"] + ph["write_ms"]
print("%s,%s,%s,%s,%s,%.1f,%s,%s,%.1f,%.1f,%.1f,%.1f,%.1f" % (n, p, t, wall, low, ph["stages_ms"], st,
      same, summ["main_ms"], ph["read_ms"], ph["decode_ms"], ph["write_ms"], float(wall) - known))
EOF
        done
    done
done
"$PY" - "$OUT/threads.csv" >"$OUT/threads.md" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
one = {(r["size"], r["pipeline"]): (float(r["wall_ms"]), float(r["lowest_ms"]))
       for r in rows if r["threads"] == "1"}
print("| size | pipeline | threads | wall ms (process): median / lowest | speed-up: medians / lowest "
      "| stages ms | catalogue | stages | start / read / decode / write / other ms |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    w, lo = float(r["wall_ms"]), float(r["lowest_ms"])
    w1, lo1 = one[(r["size"], r["pipeline"])]
    print("| %s² | %s | %s | %.0f / %.0f | %.2f / %.2f | %s | %s | %s | %s / %s / %s / %s / %s |" % (
          r["size"], r["pipeline"], r["threads"], w, lo, w1 / w, lo1 / lo, r["stages_ms"],
          r["identical"], r["stage_ms"], r["start_ms"], r["read_ms"], r["decode_ms"],
          r["write_ms"], r["other_ms"]))
EOF
cat "$OUT/threads.md"
exit $fail
