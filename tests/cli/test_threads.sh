#!/usr/bin/env bash
# The CPU backend's outputs do not depend on its thread count: each pipeline
# (radio, sextractor with deblending, lesson, radio with negative
# detections) on a crowded simulated 1024x1536 sky with blended pairs, run
# with --threads 1, 2, 3, 7 and 16 (the stages cut the image into as many
# strips as threads, down to their minimum strip sizes), writes the same
# catalogue and the same segmentation, background, rms and filtered images,
# byte for byte. Also: a single image gets every core (the summary's
# "workers":1 with all the threads), and OMP_NUM_THREADS is respected.
set -u
SKYFIND=${SKYFIND:-build/skyfind}
. "$(dirname "$0")/tally.sh" # $T, ok, bad, check

"$SKYFIND" simulate -q --nx 1024 --ny 1536 --nsrc 400 --pairs 60 --seed 5 -o "$T/sky.fits" || { echo "simulate failed"; exit 1; }
for p in radio sextractor lesson radio+neg; do
    set_=(); [ $p = radio+neg ] && set_=(--set threshold.sign=both)
    for t in 1 2 3 7 16; do
        "$SKYFIND" run -q -b cpu -p ${p%+neg} "${set_[@]}" --threads $t --save seg,background,rms,filtered \
            -o "$T/$p-$t" "$T/sky.fits" || bad "$p --threads $t: exit $?"
        [ $t = 1 ] && continue
        for f in "$T/$p-1"/*; do
            b=$(basename "$f")
            if cmp -s "$f" "$T/$p-$t/$b"; then ok; else bad "$p: $b differs between 1 and $t threads"; fi
        done
    done
    n=$(ls "$T/$p-1" | wc -l)
    [ "$n" -ge 2 ] && ok || bad "$p: only $n outputs"
    [ "$(wc -l <"$T/$p-1/sky.cat.csv")" -gt 100 ] && ok || bad "$p: too few sources to mean anything"
done

# one image: one worker with every thread; OMP_NUM_THREADS and --threads
s=$("$SKYFIND" run -b cpu --threads 5 --json -o "$T/j" "$T/sky.fits" | tail -1)
case $s in *'"workers":1,"threads":5,'*) ok ;; *) bad "--threads 5 on one image: $s" ;; esac
s=$(OMP_NUM_THREADS=3 "$SKYFIND" run -b cpu --json -o "$T/j" "$T/sky.fits" | tail -1)
case $s in *'"workers":1,"threads":3,'*) ok ;; *) bad "OMP_NUM_THREADS=3 on one image: $s" ;; esac
s=$("$SKYFIND" run -b cpu --threads 4 --json -o "$T/j" "$T/sky.fits" "$T/sky.fits" "$T/sky.fits" "$T/sky.fits" "$T/sky.fits" | tail -1)
case $s in *'"workers":4,"threads":1,'*) ok ;; *) bad "--threads 4 on five images: $s" ;; esac
s=$("$SKYFIND" run -b cpu --threads 8 -j 2 --json -o "$T/j" "$T/sky.fits" "$T/sky.fits" | tail -1)
case $s in *'"workers":2,"threads":4,'*) ok ;; *) bad "--threads 8 -j 2: $s" ;; esac
"$SKYFIND" run -q -b cpu --threads 0 "$T/sky.fits" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "threads needs a number" "$T/err" && ok || bad "--threads 0: exit $rc, $(cat "$T/err")"

echo "threads: $pass passed, $fail failed"
[ $fail = 0 ]
