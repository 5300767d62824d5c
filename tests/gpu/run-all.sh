#!/usr/bin/env bash
# The whole GPU verification in one call on the GPU machine: every Check
# suite (GPU against CPU twins), compute-sanitizer memcheck and racecheck on
# the GPU cases, `skyfind compare` on the real images and on simulated 2048,
# 4096 and 8192 images, the bytes moved by a catalogue-only run, and the
# lesson benchmark against the lesson's CuPy and numpy code.
# Build here with -DCMAKE_CUDA_ARCHITECTURES=90, bundle with
#   ../shared/tools/gpu-bundle build .gpu-bundle ../shared/data
# then on the GPU machine, from the repository root:
#   . .gpu-bundle/env.sh && tests/gpu/run-all.sh OUTDIR [quick]
set -u
OUTDIR=${1:-/tmp/skyfind-gpu}
MODE=${2:-full}
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
BIN=$B/bin
export SKYFIND_TEST_DATA=${SKYFIND_TEST_DATA:-$B/extra/data}
export SKYFIND_PIPELINES=$PWD/pipelines CK_FORK=no
mkdir -p "$OUTDIR" "$OUTDIR/work"
W=$OUTDIR/work
fail=0
say() { printf '\n=== %s\n' "$*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader

say "Check suites (GPU cases against the CPU twins)"
for t in "$BIN"/tests/test_*; do
    "$t" >"$W/$(basename "$t").log" 2>&1; rc=$?
    printf '%-16s rc=%d  %s\n' "$(basename "$t")" $rc "$(grep -E '^[0-9]+%|SKIP' "$W/$(basename "$t").log" | tr '\n' ' ')"
    [ $rc = 0 ] || { fail=1; tail -20 "$W/$(basename "$t").log"; }
done

say "compute-sanitizer memcheck and racecheck on the GPU cases (quick sizes)"
for t in background background_mesh threshold segment measure; do
    for tool in memcheck racecheck; do
        SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu compute-sanitizer --tool $tool --error-exitcode 9 \
            "$BIN/tests/test_$t" >"$W/san_${t}_$tool.log" 2>&1; rc=$?
        printf '%-10s %-9s rc=%d  %s\n' $t $tool $rc "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^[0-9]+%' "$W/san_${t}_$tool.log" | tr '\n' ' ')"
        [ $rc = 0 ] || { fail=1; grep -m5 -E 'Error|Invalid|Race|hazard' "$W/san_${t}_$tool.log"; }
    done
done

say "skyfind compare on the real images (lesson and radio pipelines)"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in lesson radio; do
    "$BIN/skyfind" compare -q -p $p --json $real >"$W/compare_real_$p.json" 2>"$W/compare_real_$p.err"; rc=$?
    echo "pipeline $p: rc=$rc, $(grep -c '"agree":true' "$W/compare_real_$p.json") agree, $(grep -c '"agree":false' "$W/compare_real_$p.json") disagree; errors: $(grep -c . "$W/compare_real_$p.err")"
    grep '"agree":false' "$W/compare_real_$p.json"; head -5 "$W/compare_real_$p.err"
    [ $rc = 0 ] || fail=1
done

sizes="2048 4096 8192"
[ "$MODE" = quick ] && sizes="2048"
say "skyfind compare on simulated images: $sizes"
for n in $sizes; do
    "$BIN/skyfind" simulate -q -n $n --seed $n -o "$W/sim$n.fits"
    for p in lesson radio; do
        "$BIN/skyfind" compare -p $p "$W/sim$n.fits" >"$W/compare_sim${n}_$p.txt" 2>&1; rc=$?
        sed 's/^/  /' "$W/compare_sim${n}_$p.txt"; [ $rc = 0 ] || fail=1
    done
done

say "bytes moved by a catalogue-only GPU run (lesson pipeline, 8192 if made)"
n=${sizes##* }
"$BIN/skyfind" run -b gpu -p lesson -o "$W/out" "$W/sim$n.fits" 2>&1 | tail -8
echo "image bytes: $((n * n * 4)); catalogue rows: $(grep -vc '^#' "$W/out/sim$n.cat.csv") (header included)"

say "benchmark: lesson pipeline, skyfind GPU stages against the lesson's CuPy and numpy code"
"$BIN/tests/bench/bench_lesson" --sizes "${sizes// /,}" --repeat 20 --raw "$W" --json "$OUTDIR/bench_lesson.json" | tee "$OUTDIR/bench_lesson.txt"
python3 tests/bench/peers/lesson_peers.py "$W" $sizes --repeat 3 --cpu-max 4096 | tee "$OUTDIR/bench_peers.txt"

say "benchmark: mesh background (box 64, filter 3), GPU and CPU twin against sep.Background"
"$BIN/tests/bench/bench_background" --sizes "${sizes// /,}" --repeat 20 --raw "$W" | tee "$OUTDIR/bench_background.txt"
if ls .whl/sep-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl &&
        PYTHONPATH=/tmp/site OMP_NUM_THREADS=1 python3 tests/bench/peers/background_sep.py "$W" $sizes | tee -a "$OUTDIR/bench_background.txt"
else
    echo "sep.Background not run: no sep wheel in .whl/ (see the device README: pip download sep)"
fi
rm -f "$W"/*.f32 "$W"/*.fits
echo
[ $fail = 0 ] && echo "GPU SUITE: ALL PASSED" || echo "GPU SUITE: FAILURES (see above)"
exit $fail
