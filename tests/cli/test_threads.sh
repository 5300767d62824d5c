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

# a distorted WCS (TAN with SIP: WCSLIB keeps the distortion's scratch in
# the WCS it converts with, so each thread deriving catalogue rows has its
# own copy): the same catalogue at 1, 2 and 7 threads, with world
# coordinates other than the undistorted sky's
/usr/bin/python3 - "$T/sky.fits" "$T/sip.fits" <<'EOF' || bad "no SIP copy of the sky"
import sys
raw = open(sys.argv[1], "rb").read()
cards = []
while not any(c.startswith("END ") for c in cards):  # the primary header, a block at a time
    cards += [raw[i:i + 80].decode("ascii") for i in range(80 * len(cards), 80 * len(cards) + 2880, 80)]
end = next(i for i, c in enumerate(cards) if c.startswith("END "))
fix = {"CTYPE1": "'RA---TAN-SIP'", "CTYPE2": "'DEC--TAN-SIP'"}
for i in range(end):
    if cards[i][:8].strip() in fix:
        cards[i] = ("%-8s= %s" % (cards[i][:8].strip(), fix[cards[i][:8].strip()])).ljust(80)
sip = [("A_ORDER", "2"), ("B_ORDER", "2"), ("A_2_0", "2.0E-5"), ("A_0_2", "-1.0E-5"),
       ("A_1_1", "5.0E-6"), ("B_2_0", "-5.0E-6"), ("B_0_2", "1.5E-5"), ("B_1_1", "1.0E-5")]
assert len(cards) - end - 1 >= len(sip), "no room for the SIP cards in the header's last block"
cards[end:end + 1 + len(sip)] = [("%-8s= %20s" % kv).ljust(80) for kv in sip] + [cards[end]]
open(sys.argv[2], "wb").write("".join(cards).encode("ascii") + raw[80 * len(cards):])
EOF
for t in 1 2 7; do
    "$SKYFIND" run -q -b cpu -p radio --threads $t -o "$T/sip-$t" "$T/sip.fits" || bad "SIP --threads $t: exit $?"
done
for t in 2 7; do
    cmp -s "$T/sip-1/sip.cat.csv" "$T/sip-$t/sip.cat.csv" && ok || bad "SIP: catalogue differs between 1 and $t threads"
    cmp -s "$T/sip-1/sip.comp.csv" "$T/sip-$t/sip.comp.csv" && ok || bad "SIP: components differ between 1 and $t threads"
done
[ "$(grep -vc '^#' "$T/sip-1/sip.cat.csv")" -gt 100 ] && ok || bad "SIP: too few sources for several row chunks"
radec() { awk -F, '/^#/ {next} !h {for (i = 1; i <= NF; i++) if ($i == "ra") c = i; h = 1; next}
                    ++n == 20 {print $c "," $(c + 1)}' "$1"; }
a=$(radec "$T/radio-1/sky.cat.csv")
b=$(radec "$T/sip-1/sip.cat.csv")
[ -n "$a" ] && [ "$a" != "$b" ] && ok || bad "SIP: the distortion did not change the world coordinates ($a / $b)"

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

# the tool's default for idle OpenMP threads (built with libgomp inside:
# SKYFIND_STATIC_GOMP): 10000 spins, unless GOMP_SPINCOUNT or OMP_WAIT_POLICY
# says otherwise
if [ "${SKYFIND_STATIC_GOMP:-0}" = 1 ]; then
    spin() { env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$@" OMP_DISPLAY_ENV=verbose "$SKYFIND" --version 2>&1 |
             sed -n "s/.*GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p"; }
    [ "$(spin)" = 10000 ] && ok || bad "the default GOMP_SPINCOUNT is '$(spin)', not 10000"
    [ "$(spin GOMP_SPINCOUNT=42)" = 42 ] && ok || bad "GOMP_SPINCOUNT=42 gave '$(spin GOMP_SPINCOUNT=42)'"
    [ "$(spin OMP_WAIT_POLICY=passive)" = 0 ] && ok ||
        bad "OMP_WAIT_POLICY=passive gave GOMP_SPINCOUNT '$(spin OMP_WAIT_POLICY=passive)', not 0"
else
    echo "SKIP: the idle-thread default (the tool links the shared libgomp)"
fi

echo "threads: $pass passed, $fail failed"
[ $fail = 0 ]
