#!/usr/bin/env bash
# `mpirun -n 3 skyfind run` (a build with -DSKYFIND_MPI=ON): rank 0 hands the
# 30 inputs out, each taken exactly once by some rank; the per-image
# catalogues and rank 0's merged catalogue are byte-identical to one process's;
# one summary with the global counts; a bad file makes every rank exit 1 with
# the other images complete; --resume --merge under mpirun recomputes nothing;
# rank 0's list (from @LIST or -) is every rank's, --shard applies to it;
# ranks that cannot start take part in the end all the same.
set -u
SKYFIND=${SKYFIND:-build-mpi/skyfind}
MPIEXEC=${MPIEXEC:-mpirun}
. "$(dirname "$0")/tally.sh" # $T, ok, bad, check
mpi() { "$MPIEXEC" --allow-run-as-root --oversubscribe "$@"; }
# containers often forbid the cross-memory attach of Open MPI's shared-memory transport
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
N=30

command -v "$MPIEXEC" >/dev/null || { echo "FAIL: no $MPIEXEC"; exit 1; }
mkdir -p "$T/in"
for i in $(seq 1 $N); do
    n=$((128 + 128 * (i % 5) / 4))
    "$SKYFIND" simulate -q -n $n --ny $((256 - 8 * (i % 16))) --nsrc 10 --seed $((7 * i)) \
        -o "$T/in/img$i.fits" || bad "simulate $i"
done
for i in $(seq 1 $N); do echo "$T/in/img$i.fits"; done >"$T/list.txt"

# A: one process (the MPI build, started without mpirun: no MPI at all)
"$SKYFIND" run -b cpu -j 1 --merge "$T/A.csv" -o "$T/A" @"$T/list.txt" 2>"$T/errA"; rc=$?
check '[ $rc = 0 ] && [ $(ls "$T"/A/*.cat.csv | wc -l) = $N ]' "one process: exit $rc, $(cat "$T/errA")"

# B: three ranks; --tag-output names the rank of every --json line
mpi --tag-output -n 3 "$SKYFIND" run -b cpu -j 1 --json --merge "$T/B.csv" -o "$T/B" @"$T/list.txt" \
    >"$T/outB" 2>"$T/errB"; rc=$?
check '[ $rc = 0 ]' "mpirun -n 3: exit $rc: $(head -c 2000 "$T/errB")"
n=0
for f in "$T"/A/*.cat.csv; do
    if cmp -s "$f" "$T/B/$(basename "$f")"; then n=$((n + 1)); else echo "differs: $(basename "$f")"; fi
done
check '[ $n = $N ] && [ $(ls "$T"/B/*.cat.csv | wc -l) = $N ]' "only $n of $N catalogues byte-identical under mpirun"
check 'cmp "$T/A.csv" "$T/B.csv"' "merged catalogue under mpirun differs from one process's"
check '[ $(grep -v "^#" "$T/B.csv" | grep -cv "^file,plane,id,") -gt $N ]' "merged catalogue has too few rows"
# every input once, by more than one rank; one summary, rank 0's, with the global counts
grep '"file":' "$T/outB" >"$T/files"
check '[ $(wc -l <"$T/files") = $N ] && [ $(grep -o "\"file\":\"[^\"]*\"" "$T/files" | sort -u | wc -l) = $N ]' \
    "$(wc -l <"$T/files") per-file lines, $(grep -o '"file":"[^"]*"' "$T/files" | sort -u | wc -l) distinct files, not $N"
ranks=$(sed -n 's/^\[[0-9]*,\([0-9]*\)\]<stdout>:.*/\1/p' "$T/files" | sort -u | wc -l)
check '[ "$ranks" -ge 2 ]' "the inputs were not handed out: $ranks rank(s) ran them"
check '[ $(grep -c "\"summary\"" "$T/outB") = 1 ] && grep "\"summary\"" "$T/outB" | grep -q "^\[[0-9]*,0\]<stdout>:{\"summary\":{\"ok\":$N,\"failed\":0,\"skipped\":0,"' \
    "--json summary under mpirun: $(grep summary "$T/outB")"
check '[ $(grep -c "images ok" "$T/errB") = 1 ] && grep -q "skyfind: $N images ok, 0 failed in" "$T/errB"' \
    "summary line under mpirun: $(cat "$T/errB")"

# --resume --merge under mpirun: nothing recomputed, the same merged catalogue
touch "$T/stamp"
sleep 1
mpi -n 3 "$SKYFIND" run -b cpu -j 1 --resume --merge "$T/R.csv" -o "$T/B" @"$T/list.txt" 2>"$T/errR"; rc=$?
check '[ $rc = 0 ] && grep -q "0 images ok, 0 failed, $N already complete (--resume)" "$T/errR"' \
    "mpirun --resume: exit $rc: $(cat "$T/errR")"
check '[ -z "$(find "$T/B" -type f -newer "$T/stamp")" ] && cmp "$T/A.csv" "$T/R.csv"' \
    "mpirun --resume --merge recomputed or merged differently"

# rank 0's list is every rank's: here the other ranks read the list reversed
sed -n 1,6p "$T/list.txt" >"$T/l0.txt"
sed -n 1,6p "$T/list.txt" | tac >"$T/l1.txt"
cat >"$T/ranklist.sh" <<EOS
#!/bin/sh
l="$T/l1.txt"; [ "\${OMPI_COMM_WORLD_RANK:-\${PMIX_RANK:-0}}" = 0 ] && l="$T/l0.txt"
exec "$SKYFIND" run -q -b cpu -j 1 --merge "$T/L.csv" -o "$T/L" @"\$l"
EOS
chmod +x "$T/ranklist.sh"
"$SKYFIND" run -q -b cpu -j 1 --merge "$T/L0.csv" -o "$T/L0" @"$T/l0.txt"
mpi -n 3 "$T/ranklist.sh"; rc=$?
n=0
for i in $(seq 1 6); do cmp -s "$T/A/img$i.cat.csv" "$T/L/img$i.cat.csv" && n=$((n + 1)); done
check '[ $rc = 0 ] && [ $n = 6 ] && [ $(ls "$T"/L/*.cat.csv | wc -l) = 6 ] && cmp "$T/L0.csv" "$T/L.csv"' \
    "ranks with their own lists: exit $rc, $n of 6 catalogues, merged $(cmp "$T/L0.csv" "$T/L.csv" 2>&1)"

# --shard under mpirun: rank 0 hands out its shard of the list only
mpi -n 3 "$SKYFIND" run -q -b cpu -j 1 --shard 2/3 -o "$T/S" @"$T/list.txt"; rc=$?
want=$(for i in $(seq 2 3 $N); do echo "img$i.cat.csv"; done | sort | tr '\n' ' ')
got=$(ls "$T/S" | grep 'cat\.csv$' | sort | tr '\n' ' ')
n=0
for i in $(seq 2 3 $N); do cmp -s "$T/A/img$i.cat.csv" "$T/S/img$i.cat.csv" && n=$((n + 1)); done
check '[ $rc = 0 ] && [ "$got" = "$want" ] && [ $n = $((N / 3)) ]' "--shard 2/3 under mpirun: exit $rc, wrote '$got', $n identical"

# - : the paths on standard input, which reaches rank 0 only
mpi -n 3 "$SKYFIND" run -q -b cpu -j 1 -o "$T/P" - <"$T/l0.txt"; rc=$?
n=0
for i in $(seq 1 6); do cmp -s "$T/A/img$i.cat.csv" "$T/P/img$i.cat.csv" && n=$((n + 1)); done
check '[ $rc = 0 ] && [ $n = 6 ] && [ $(ls "$T"/P/*.cat.csv | wc -l) = 6 ]' "- under mpirun: exit $rc, $n of 6 catalogues"

# a bad file among the inputs: exit 1 on mpirun, every good image complete
printf 'not a FITS file\n' >"$T/in/bad.fits"
{ sed -n 1,4p "$T/list.txt"; echo "$T/in/bad.fits"; sed -n 5,8p "$T/list.txt"; } >"$T/mixed.txt"
mpi -n 3 "$SKYFIND" run -b cpu -j 1 --merge "$T/M.csv" -o "$T/M" @"$T/mixed.txt" >/dev/null 2>"$T/errM"; rc=$?
check '[ $rc = 1 ]' "mpirun with a bad file: exit $rc, wanted 1"
check 'grep -q "bad.fits: " "$T/errM" && grep -q "1 of 9 files failed" "$T/errM" && grep -q "skyfind: 8 images ok, 1 failed" "$T/errM"' \
    "mpirun with a bad file: $(cat "$T/errM")"
n=0
for i in $(seq 1 8); do cmp -s "$T/A/img$i.cat.csv" "$T/M/img$i.cat.csv" && n=$((n + 1)); done
check '[ $n = 8 ] && [ ! -e "$T/M/bad.cat.csv" ]' "mpirun with a bad file: $n of 8 good catalogues complete"
check '[ $(grep -v "^#" "$T/M.csv" | grep -v "^file,plane," | cut -d, -f1 | sort -u | wc -l) = 8 ]' \
    "the merged catalogue of the mixed batch does not hold the 8 good images"

# ranks whose engine cannot start (-b gpu without a GPU) still meet in the
# collectives: every rank exits 1, nothing hangs
if ! "$SKYFIND" run -q -b gpu -o "$T/g1" "$T/in/img1.fits" 2>"$T/errG1"; then
    timeout 120 "$MPIEXEC" --allow-run-as-root --oversubscribe -n 3 "$SKYFIND" run -b gpu -o "$T/G" @"$T/l0.txt" \
        >/dev/null 2>"$T/errG"; rc=$?
    # (count the messages, not the lines: mpirun may interleave the ranks'
    # stderr on one line)
    check '[ $rc = 1 ] && [ $(grep -o "cannot use --backend gpu" "$T/errG" | wc -l) = 3 ] && ! grep -q "images ok" "$T/errG"' \
        "mpirun -b gpu without a GPU: exit $rc (124: hung): $(head -c 1500 "$T/errG")"
fi

echo "test_batch_mpi: $pass passed, $fail failed"
[ "$fail" = 0 ]
