#!/usr/bin/env bash
# Two skyfind builds on the CPU backend, alternated on the same simulated
# images: for each size and pipeline, ROUNDS rounds of (old, new), each a
# fresh process (`skyfind run -b cpu --threads T --json`, a file in and a
# catalogue out); the median and the lowest of the process's wall time and
# of each stage's time and of the read, decode and write phases (the run
# report), and whether the two builds' catalogues (CSV, and the component
# table when there is one) are byte-identical. Optionally SExtractor on the
# same files, file to file, with the harness's configuration (written by
# tests/bench/peers/pipeline_peers.py --sex-config; SEXTRACTOR=path; its
# BACK_SIZE SEXBOX, default 102: radio.pipe's box on these skies, which
# harness.py gives it). SEXWORK="harness radio" runs it with each of
# pipeline_peers.py's --work settings: harness (no detection filter, no
# deblending: the rows "SExtractor") and radio (radio.pipe's beam filter
# and deblending: "SExtractor-radio"); the default is harness.
#   [PIPES="radio"] [THREADS=1] [SEXTRACTOR=source-extractor] [SEXBOX=102]
#   [SEXWORK=harness]
#   tests/bench/cpu-ab.sh OLD NEW OUTDIR [SIZES] [ROUNDS]
# Writes OUTDIR/cpu-ab.md (a table) and OUTDIR/cpu-ab.csv; exits 1 if any
# catalogue differs between the builds.
set -u
OLD=${1:?old skyfind}
NEW=${2:?new skyfind}
OUT=${3:?output folder}
SIZES=${4:-"2048 4096"}
ROUNDS=${5:-5}
T=${THREADS:-1}
W=$OUT/cpu-ab
mkdir -p "$W"
PY=$(command -v python3)
fail=0
: >"$W/times.txt"
: >"$W/same.txt"
for n in $SIZES; do
    "$NEW" simulate -q -n "$n" --seed 11 -o "$W/sim$n.fits" || exit 2
    cat "$W/sim$n.fits" >/dev/null # in the page cache
    for p in ${PIPES:-radio}; do
        for r in $(seq "$ROUNDS"); do
            for which in old new; do
                b=$OLD
                [ $which = new ] && b=$NEW
                t0=$(date +%s%N)
                OMP_NUM_THREADS=$T "$b" run -q -b cpu -p "$p" --threads "$T" --json -o "$W/$which" \
                    "$W/sim$n.fits" >"$W/j.json" || fail=1
                t1=$(date +%s%N)
                "$PY" - "$W/j.json" "$n" "$p" "$which" "$(((t1 - t0) / 1000))" >>"$W/times.txt" <<'EOF'
import json, sys
f, n, p, which, us = sys.argv[1:]
for line in open(f):
    d = json.loads(line)
    if "stages" in d:
        print(n, p, which, "wall", int(us) / 1e3)
        for s in d["stages"]:
            print(n, p, which, s["name"], s["ms"])
        for ph in ("read", "decode", "write"):
            print(n, p, which, ph, d["phases"][ph + "_ms"])
EOF
            done
        done
        for f in cat.csv comp.csv; do
            [ -f "$W/old/sim$n.$f" ] || continue
            if cmp -s "$W/old/sim$n.$f" "$W/new/sim$n.$f"; then echo "$n $p same $f" >>"$W/same.txt"
            else echo "$n $p DIFFERENT $f" >>"$W/same.txt"; fail=1; fi
        done
    done
    if [ -n "${SEXTRACTOR:-}" ]; then
        box=${SEXBOX:-102} # radio.pipe's background box on these skies, as harness.py passes it
        for work in ${SEXWORK:-harness}; do
            label=SExtractor
            [ "$work" = harness ] || label=SExtractor-$work
            conf=$("$PY" "$(dirname "$0")/peers/pipeline_peers.py" --threads "$T" --work "$work" \
                --fits "$W/sim$n.fits" --sex-config "$W/sex-$work" --box "$box" --npix $((n * n))) || exit 2
            for r in $(seq "$ROUNDS"); do
                t0=$(date +%s%N)
                "$SEXTRACTOR" "$W/sim$n.fits" -c "$conf" 2>/dev/null || fail=1
                t1=$(date +%s%N)
                echo "$n $label - wall $(((t1 - t0) / 1000))" | awk '{print $1, $2, $3, $4, $5 / 1e3}' >>"$W/times.txt"
            done
            echo "$n $label box $box: $(grep -vc '^#' "$W/sex-$work/cat.txt") sources" >>"$W/same.txt"
        done
    fi
done
"$PY" - "$W/times.txt" "$OUT" <<'EOF'
import collections, statistics, sys
rows = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    n, p, which, stage, ms = line.split()
    key = (int(n), p, stage)
    if key not in order:
        order.append(key)
    rows[key + (which,)].append(float(ms))
out = ["| size | pipeline | stage | old: median (lowest) ms | new: median (lowest) ms | new/old |",
       "|---|---|---|--:|--:|--:|"]
csv = ["size,pipeline,stage,old_median,old_min,new_median,new_min"]
for key in order:
    o, nw = rows.get(key + ("old",), []), rows.get(key + ("new",), [])
    if key[1].startswith("SExtractor"):
        o = rows.get(key + ("-",), [])
    f = lambda v: "%.1f (%.1f)" % (statistics.median(v), min(v)) if v else "-"
    ratio = ("%.2f" % (statistics.median(nw) / statistics.median(o))
             if o and nw and statistics.median(o) > 0 else "-")
    out.append("| %d | %s | %s | %s | %s | %s |" % (key[0], key[1], key[2], f(o), f(nw), ratio))
    csv.append("%d,%s,%s,%s,%s,%s,%s" % (key + tuple(
        "%.3f" % g(v) if v else "" for v in (o, nw) for g in (statistics.median, min))))
open(sys.argv[2] + "/cpu-ab.md", "w").write("\n".join(out) + "\n")
open(sys.argv[2] + "/cpu-ab.csv", "w").write("\n".join(csv) + "\n")
print("\n".join(out))
EOF
cat "$W/same.txt"
exit $fail
