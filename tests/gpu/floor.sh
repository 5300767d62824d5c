#!/usr/bin/env bash
# Issue 18 on the GPU machine: the default pipelines against their floors.
#   . .gpu-bundle/env.sh && tests/gpu/floor.sh OUT [SECTION...]
# Sections (default: all, in this order):
#   suites  the suites of the stages changed for it (GPU against the CPU twin)
#   sanitizer  compute-sanitizer memcheck and racecheck on SAN_SUITES
#           (default background_bane) and on whole runs of SAN_PIPES
#           (default radio), SAN_JOBS (default 8) at once, each stopped
#           after SAN_TIMEOUT seconds (default 600; rc 124)
#   bench   bench_pipeline -p radio,lesson,sextractor on the GPU at 2048, 4096
#           and 8192 (median of 10, CUDA events), today's kernels and, in the
#           same process run, SKYFIND_BANE_BLOCK=1 (the block-per-cell and
#           block-per-node bane kernels they replace) alternated twice
#           (FLOOR_VARIANTS="new" skips the block kernels; a variant
#           NAME=VALUE[,NAME=VALUE...] runs with those in the environment, e.g.
#           SKYFIND_CONV_RB=0 for the 2-D convolution's older kernel; the
#           variant old runs FLOOR_OLD_BENCH, an earlier build's
#           bench_pipeline, for before/after in one call, and a variant
#           exe:PATH the bench_pipeline at PATH; FLOOR_ROUNDS
#           rounds, default 2)
#   ncu     Nsight Compute kernel times of one run at NCU_SIZE (default
#           8192^2) of each pipeline in NCU_PIPES (default radio)
#   ncudetail  Nsight Compute sections (speed of light, occupancy, launch,
#           memory; NCU_SECTIONS) of the kernels matching NCU_KERNELS (a
#           regex; default bkg_clip) in one run of each NCU_DETAIL_PIPES
#           (default lesson)
#   ncusource  where the instructions of the kernels matching NCU_KERNELS
#           (a regex; default bane_nodes_warp) go, by CUDA source line: Nsight
#           Compute's SourceCounters of one radio run at NCU_SIZE joined with
#           nvdisasm's line information (tests/gpu/trace/sass_lines.py)
#   compare skyfind compare (CPU against GPU, every stage) of the pipelines
#           in COMPARE_PIPES (default: lesson radio) on the real images and
#           on the simulated skies of SIZES
#   e2e     one process per image, FITS in to catalogue out, radio.pipe GPU
#   trace   the GPU's timeline (CUPTI, tests/gpu/trace/sftrace.c, bundled
#           as extra/libsftrace.so with libcupti.so.13 beside it; the lent
#           machine has no Nsight Systems) of bench_pipeline's last of 3
#           runs of each TRACE_PIPES (default radio) at TRACE_SIZE (default
#           8192^2): busy and idle time, stage by stage, the idle gaps and
#           the host calls in them (tests/gpu/trace/timeline.py)
# Logs go to OUT as they are written (a call that times out keeps them).
set -u
OUTDIR=${1:?usage: floor.sh OUT [SECTION...]}
shift
SECTIONS=${*:-suites sanitizer bench ncu ncudetail compare e2e}
want() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
BIN=$B/bin
export SKYFIND_TEST_DATA=${SKYFIND_TEST_DATA:-$B/extra/data}
export SKYFIND_PIPELINES=$PWD/pipelines CK_FORK=no
W=$OUTDIR/work
mkdir -p "$W"
LOG=$OUTDIR/floor.log
sizes=${SIZES:-2048 4096 8192}
fail=0
say() { printf '\n=== %s\n' "$*" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
for n in $sizes; do
    [ -f "$W/sim$n.fits" ] || "$BIN/skyfind" simulate -q -n "$n" --seed "$n" -o "$W/sim$n.fits"
done

if want suites; then
    say "suites (GPU against the CPU twin)"
    for t in ${FLOOR_SUITES:-background_bane background background_mesh convolve threshold segment}; do
        "$BIN/tests/test_$t" >"$W/test_$t.log" 2>&1
        rc=$?
        printf '%-24s rc=%d  %s\n' "test_$t" $rc "$(grep -E '^[0-9]+%|SKIP' "$W/test_$t.log" | tr '\n' ' ')" | tee -a "$LOG"
        [ $rc = 0 ] || { fail=1; tail -20 "$W/test_$t.log" | tee -a "$LOG"; }
    done
fi

if want sanitizer; then
    say "compute-sanitizer memcheck and racecheck (quick sizes) on the suites and whole runs (SAN_JOBS at once)"
    "$BIN/skyfind" simulate -q -n 512 --seed 5 --pairs 20 -o "$W/san512.fits"
    san_logs=()
    san_job() { # tool, name, command...: one sanitizer run in the background, SAN_JOBS at once
        local tool=$1 name=$2
        shift 2
        while [ "$(jobs -rp | wc -l)" -ge "${SAN_JOBS:-8}" ]; do sleep 0.5; done
        SKYFIND_TEST_QUICK=1 timeout "${SAN_TIMEOUT:-600}" compute-sanitizer --tool "$tool" \
            --error-exitcode 9 "$@" >"$W/san_${tool}_$name.log" 2>&1 &
        san_logs+=("$tool $name $W/san_${tool}_$name.log $!")
    }
    for tool in memcheck racecheck; do
        for t in ${SAN_SUITES:-background_bane}; do
            san_job $tool "test_$t" "$BIN/tests/test_$t"
        done
        for pipe in ${SAN_PIPES:-radio}; do
            mkdir -p "$W/san_out_${tool}_$pipe"
            san_job $tool "run_$pipe" "$BIN/skyfind" run -q -b gpu -p $pipe -o "$W/san_out_${tool}_$pipe" "$W/san512.fits"
        done
    done
    for e in "${san_logs[@]}"; do
        set -- $e
        wait "$4"; rc=$?
        printf '%-10s %-22s rc=%d  %s\n' $1 "$2" $rc "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$3" | tr '\n' ' ')" | tee -a "$LOG"
        [ $rc = 0 ] || fail=1
    done
fi

if want bench; then
    say "bench_pipeline, GPU stages (median of 10): variants ${FLOOR_VARIANTS:-new block}, ${FLOOR_ROUNDS:-2} rounds"
    for rep in $(seq "${FLOOR_ROUNDS:-2}"); do
        for v in ${FLOOR_VARIANTS:-new block}; do
            say "variant $v, round $rep"
            bench=$BIN/tests/bench/bench_pipeline
            case $v in
            new) envv=() ;;
            old) envv=(); bench=${FLOOR_OLD_BENCH:?FLOOR_OLD_BENCH: an earlier build of bench_pipeline} ;;
            exe:*) envv=(); bench=${v#exe:} ;;
            block) envv=(SKYFIND_BANE_BLOCK=1) ;;
            *=*) IFS=, read -ra envv <<< "$v" ;;
            esac
            env "${envv[@]}" "$bench" -p "${FLOOR_PIPES:-radio,lesson,sextractor}" \
                --sizes "${sizes// /,}" --repeat 10 --backend gpu --workdir "$W" 2>&1 | tee -a "$LOG"
        done
    done
fi

if want trace && [ ! -f "${SFTRACE_LIB:-$B/extra/libsftrace.so}" ]; then
    # tools/gpu-bundle does not carry it: copy the CUDA build's
    # tests/libsftrace.so and the toolkit's libcupti.so.13 into extra/
    say "trace: ${SFTRACE_LIB:-$B/extra/libsftrace.so} missing (put build/tests/libsftrace.so and libcupti.so.13 in the bundle's extra/); skipped"
elif want trace; then
    n=${TRACE_SIZE:-8192}
    for pipe in ${TRACE_PIPES:-radio}; do
        say "GPU timeline of $pipe.pipe at ${n}^2 (sftrace, bench_pipeline's last of 3 runs)"
        LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$B/extra \
        CUDA_INJECTION64_PATH=${SFTRACE_LIB:-$B/extra/libsftrace.so} SFTRACE_OUT="$W/trace-$pipe-$n.csv" \
            "$BIN/tests/bench/bench_pipeline" -p $pipe --sizes $n --repeat 3 --backend gpu \
            --workdir "$W" >"$W/trace-$pipe-$n.bench" 2>&1
        grep -E " gpu +[a-z]" "$W/trace-$pipe-$n.bench" | tee -a "$LOG"
        python3 tests/gpu/trace/timeline.py "$W/trace-$pipe-$n.csv" --detail "${TRACE_DETAIL:-8}" 2>&1 | tee -a "$LOG"
    done
fi

if want ncu; then
    n=${NCU_SIZE:-8192}
    for pipe in ${NCU_PIPES:-radio}; do
    say "Nsight Compute: kernel times of $pipe.pipe on the ${n}^2 sky (one run)"
    ncu --csv --metrics gpu__time_duration.sum "$BIN/skyfind" run -q -b gpu -p $pipe -o "$W/ncu" \
        "$W/sim$n.fits" >"$W/ncu-$pipe.csv" 2>"$W/ncu-$pipe.err"
    python3 - "$W/ncu-$pipe.csv" <<'EOF' | tee -a "$LOG"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
tot = collections.OrderedDict()
for r in rows[1:]:
    name = r[k].split("(")[0].split("<")[0]
    val = float(r[v].replace(",", ""))
    val = val / 1e6 if r[u] in ("ns", "nsecond") else val / 1e3 if r[u] in ("us", "usecond") else val
    c, s = tot.get(name, (0, 0.0)); tot[name] = (c + 1, s + val)
all_ms = sum(s for _, s in tot.values())
for name, (c, s) in sorted(tot.items(), key=lambda t: -t[1][1]):
    print(f"{s:9.3f} ms {100*s/all_ms:5.1f}%  x{c:<4d} {name}")
print(f"{all_ms:9.3f} ms in all (kernels only, serialised by ncu)")
EOF
    done
fi

if want ncudetail; then
    n=${NCU_SIZE:-8192}
    for pipe in ${NCU_DETAIL_PIPES:-lesson}; do
        say "Nsight Compute sections of /${NCU_KERNELS:-bkg_clip}/ in $pipe.pipe on the ${n}^2 sky"
        ncu --kernel-name "regex:${NCU_KERNELS:-bkg_clip}" \
            $(printf -- '--section %s ' ${NCU_SECTIONS:-SpeedOfLight Occupancy LaunchStats MemoryWorkloadAnalysis}) \
            "$BIN/skyfind" run -q -b gpu -p $pipe -o "$W/ncu" "$W/sim$n.fits" >"$W/ncud-$pipe.log" 2>&1
        grep -vE '^==PROF==|^ *$' "$W/ncud-$pipe.log" | tee -a "$LOG" | tail -300 >/dev/null
    done
fi

if want ncusource; then
    n=${NCU_SIZE:-8192}
    say "instructions by source line of /${NCU_KERNELS:-bane_nodes_warp}/ (radio.pipe, ${n}^2 sky)"
    ncu --kernel-name "regex:${NCU_KERNELS:-bane_nodes_warp}" --launch-count 1 --section SourceCounters \
        -f -o "$W/ncusrc" "$BIN/skyfind" run -q -b gpu -p radio -o "$W/ncu" "$W/sim$n.fits" >"$W/ncusrc.log" 2>&1
    ncu -i "$W/ncusrc.ncu-rep" --page source --csv --print-source sass >"$W/ncusrc.csv" 2>>"$W/ncusrc.log"
    (cd "$W" && rm -f ./*.cubin && cuobjdump -xelf all "$BIN/skyfind" >/dev/null 2>&1)
    name=$(grep -m1 -o '"Kernel Name","[^"(<]*' "$W/ncusrc.csv" | sed 's/.*,"//')
    for c in "$W"/*.cubin; do
        cuobjdump -symbols "$c" 2>/dev/null | grep -q "$name" || continue
        nvdisasm --print-line-info "$c" >"$W/ncusrc.sass" 2>>"$W/ncusrc.log"
        python3 tests/gpu/trace/sass_lines.py "$W/ncusrc.sass" "$W/ncusrc.csv" "$name" 2>&1 | tee -a "$LOG"
    done
fi

if want compare; then
    real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
           grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
    for p in ${COMPARE_PIPES:-lesson radio}; do
        say "skyfind compare -p $p: the real images, then the simulated skies $sizes"
        "$BIN/skyfind" compare -q -p $p --json $real >"$W/compare_real_$p.json" 2>"$W/compare_real_$p.err"
        rc=$?
        echo "real images: rc=$rc, $(grep -c '"agree":true' "$W/compare_real_$p.json") agree, $(grep -c '"agree":false' "$W/compare_real_$p.json") disagree" | tee -a "$LOG"
        [ $rc = 0 ] || { fail=1; grep '"agree":false' "$W/compare_real_$p.json" | head -5 | tee -a "$LOG"; head -5 "$W/compare_real_$p.err" | tee -a "$LOG"; }
        for n in $sizes; do
            "$BIN/skyfind" compare -p $p "$W/sim$n.fits" >"$W/compare_sim${n}_$p.txt" 2>&1
            rc=$?
            echo "sim$n: rc=$rc $(grep -cE 'AGREE|agree' "$W/compare_sim${n}_$p.txt") agreeing lines; $(tail -1 "$W/compare_sim${n}_$p.txt")" | tee -a "$LOG"
            [ $rc = 0 ] || { fail=1; tail -20 "$W/compare_sim${n}_$p.txt" | tee -a "$LOG"; }
        done
    done
fi

if want e2e; then
    say "end to end, one process per image (FITS in, catalogues out), radio.pipe on the GPU"
    for n in $sizes; do
        for rep in 1 2 3; do
            s=$(date +%s.%N)
            "$BIN/skyfind" run -q -b gpu -o "$W/e2e" "$W/sim$n.fits"
            e=$(date +%s.%N)
            echo "$n run $rep: $(python3 -c "print(f'{$e-$s:.3f}')") s" | tee -a "$LOG"
        done
    done
fi
say "floor.sh: $([ $fail = 0 ] && echo all passed || echo FAILURES)"
exit $fail
