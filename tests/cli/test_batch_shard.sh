#!/usr/bin/env bash
# --shard K/N, as a Slurm job array uses it: the shards 1/3, 2/3 and 3/3 of a
# list take disjoint inputs (K, K+N, ...) and together write the same
# catalogues, byte for byte, as one unsharded run; a final --resume --merge
# pass over the whole list recomputes nothing and writes the same merged
# catalogue as the unsharded run's --merge.
set -u
SKYFIND=${SKYFIND:-build/skyfind}
. "$(dirname "$0")/tally.sh" # $T, ok, bad, check
N=18

mkdir -p "$T/in"
for i in $(seq 1 $N); do
    "$SKYFIND" simulate -q -n $((128 + 8 * (i % 17))) --nsrc 12 --seed $((100 + i)) -o "$T/in/img$i.fits" ||
        bad "simulate $i"
done
for i in $(seq 1 $N); do echo "$T/in/img$i.fits"; done >"$T/list.txt"

# the reference: one unsharded run
"$SKYFIND" run -q -b cpu -j 1 --merge "$T/ref.csv" -o "$T/ref" @"$T/list.txt"; rc=$?
check '[ $rc = 0 ] && [ $(ls "$T"/ref/*.cat.csv | wc -l) = $N ] && [ -s "$T/ref.csv" ]' \
    "unsharded run: exit $rc, $(ls "$T"/ref/*.cat.csv 2>/dev/null | wc -l) catalogues"

# shard 1/3 alone: exactly inputs 1, 4, 7, ...
"$SKYFIND" run -q -b cpu -j 1 --shard 1/3 -o "$T/sh" @"$T/list.txt"; rc=$?
want=$(for i in $(seq 1 3 $N); do echo "img$i.cat.csv"; done | sort | tr '\n' ' ')
got=$(ls "$T/sh" | grep 'cat\.csv$' | sort | tr '\n' ' ')
check '[ $rc = 0 ] && [ "$got" = "$want" ]' "--shard 1/3: exit $rc, wrote '$got', wanted '$want'"
# shards 2/3 and 3/3 (-j 2 on one: the shard, not the workers, picks the inputs)
"$SKYFIND" run -q -b cpu -j 2 --shard 2/3 -o "$T/sh" @"$T/list.txt"; rc2=$?
"$SKYFIND" run -q -b cpu -j 1 --shard 3/3 -o "$T/sh" @"$T/list.txt"; rc3=$?
check '[ $rc2 = 0 ] && [ $rc3 = 0 ]' "--shard 2/3 exit $rc2, 3/3 exit $rc3"
check '[ $(ls "$T"/sh/*.cat.csv | wc -l) = $N ]' "the three shards wrote $(ls "$T"/sh/*.cat.csv | wc -l) catalogues, not $N"
n=0
for f in "$T"/ref/*.cat.csv; do
    if cmp -s "$f" "$T/sh/$(basename "$f")"; then n=$((n + 1)); else echo "differs: $(basename "$f")"; fi
done
check '[ $n = $N ]' "only $n of $N sharded catalogues byte-identical to the unsharded run's"

# the final pass: nothing recomputed, the merged catalogue of the whole list
touch "$T/stamp"
sleep 1
"$SKYFIND" run -b cpu -j 1 --resume --merge "$T/sh.csv" -o "$T/sh" @"$T/list.txt" 2>"$T/err"; rc=$?
check '[ $rc = 0 ]' "--resume --merge exit $rc: $(cat "$T/err")"
check 'grep -q "0 images ok, 0 failed, $N already complete (--resume)" "$T/err"' \
    "--resume --merge summary: $(cat "$T/err")"
check '[ -z "$(find "$T/sh" -type f -newer "$T/stamp")" ]' \
    "--resume rewrote: $(find "$T/sh" -type f -newer "$T/stamp" | tr '\n' ' ')"
check 'cmp "$T/ref.csv" "$T/sh.csv"' "merged catalogue of the shards differs from the unsharded run's"
check '[ $(grep -v "^#" "$T/sh.csv" | grep -cv "^file,plane,id,") -gt $N ]' "merged catalogue has too few rows"
# --json says so too
"$SKYFIND" run -q -b cpu --resume --json -o "$T/sh" @"$T/list.txt" >"$T/js" 2>/dev/null; rc=$?
check '[ $rc = 0 ] && tail -n 1 "$T/js" | grep -q "\"ok\":0,\"failed\":0,\"skipped\":$N,"' \
    "--resume --json summary: $(tail -n 1 "$T/js")"

# bad shards are usage errors
for s in 0/3 4/3 3 1/0 a/b; do
    "$SKYFIND" run -q -b cpu --shard "$s" -o "$T/x" "$T/in/img1.fits" 2>"$T/err"; rc=$?
    check '[ $rc = 2 ] && grep -q -- "--shard" "$T/err"' "--shard $s: exit $rc, $(cat "$T/err")"
done

echo "test_batch_shard: $pass passed, $fail failed"
[ "$fail" = 0 ]
