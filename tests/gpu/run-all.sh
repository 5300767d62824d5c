#!/usr/bin/env bash
# The whole GPU verification in one call on the GPU machine: every Check
# suite (GPU against CPU twins), compute-sanitizer memcheck, racecheck,
# initcheck and synccheck on the GPU cases, the GPU fault tests, `skyfind
# compare` on the real images and on simulated 2048, 4096 and 8192 images,
# the bytes moved by a catalogue-only run, and the
# lesson benchmark against the lesson's CuPy and numpy code.
# Build here with -DCMAKE_CUDA_ARCHITECTURES=90, bundle with
#   ../shared/tools/gpu-bundle build .gpu-bundle ../shared/data
# then on the GPU machine, from the repository root:
#   . .gpu-bundle/env.sh && tests/gpu/run-all.sh OUTDIR [full|tests|suites|sanitizer|faults|python|compare|bench|harness|quick|...]
set -u
OUTDIR=${1:-/tmp/skyfind-gpu}
MODE=${2:-full}
# full: everything; tests: suites, sanitizer, scipy, compare, bytes; bench: the
# stage benchmarks; harness: the benchmark harness; quick: tests and benchmarks at 2048;
# convolve: the convolve benchmark with its CuPy peers, and its variants at 8192;
# convbench: the convolve benchmark with its CuPy peers alone; checks: the Check
# suites alone; suites: the Check
# suites and compute-sanitizer; sanitizer: compute-sanitizer alone; background: the background stage's suites,
# their compute-sanitizer runs, skyfind compare and the background benchmark;
# batch: the suites, sanitizer, compare and the batch benchmark
# (tests/gpu/batch-bench.sh: the bound, streaming, no overlap, the landed
# main, the lesson's CuPy loop, one process per file); batchonly: that alone;
# python: tests/gpu/python-api.sh (skyfind.find on CuPy arrays in place);
# threads: tests/bench/threads.sh (the CPU backend at 1, 2, 4, ... threads up
# to the machine's cores, 4096^2 and 8192^2, catalogues byte-identical);
# faults: tests/gpu/faults.sh (out of memory, sticky error) and
# tests/gpu/nonfinite.sh (+-Inf and float-limit pixels on both backends);
# multigpu (a machine of 2+ GPUs): tests/gpu/multi-gpu.sh, 1 GPU against all;
# deblend: the suites, the sanitizer on the deblend, measure, segment and
# threshold cases (SAN_SUITES), compare, and every stage of the sextractor
# and radio pipelines timed (bench_pipeline); bane: the background suites,
# the sanitizer on the bane cases and a whole radio run, compare, and every
# stage of radio.pipe (background method=bane) timed on both backends; fit:
# every suite, the sanitizer on the fit cases and whole radio and aegean runs,
# compare (radio, aegean and the others), and every stage of radio.pipe and
# aegean.pipe timed on both backends (the fit stage's device time and fits per
# second, the CPU twin on all cores to 8192)
case $MODE in
    full) SECTIONS="suites sanitizer conv compare faults python bench convbench harness" ;;
    tests) SECTIONS="suites sanitizer conv compare faults python" ;;
    bench) SECTIONS="bench convbench" ;;
    harness) SECTIONS="harness" ;;
    quick) SECTIONS="suites sanitizer conv compare bench convbench" ;;
    compare) SECTIONS="conv compare" ;;
    convolve) SECTIONS="convbench convtune" ;;
    convbench) SECTIONS="convbench" ;;
    suites) SECTIONS="suites sanitizer" ;;
    checks) SECTIONS="suites" ;;
    sanitizer) SECTIONS="sanitizer" ;;
    background) SECTIONS="suites sanitizer compare bench"
                SUITES="background background_mesh threshold" BENCHES="background" ;;
    batch) SECTIONS="suites sanitizer compare faults batch" ;;
    faults) SECTIONS="faults" ;;
    python) SECTIONS="python" ;;
    threads) SECTIONS="threads" ;;
    batchonly) SECTIONS="batch" ;;
    multigpu) SECTIONS="multigpu" ;;
    deblend) SECTIONS="suites sanitizer compare deblendbench"
             SAN_SUITES=${SAN_SUITES:-deblend measure segment threshold} ;;
    deblendbench) SECTIONS="deblendbench" ;;
    bane) SECTIONS="suites sanitizer compare banebench"
          SUITES=${SUITES:-background_bane background background_mesh}
          SAN_SUITES=${SAN_SUITES:-background_bane} SAN_RUNS=${SAN_RUNS-radio} ;;
    fit) SECTIONS="suites sanitizer compare fitbench"
         SAN_SUITES=${SAN_SUITES:-fit} SAN_RUNS=${SAN_RUNS-radio aegean} ;;
    fitbench) SECTIONS="fitbench" ;;
    *) echo "run-all.sh: mode is full, tests, bench, harness, compare, convolve, convbench, checks, suites, sanitizer, faults, python, threads, background, batch, batchonly, multigpu, deblend, deblendbench, bane, fit, fitbench or quick" >&2; exit 2 ;;
esac
want() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
BIN=$B/bin
export SKYFIND_TEST_DATA=${SKYFIND_TEST_DATA:-$B/extra/data}
export SKYFIND_PIPELINES=$PWD/pipelines CK_FORK=no
mkdir -p "$OUTDIR" "$OUTDIR/work"
sizes="2048 4096 8192"
[ "$MODE" = quick ] && sizes="2048"
W=$OUTDIR/work
fail=0
say() { printf '\n=== %s\n' "$*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader

if want suites; then
say "Check suites (GPU cases against the CPU twins)"
if [ -n "${SUITES:-}" ]; then suites=$(printf "$BIN/tests/test_%s " $SUITES); else suites=$(ls "$BIN"/tests/test_*); fi
# SUITE_JOBS suites at once (default 4: on the 16-core H100 machine the ten
# took 4.0-4.3 minutes of wall time so, test_background's own 239-254 s
# being the end of it); each line is printed as its suite ends
rm -f "$W/suites_failed"
suite_one() {
    local t=$1 log=$W/$(basename "$1").log s=$SECONDS rc
    "$t" >"$log" 2>&1; rc=$?
    printf '%-20s rc=%d %4ds  %s\n' "$(basename "$t")" $rc $((SECONDS - s)) "$(grep -E '^[0-9]+%|SKIP' "$log" | tr '\n' ' ')"
    [ $rc = 0 ] || { echo "$(basename "$t")" >>"$W/suites_failed"; tail -20 "$log"; }
}
for t in $suites; do
    while [ "$(jobs -rp | wc -l)" -ge "${SUITE_JOBS:-4}" ]; do wait -n; done
    suite_one "$t" &
done
wait
[ -s "$W/suites_failed" ] && { fail=1; echo "suites failed: $(tr '\n' ' ' <"$W/suites_failed")"; }

fi
if want sanitizer; then
say "compute-sanitizer memcheck, racecheck, initcheck and synccheck on the GPU cases (quick sizes)"
"$BIN/skyfind" simulate -q -n 512 --seed 5 --pairs 20 -o "$W/san512.fits"
# SAN_JOBS sanitizer runs at once (each is one process with its own context;
# racecheck is bound by the host CPU, so on a 16-core machine 8 at a time
# finish the sweep in the time of the slowest); each result line is printed
# when its run ends, and the logs stay in $W/san_*.log. SAN_RUNS: the pipelines
# of the whole-tool runs (empty: none); SAN_SUITES and SANITIZER_TOOLS narrow
# the rest
san_one() {  # label log command...
    local label=$1 log=$2; shift 2
    timeout ${SAN_TIMEOUT:-240} "$@" >"$log" 2>&1; local rc=$?
    printf '%-26s rc=%d  %s\n' "$label" $rc "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^[0-9]+%' "$log" | tr '\n' ' ')"
    [ $rc = 0 ] || { grep -m5 -E 'Error|Invalid|Race|hazard|error' "$log"; echo "$label" >>"$W/san_failed"; }
    return $rc
}
rm -f "$W/san_failed"
san_wait() {  # keep fewer than SAN_JOBS runs going
    while [ "$(jobs -rp | wc -l)" -ge "${SAN_JOBS:-1}" ]; do wait -n; done
}
for p in ${SAN_RUNS-radio sextractor lesson}; do
    for tool in ${SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}; do
        san_wait
        # whole runs of the tool on the GPU backend: every pipeline, negative detections,
        # deblending and kernel=auto's decision, with every check image kept
        san_one "run $p $tool" "$W/san_run_${p}_$tool.log" \
            compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/skyfind" run -q -b gpu -p $p \
            --set threshold.sign=both --save all -o "$W/san_out_${p}_$tool" "$W/san512.fits" "$W/san512.fits" &
    done
done
# racecheck on the bane suite ran past 540 s in one process: its comparisons
# are split between SAN_PARTS processes (SKYFIND_TEST_PART, tests/sftest.h),
# every one of them checked by one of the parts. On the H200 host (call C of
# tests/bench/results/h200-2026-12-02-process) one comparison alone took
# 125-150 s under racecheck, most of it the tool's start, and an eighth of
# the 196 did not finish in 430 s; give it SAN_JOBS=16 (32 parts by
# default, two rounds) and SAN_TIMEOUT=560
for t in ${SAN_SUITES:-${SUITES:-decode background background_mesh convolve threshold segment measure deblend}}; do
    for tool in ${SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}; do
        parts=1
        # (each part pays the tool's start: split only when parts run side by side)
        [ "$t:$tool" = background_bane:racecheck ] && [ "${SAN_JOBS:-1}" -gt 1 ] &&
            parts=${SAN_PARTS:-$((2 * SAN_JOBS))}
        for k in $(seq 0 $((parts - 1))); do
            san_wait
            label="$t $tool"
            [ "$parts" -gt 1 ] && label="$t $tool $k/$parts"
            SKYFIND_TEST_PART=$k/$parts SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu san_one "$label" \
                "$W/san_${t}_${tool}_$k.log" \
                compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/tests/test_$t" &
        done
    done
done
wait
[ -s "$W/san_failed" ] && { fail=1; echo "sanitizer failures: $(tr '\n' ' ' <"$W/san_failed")"; }
fi
if want conv; then
say "convolution against scipy in float64 on both backends (tests/py/test_convolve_scipy.py)"
SKYFIND_BUILD=$B/bin SKYFIND_CONV_BACKENDS="cpu gpu" python3 tests/py/test_convolve_scipy.py >"$W/conv_scipy.log" 2>&1; rc=$?
tail -4 "$W/conv_scipy.log"; [ $rc = 0 ] || fail=1

fi
if want compare; then
say "skyfind compare on the real images (lesson, radio, sextractor (deblending) and radio with negative detections)"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in lesson radio sextractor radio+neg aegean; do
    set_=(); [ $p = radio+neg ] && set_=(--set threshold.sign=both)
    "$BIN/skyfind" compare -q -p ${p%+neg} "${set_[@]}" --json $real >"$W/compare_real_$p.json" 2>"$W/compare_real_$p.err"; rc=$?
    echo "pipeline $p: rc=$rc, $(grep -c '"agree":true' "$W/compare_real_$p.json") agree, $(grep -c '"agree":false' "$W/compare_real_$p.json") disagree; errors: $(grep -c . "$W/compare_real_$p.err")"
    grep '"agree":false' "$W/compare_real_$p.json"; head -5 "$W/compare_real_$p.err"
    [ $rc = 0 ] || fail=1
done

fi
if want compare; then
say "skyfind compare on simulated images: $sizes"
for n in $sizes; do
    "$BIN/skyfind" simulate -q -n $n --seed $n -o "$W/sim$n.fits"
    for p in lesson radio sextractor radio+neg aegean; do
        set_=(); [ $p = radio+neg ] && set_=(--set threshold.sign=both)
        "$BIN/skyfind" compare -p ${p%+neg} "${set_[@]}" "$W/sim$n.fits" >"$W/compare_sim${n}_$p.txt" 2>&1; rc=$?
        sed 's/^/  /' "$W/compare_sim${n}_$p.txt"; [ $rc = 0 ] || fail=1
    done
done

fi
if want compare; then
say "bytes moved by a catalogue-only GPU run (lesson pipeline, 8192 if made)"
n=${sizes##* }
"$BIN/skyfind" run -b gpu -p lesson -o "$W/out" "$W/sim$n.fits" 2>&1 | tail -8
echo "image bytes: $((n * n * 4)); catalogue rows: $(grep -vc '^#' "$W/out/sim$n.cat.csv") (header included)"

fi
if want bench && [ -z "${BENCHES:-}" ]; then
say "benchmark: lesson pipeline, skyfind GPU stages against the lesson's CuPy and numpy code"
"$BIN/tests/bench/bench_lesson" --sizes "${sizes// /,}" --repeat 20 --raw "$W" --json "$OUTDIR/bench_lesson.json" | tee "$OUTDIR/bench_lesson.txt"
python3 tests/bench/peers/lesson_peers.py "$W" $sizes --repeat 3 --cpu-max 4096 | tee "$OUTDIR/bench_peers.txt"

fi
if want convbench; then
say "benchmark: convolve (direct, separable, fft) against cupyx.scipy.ndimage.convolve and cupyx.scipy.signal.fftconvolve"
"$BIN/tests/bench/bench_convolve" --sizes "${sizes// /,}" --repeat 20 --raw "$W" | tee "$OUTDIR/bench_convolve.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
python3 tests/bench/peers/convolve_cupy.py "$W" $sizes --repeat 10 | tee -a "$OUTDIR/bench_convolve.txt"
rm -f "$W"/conv_*.f32

fi
if want convtune; then
say "convolve variants at 8192 (developer knobs: output rows per thread of the 2-D kernel, separable path)"
for v in SKYFIND_CONV_RPT=1 SKYFIND_CONV_RPT=2 SKYFIND_CONV_RPT=4 SKYFIND_CONV_SEP=fused SKYFIND_CONV_SEP=two; do
    echo "--- $v"
    env $v "$BIN/tests/bench/bench_convolve" --sizes 8192 --kernels 3,5,9,15,21,41 --repeat 20 |
        grep -v -e '^#' -e '^fft probe' | tee -a "$OUTDIR/bench_convolve_variants.txt"
done

fi
if want bench && [ -z "${BENCHES:-}" ]; then
say "benchmark: segment on hard masks (8- and 4-connectivity) against cupyx.scipy.ndimage.label"
"$BIN/tests/bench/bench_segment" --sizes "${sizes// /,}" --repeat 20 --raw "$W" | tee "$OUTDIR/bench_segment.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
python3 tests/bench/peers/label_cupy.py "$W" $sizes --repeat 5 | tee -a "$OUTDIR/bench_segment.txt"
rm -f "$W"/seg_*.u8

fi
if want bench; then
say "benchmark: mesh background (box 64, filter 3), GPU and CPU twin against sep.Background"
"$BIN/tests/bench/bench_background" --sizes "${sizes// /,}" --repeat 20 --raw "$W" | tee "$OUTDIR/bench_background.txt"
if ls .whl/sep-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl &&
        PYTHONPATH=/tmp/site OMP_NUM_THREADS=1 python3 tests/bench/peers/background_sep.py "$W" $sizes | tee -a "$OUTDIR/bench_background.txt"
else
    echo "sep.Background not run: no sep wheel in .whl/ (see the device README: pip download sep)"
fi
fi
if want harness; then
say "benchmark harness: skyfind (every stage, CPU and GPU) against numpy, CuPy, SEP, photutils and SExtractor"
# The wheels carried in .whl/ (sep, photutils, astropy, pyerfa, astropy-iers-data) go to
# /tmp/site; a peer that still cannot import is listed as "not run: reason". SExtractor is
# not on this machine: merge the rows of a CPU-only run made beside the repository with
#   tests/bench/harness.py --plot-only OUTDIR/harness/results.json --merge HERE.json --out DIR
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -d /tmp/site/photutils ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
        echo "harness: installing the carried wheels failed; the peers that need them will say so"
fi
PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 python3 tests/bench/harness.py \
    --build "$BIN" --sizes "${sizes// /,}" --repeat 10 --cpu-repeat 3 --peer-repeat 3 --peer-budget 20 \
    --out "$OUTDIR/harness" >"$OUTDIR/harness.txt" 2>&1 || echo "harness: failed (exit $?)"
sed -n '/^# summary/,$p' "$OUTDIR/harness.txt"   # the full table: $OUTDIR/harness/results.md
fi
# every stage of some pipelines timed on both backends (bench_pipeline), and
# radio.pipe end to end with one process per image (CUDA's start, ~0.2-0.3 s,
# included)
pipe_bench() {  # title pipelines cpu-max outfile
    say "benchmark: $1, GPU and CPU twin on all cores"
    "$BIN/tests/bench/bench_pipeline" -p "$2" --sizes "${sizes// /,}" --repeat 10 --cpu-repeat 1 \
        --cpu-max "$3" --backend both --workdir "$W" | tee "$OUTDIR/$4"
    [ "${PIPESTATUS[0]}" = 0 ] || fail=1
}
one_process_e2e() {
    for n in $sizes; do
        [ -f "$W/sim$n.fits" ] || "$BIN/skyfind" simulate -q -n $n --seed $n -o "$W/sim$n.fits"
        TIMEFORMAT="end to end (FITS read to CSV, one process) radio.pipe GPU $n: %R s wall"
        time "$BIN/skyfind" run -q -b gpu -o "$W/e2e" "$W/sim$n.fits"
    done
}
if want banebench; then
pipe_bench "every stage of radio.pipe (background method=bane)" radio 4096 bench_bane.txt
one_process_e2e
fi
if want fitbench; then
pipe_bench "every stage of radio.pipe and aegean.pipe (the fit stage: device time, fits per second)" \
    radio,aegean 8192 bench_fit.txt
one_process_e2e
say "batch throughput, radio.pipe with and without its fit stage (16 images a run, GPU)"
grep -v '^fit' pipelines/radio.pipe >"$W/radio_nofit.pipe"
for n in $sizes; do
    for p in radio "$W/radio_nofit.pipe"; do
        files=(); for i in $(seq 16); do files+=("$W/sim$n.fits"); done
        "$BIN/skyfind" run -q -b gpu -p "$p" --json -o "$W/batch" "${files[@]}" 2>/dev/null |
            grep '"summary"' | sed "s|^|$n $(basename "$p"): |" | tee -a "$OUTDIR/batch_fit.txt"
    done
done
fi
if want deblendbench; then
pipe_bench "every stage of the sextractor pipeline (deblending) and the radio pipeline" \
    sextractor,radio 4096 bench_deblend.txt
fi
if want multigpu; then
say "one GPU against every GPU (tests/gpu/multi-gpu.sh)"
tests/gpu/multi-gpu.sh "$OUTDIR/multigpu" 2>&1 | tee "$OUTDIR/multigpu.txt"; [ "${PIPESTATUS[0]}" = 0 ] || fail=1
fi
if want faults; then
say "GPU faults: out of device memory, sticky CUDA error (tests/gpu/faults.sh)"
tests/gpu/faults.sh 2>&1 | tee "$OUTDIR/faults.txt"; [ "${PIPESTATUS[0]}" = 0 ] || fail=1
say "non-finite and float-limit pixels, CPU against GPU (tests/gpu/nonfinite.sh)"
tests/gpu/nonfinite.sh 2>&1 | tee "$OUTDIR/nonfinite.txt"; [ "${PIPESTATUS[0]}" = 0 ] || fail=1
fi
if want python; then
say "the Python package on CuPy arrays (tests/gpu/python-api.sh)"
tests/gpu/python-api.sh 2>&1 | tee "$OUTDIR/python.txt"; [ "${PIPESTATUS[0]}" = 0 ] || fail=1
fi
if want threads; then
say "CPU thread scaling (tests/bench/threads.sh)"
tests/bench/threads.sh "$BIN/skyfind" "$OUTDIR" "${THREAD_SIZES:-4096 8192}" "${THREAD_REPS:-3}" >/dev/null 2>"$OUTDIR/threads.err"
[ $? = 0 ] || { fail=1; cat "$OUTDIR/threads.err"; }
cat "$OUTDIR/threads.md"
rm -rf "$OUTDIR/threads"
fi
if want batch; then
say "batch benchmark (tests/gpu/batch-bench.sh)"
tests/gpu/batch-bench.sh "$OUTDIR/batch" ${BATCH_N4096:-64} ${BATCH_N8192:-16} 2>&1 | tee "$OUTDIR/batch.txt"
fi
rm -f "$W"/*.f32 "$W"/*.fits
echo
nskip=$(grep -l "SKIP: no CUDA device" "$W"/test_*.log 2>/dev/null | wc -l)
if [ "$nskip" != 0 ]; then # skipped GPU cases are not passes
    echo "GPU SUITE: $nskip suites found no CUDA device and skipped their GPU cases"
    fail=1
fi
[ $fail = 0 ] && echo "GPU SUITE: ALL PASSED" || echo "GPU SUITE: FAILURES or GPU cases not run (see above)"
exit $fail
