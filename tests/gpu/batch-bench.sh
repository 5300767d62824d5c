#!/usr/bin/env bash
# The batch benchmark of issue 13 on a GPU machine (tests/gpu/run-all.sh batch
# calls it): simulated images written to files (in the page cache), then
#  - the bound: bench_batch (the host read with skyfind's readers into
#    pinned buffers, and the pinned upload of the same bytes; the slower);
#  - skyfind run streaming (-b gpu, lesson and radio pipelines), the same
#    with --no-overlap, and the landed main's skyfind when the bundle carries
#    it (extra/skyfind-main): files/s, MB/s, GPU busy fraction;
#  - the lesson's CuPy code looping over the same files;
#  - one process per file at 2048 and 8192: wall time and its breakdown.
# Usage: tests/gpu/batch-bench.sh OUTDIR [N4096 N8192]
# BATCH_QUICK=1: skyfind's own rows only (no landed main, no CuPy, no 8 readers)
set -u
OUT=${1:?OUTDIR}
N4=${2:-64}
N8=${3:-16}
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
SF=$B/bin/skyfind
OLD=$B/extra/skyfind-main
W=${BATCH_WORK:-/tmp/skyfind-batch}
mkdir -p "$OUT" "$W"
ms() { date +%s%N; }
say() { printf '\n=== %s\n' "$*"; }
nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

say "simulated inputs: $N4 x 4096^2, $N8 x 8192^2, 2048^2 and 8192^2 singles"
mkdir -p "$W/s4096" "$W/s8192"
t0=$(ms)
seq 1 "$N4" | xargs -P 16 -I{} "$SF" simulate -q -n 4096 --seed {} -o "$W/s4096/img{}.fits"
seq 1 "$N8" | xargs -P 16 -I{} "$SF" simulate -q -n 8192 --seed 1{} -o "$W/s8192/img{}.fits"
"$SF" simulate -q -n 2048 --seed 7 -o "$W/one2048.fits"
"$SF" simulate -q -n 8192 --seed 8 -o "$W/one8192.fits"
echo "made in $(( ($(ms) - t0) / 1000000 )) ms; $(du -sh "$W" | cut -f1)"
cat "$W"/s4096/*.fits "$W"/s8192/*.fits "$W"/one*.fits >/dev/null   # in the page cache

json_of() { grep '"summary"' "$1" | tail -1; }
row() { # label, json summary line, nfiles
    python3 - "$1" "$2" <<'PY'
import json, sys
s = json.loads(sys.argv[2])["summary"]
print(f"{sys.argv[1]:<42} {s['ok']:>4} ok {s['failed']:>2} failed  {s['wall_ms']/1e3:7.2f} s  {s['files_per_s']:7.2f} files/s  {s['mb_per_s']:7.0f} MB/s  busy {100*s['busy']:5.1f}%  stages {s['stages_ms']:9.1f} ms")
PY
}
for size in 4096 8192; do
    D=$W/s$size
    files=$(ls "$D"/*.fits | sort -V)
    nf=$(echo "$files" | wc -l)
    say "$nf files of ${size}^2 ($(du -sh "$D" | cut -f1)): the bound"
    for r in 4 8; do
        "$B/bin/tests/bench/bench_batch" --readers $r $files | tee "$OUT/bound_${size}_r$r.txt" | grep -v '^{'
    done
    for p in lesson radio; do
        modes="stream readers8 no-overlap"; [ -n "${BATCH_QUICK:-}" ] && modes="stream no-overlap"
        for mode in $modes; do
            extra=""; [ $mode = no-overlap ] && extra="--no-overlap"; [ $mode = readers8 ] && extra="--readers 8"
            rm -rf "$W/o"
            t=$(ms)
            "$SF" run -v -b gpu -p $p $extra --json -o "$W/o" $files >"$OUT/run_${size}_${p}_$mode.json" 2>"$OUT/run_${size}_${p}_$mode.err"
            rc=$?; t=$(( ($(ms) - t) / 1000000 ))
            row "skyfind $p $mode (process $t ms, rc $rc)" "$(json_of "$OUT/run_${size}_${p}_$mode.json")" | tee -a "$OUT/batch_table.txt"
            grep -E "start-up|steady" "$OUT/run_${size}_${p}_$mode.err" | sed 's/^/    /' | tee -a "$OUT/batch_table.txt"
        done
        if [ -x "$OLD" ] && [ -z "${BATCH_QUICK:-}" ]; then
            rm -rf "$W/o"; t=$(ms)
            "$OLD" run -q -b gpu -p $p -o "$W/o" $files 2>"$OUT/old_${size}_$p.err"; rc=$?
            t=$(( ($(ms) - t) / 1000000 ))
            awk -v t=$t -v n=$nf -v p=$p -v rc=$rc -v mb=$(du -sm "$D" | cut -f1) 'BEGIN{printf "%-42s %4d files            %7.2f s  %7.2f files/s  %7.0f MB/s\n", "landed main " p " (rc " rc ")", n, t/1000, n/(t/1000), mb/(t/1000)}' | tee -a "$OUT/batch_table.txt"
        fi
    done
    rm -rf "$W/o"
    # a longer batch: the same files three times over (named by position)
    for r in 1 2 3; do echo "$files"; done >"$W/list3.txt"
    t=$(ms)
    "$SF" run -v -b gpu -p radio --name '{index}_{stem}' --json -o "$W/o" @"$W/list3.txt" >"$OUT/run_${size}_radio_x3.json" 2>"$OUT/run_${size}_radio_x3.err"
    rc=$?; t=$(( ($(ms) - t) / 1000000 ))
    row "skyfind radio stream, x3 files (process $t ms, rc $rc)" "$(json_of "$OUT/run_${size}_radio_x3.json")" | tee -a "$OUT/batch_table.txt"
    grep -E "start-up|steady" "$OUT/run_${size}_radio_x3.err" | sed 's/^/    /' | tee -a "$OUT/batch_table.txt"
    rm -rf "$W/o"
    [ -n "${BATCH_QUICK:-}" ] && continue
    (cd tests/bench/peers && python3 batch_cupy.py "$W/cupy" $files --json) | tee -a "$OUT/cupy_$size.txt" | head -1 | tee -a "$OUT/batch_table.txt"
    # the lesson catalogues agree with CuPy's (count of sources per file)
    "$SF" run -q -b gpu -p lesson -o "$W/les" $files 2>/dev/null
    python3 - "$W/les" "$W/cupy" <<'PY' | tee -a "$OUT/batch_table.txt"
import glob, os, sys
les, cup = sys.argv[1], sys.argv[2]
same = tot = 0
for f in sorted(glob.glob(os.path.join(cup, "*.cupy.csv"))):
    stem = os.path.basename(f)[:-9]
    a = sum(1 for l in open(f)) - 1
    b = sum(1 for l in open(os.path.join(les, stem + ".cat.csv")) if l[0] not in "#i")
    tot += 1; same += a == b
print(f"lesson catalogues: {same} of {tot} files have as many sources as the CuPy lesson's")
PY
    rm -rf "$W/cupy" "$W/les"
done

say "one process per file: wall time and breakdown (median of 5, after one warm-up)"
for f in one2048 one8192; do
    for which in new old; do
        bin=$SF; [ $which = old ] && bin=$OLD
        [ -x "$bin" ] || continue
        for p in lesson radio; do
            "$bin" run -q -b gpu -p $p -o "$W/o1" "$W/$f.fits" >/dev/null 2>&1
            ts=""
            for r in 1 2 3 4 5; do t=$(ms); "$bin" run -q -b gpu -p $p -o "$W/o1" "$W/$f.fits" >/dev/null 2>&1; ts="$ts $(( ($(ms) - t) / 1000 ))"; done
            med=$(echo $ts | tr ' ' '\n' | sort -n | sed -n 3p)
            printf "%-8s %-4s %-7s process wall median %7.1f ms  (runs:%s us)\n" $f $which $p "$(awk -v m=$med "BEGIN{print m/1000}")" "$ts" | tee -a "$OUT/onefile.txt"
        done
    done
    echo "--- breakdown, new, radio (-v):" | tee -a "$OUT/onefile.txt"
    "$SF" run -v -b gpu -p radio -o "$W/o1" "$W/$f.fits" 2>&1 | grep -E "phases|summed|device time|start-up|total" | tee -a "$OUT/onefile.txt"
    echo "--- landed main, radio:" | tee -a "$OUT/onefile.txt"
    [ -x "$OLD" ] && "$OLD" run -b gpu -p radio -o "$W/o1" "$W/$f.fits" 2>&1 | grep -E "device time" | tee -a "$OUT/onefile.txt"
done
rm -rf "$W"
