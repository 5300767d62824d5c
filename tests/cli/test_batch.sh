#!/usr/bin/env bash
# Batch runs: @LIST and - inputs, --name, --plane all, --merge, the same
# catalogues whatever the workers (-j 1, -j 3, --no-overlap), exit status 1
# with the good files complete, 8 processes creating one new output folder at
# once, and a run killed with SIGKILL then resumed: every output exactly once,
# complete, byte-identical to an uninterrupted run.
set -u
SKYFIND=${SKYFIND:-build/skyfind}
DATA=${SKYFIND_TEST_DATA:-../shared/data}
. "$(dirname "$0")/tally.sh" # $T, ok, bad, check
run() { "$SKYFIND" run -q -b cpu "$@"; }

mkdir -p "$T/in"
for i in $(seq 1 24); do
    "$SKYFIND" simulate -q -n $((96 + 8 * (i % 5))) --seed $i -o "$T/in/img$i.fits" || bad "simulate $i"
done
ls "$T"/in/img*.fits | sort -V >"$T/list.txt"

# reference: one worker, no overlap
run --no-overlap -o "$T/ref" --merge "$T/ref.merged.csv" @"$T/list.txt"; rc=$?
check '[ $rc = 0 ]' "reference run exit $rc"
check '[ $(ls "$T"/ref/*.cat.csv | wc -l) = 24 ]' "reference run wrote $(ls "$T"/ref/*.cat.csv | wc -l) catalogues"
same() { # folder against the reference: every catalogue byte-identical
    local d=$1 n=0
    for f in "$T"/ref/*.cat.csv; do cmp -s "$f" "$d/$(basename "$f")" || { echo "differs: $d/$(basename "$f")"; return 1; }; n=$((n + 1)); done
    [ "$n" = 24 ] && [ "$(ls "$d"/*.cat.csv | wc -l)" = 24 ]
}
run -j 3 -o "$T/j3" @"$T/list.txt"
check 'same "$T/j3"' "-j 3 catalogues differ from --no-overlap"
run -j 1 --queue 1 --readers 1 -o "$T/j1" @"$T/list.txt"
check 'same "$T/j1"' "-j 1 --queue 1 catalogues differ"
# paths on standard input
run -j 2 -o "$T/stdin" - <"$T/list.txt"
check 'same "$T/stdin"' "- (standard input) catalogues differ"
# the merged catalogue: file and plane first, every row of every catalogue once
rows=$(grep -hv '^#' "$T"/ref/*.cat.csv | grep -cv '^id,')
mrows=$(grep -v '^#' "$T/ref.merged.csv" | grep -cv '^file,plane,id,')
check '[ "$rows" = "$mrows" ] && [ "$rows" -gt 24 ]' "merged rows $mrows, catalogue rows $rows"
check 'grep -q "^file,plane,id,x,y," "$T/ref.merged.csv"' "merged header"
check 'grep -v "^#" "$T/ref.merged.csv" | sed -n 2p | grep -q "^$T/in/img1.fits,1,1,"' "merged first row is img1's source 1"
# --name
run --name 'cat_{index}_{stem}' -o "$T/named" "$T/in/img3.fits" "$T/in/img4.fits"
check '[ -f "$T/named/cat_1_img3.cat.csv" ] && [ -f "$T/named/cat_2_img4.cat.csv" ]' "--name outputs: $(ls "$T/named")"
"$SKYFIND" run -q -b cpu --name 'a/{stem}' -o "$T/x" "$T/in/img3.fits" 2>"$T/err"; rc=$?
check '[ $rc = 2 ] && grep -q "must not contain" "$T/err"' "--name with / exit $rc"
# --plane all: every plane of a cube, each its own image
if [ -f "$DATA/radio_parkes_1904-66_SIN_cube10.fits" ]; then
    run --plane all --merge "$T/cube.csv" -o "$T/cube" "$DATA/radio_parkes_1904-66_SIN_cube10.fits"; rc=$?
    check '[ $rc = 0 ] && [ $(ls "$T"/cube/*_p*.cat.csv | wc -l) = 10 ]' "--plane all wrote $(ls "$T"/cube | tr '\n' ' ')"
    check 'grep -v "^#" "$T/cube.csv" | cut -d, -f2 | grep -vx plane | sort -un | tr "\n" " " | grep -q "^1 2 3 4 5 6 7 8 9 10 $"' "merged planes of the cube"
    run --plane 3 -o "$T/p3" "$DATA/radio_parkes_1904-66_SIN_cube10.fits"
    check 'tail -n +2 "$T/p3/radio_parkes_1904-66_SIN_cube10.cat.csv" | cmp -s - <(tail -n +2 "$T/cube/radio_parkes_1904-66_SIN_cube10_p3.cat.csv")' "plane 3 alone differs from plane 3 of --plane all"
    "$SKYFIND" run -q -b cpu --plane all --name '{stem}' -o "$T/x" "$DATA/radio_parkes_1904-66_SIN_cube10.fits" 2>"$T/err"; rc=$?
    check '[ $rc = 2 ] && grep -q "needs {plane}" "$T/err"' "--plane all without {plane}: exit $rc"
else
    echo "SKIP: no $DATA/radio_parkes_1904-66_SIN_cube10.fits (--plane all cases not run)"
fi
# a bad file among good ones: exit 1, the others complete, one line naming it
printf 'not a FITS file\n' >"$T/in/bad.fits"
run -j 2 -o "$T/mixed" "$T/in/img1.fits" "$T/in/bad.fits" "$T/in/img2.fits" 2>"$T/err"; rc=$?
check '[ $rc = 1 ] && grep -q "bad.fits: " "$T/err" && grep -q "1 of 3 files failed" "$T/err"' "mixed batch exit $rc: $(cat "$T/err")"
check 'cmp -s "$T/ref/img1.cat.csv" "$T/mixed/img1.cat.csv" && cmp -s "$T/ref/img2.cat.csv" "$T/mixed/img2.cat.csv"' "good files of a mixed batch"
check '[ ! -e "$T/mixed/bad.cat.csv" ] && [ ! -e "$T/mixed/.skyfind/bad.done" ]' "outputs of the bad file"
# --json: one object per image, then the summary
run -j 2 --json -o "$T/js" "$T/in/img1.fits" "$T/in/bad.fits" >"$T/js.out" 2>/dev/null
check '/usr/bin/python3 -c "
import json,sys
L=[json.loads(l) for l in open(\"$T/js.out\")]
f=[d for d in L if \"file\" in d]; s=L[-1][\"summary\"]
assert len(f)==2 and s[\"ok\"]==1 and s[\"failed\"]==1 and \"phases\" in [d for d in f if d[\"status\"]==\"ok\"][0]
"' "--json objects and summary"

# 8 processes creating one new, nested output folder at once, 10 rounds
for round in $(seq 1 10); do
    d="$T/conc$round/a/b"
    for k in $(seq 1 8); do run -o "$d" --name "k${k}_{stem}" "$T/in/img$k.fits" 2>>"$T/conc.err" & done
    wait
done
nconc=$(ls "$T"/conc*/a/b/*.cat.csv 2>/dev/null | wc -l)
check '[ "$nconc" = 80 ] && [ ! -s "$T/conc.err" ]' "concurrent output folders: $nconc of 80 catalogues; $(head -3 "$T/conc.err")"

# SIGKILL midway, then --resume: every output once, complete, identical.
# 120 images (the list five times, named by position) so the run lasts; it
# is killed once its first images are complete.
for r in 1 2 3 4 5; do cat "$T/list.txt"; done >"$T/list5.txt"
rm -rf "$T/k"
"$SKYFIND" run -q -b cpu -j 1 --queue 1 --readers 1 --save seg --name '{index}_{stem}' -o "$T/k" @"$T/list5.txt" 2>/dev/null &
pid=$!
for w in $(seq 1 500); do
    [ "$(ls "$T"/k/.skyfind/*.done 2>/dev/null | wc -l)" -ge 3 ] && break
    sleep 0.01
done
kill -9 $pid 2>/dev/null && killed=1 || killed=0
wait $pid 2>/dev/null
ndone=$(ls "$T"/k/.skyfind/*.done 2>/dev/null | wc -l)
check '[ "$killed" = 1 ] && [ "$ndone" -lt 120 ] && [ "$ndone" -ge 3 ]' "the run was not killed midway ($ndone of 120 done)"
ref_of() { echo "$T/ref/${1#*_}"; } # 17_img5.cat.csv -> ref/img5.cat.csv
# what has a marker is complete; no final name holds a partial file
for m in "$T"/k/.skyfind/*.done; do
    [ -e "$m" ] || continue
    s=$(basename "$m" .done)
    tail -n +2 "$(ref_of "$s.cat.csv")" | cmp -s - <(tail -n +2 "$T/k/$s.cat.csv") || bad "marked $s but its catalogue differs"
    [ -s "$T/k/$s.seg.fits" ] || bad "marked $s but no segmentation map"
done
for c in "$T"/k/*.cat.csv; do
    [ -e "$c" ] || continue
    tail -n +2 "$(ref_of "$(basename "$c")")" | cmp -s - <(tail -n +2 "$c") || bad "partial catalogue under a final name: $c"
done
run --resume -j 2 --save seg --name '{index}_{stem}' --json -o "$T/k" @"$T/list5.txt" >"$T/resume.json"; rc=$?
nrun=$(grep -c '"file"' "$T/resume.json")
check '[ $rc = 0 ] && [ $((nrun + ndone)) = 120 ]' "resume ran $nrun images after $ndone complete (exit $rc)"
nsame=0
for c in "$T"/k/*.cat.csv; do
    tail -n +2 "$(ref_of "$(basename "$c")")" | cmp -s - <(tail -n +2 "$c") && nsame=$((nsame + 1))
done
check '[ "$nsame" = 120 ]' "after --resume $nsame of 120 catalogues equal an uninterrupted run's"
check '[ $(ls "$T"/k/.skyfind/*.done | wc -l) = 120 ] && [ $(ls "$T"/k/*.seg.fits | wc -l) = 120 ]' "markers and maps after resume"
check '[ -z "$(ls -A "$T/k" | grep -v -e "\.cat\.csv$" -e "\.comp\.csv$" -e "\.seg\.fits$" -e "^\.skyfind$")" ] && [ -z "$(ls -A "$T/k/.skyfind" | grep -v "\.done$")" ]' "left-over files after resume: $(ls -A "$T/k" "$T/k/.skyfind" | grep -v -e '\.cat\.csv$' -e '\.comp\.csv$' -e '\.seg\.fits$' -e '\.done$' | head -5)"
# a second --resume does nothing and says so
run --resume --name '{index}_{stem}' --json -o "$T/k" @"$T/list5.txt" >"$T/resume2.json"
check 'grep -q "\"skipped\":120" "$T/resume2.json" && ! grep -q "\"file\"" "$T/resume2.json"' "second --resume: $(tail -1 "$T/resume2.json")"

# stale temporaries: a dead process's on this host go, a live one's and another host's stay
mkdir -p "$T/st"
host=$(hostname | tr -c 'A-Za-z0-9_\n-' '-')
sleep 30 & live=$!
touch "$T/st/a.cat.csv.tmp.999999" "$T/st/b.cat.csv.tmp.$host.999998.0" "$T/st/c.cat.csv.tmp.otherhost.999997.0" \
      "$T/st/d.cat.csv.tmp.$host.$live.3" "$T/st/e.seg.fits.tmp.999996.1"
run -o "$T/st" "$T/in/img1.fits"
check '[ ! -e "$T/st/a.cat.csv.tmp.999999" ] && [ ! -e "$T/st/b.cat.csv.tmp.$host.999998.0" ] && [ ! -e "$T/st/e.seg.fits.tmp.999996.1" ]' "stale temporaries left: $(ls "$T/st")"
check '[ -e "$T/st/c.cat.csv.tmp.otherhost.999997.0" ] && [ -e "$T/st/d.cat.csv.tmp.$host.$live.3" ] && [ -s "$T/st/img1.cat.csv" ]' "a live or foreign temporary was removed: $(ls "$T/st")"
kill $live 2>/dev/null

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
