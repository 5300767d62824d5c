#!/usr/bin/env bash
# Call B, 2026-12-03 (stop 56), on the H200 host: the CPU's local maps
# (method=mesh and bane) left unmade, their rows made in the threshold's
# pass and dropped, their pixels read from a view (0619608), against the
# previous main (92028c6, skyfind_old). The suites whose code changed
# (CUDA build: GPU against CPU twins, and the new CPU cases), memcheck on
# whole GPU runs, catalogues and maps on both backends, skyfind compare of
# the four pipelines, peak memory, one thread old/new beside SExtractor, 16
# threads old/new, threads.sh for all three pipelines. Carry
# .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callB.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
B=.gpu-bundle/bin
P=/tmp/prof; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "suites (CUDA build): background_mesh background background_bane threshold measure deblend fit"
for t in background_mesh background background_bane threshold measure deblend fit; do
    s=$(date +%s)
    CK_FORK=no timeout 300 $B/tests/test_$t 2>&1 | grep -E "^[0-9]+%|SKIP|test_.*\.c:[0-9]+" | head -8 | sed "s/^/$t: /" | tee -a "$LOG"
    echo "$t rc=${PIPESTATUS[0]} $(( $(date +%s) - s )) s" | tee -a "$LOG"
done
say "memcheck: whole GPU runs"
for a in "-p sextractor --save all" "-p radio --save all" "-p sextractor --set threshold.sign=both"; do
    compute-sanitizer --tool memcheck --error-exitcode 9 $B/skyfind run -q -b gpu $a -o $P/ms \
        $SKYFIND_TEST_DATA/radio_parkes_1904-66_SIN.fits $P/sim2048.fits 2>&1 | grep -E "SUMMARY" | tee -a "$LOG"
    echo "memcheck $a rc=${PIPESTATUS[0]}" | tee -a "$LOG"
done
say "sextractor.pipe and radio.pipe on both backends: catalogue rows, maps"
for p in sextractor radio; do
    for n in 2048 4096 8192; do
        for b in cpu gpu; do
            $B/skyfind run -q -b $b -p $p --save background,rms -o $P/rb_${p}_$b $P/sim$n.fits
        done
        r=""
        for x in bkg.fits rms.fits; do
            cmp -s $P/rb_${p}_cpu/sim$n.$x $P/rb_${p}_gpu/sim$n.$x && r="$r $x same" || r="$r $x DIFFER"
        done
        for x in cat.csv comp.csv; do
            [ -f $P/rb_${p}_cpu/sim$n.$x ] || continue
            cmp -s <(grep -v '^#' $P/rb_${p}_cpu/sim$n.$x) <(grep -v '^#' $P/rb_${p}_gpu/sim$n.$x) && r="$r, $x rows same" || r="$r, $x rows DIFFER"
            r="$r ($(grep -vc '^#' $P/rb_${p}_cpu/sim$n.$x) lines)"
        done
        echo "$p sim$n cpu vs gpu:$r" | tee -a "$LOG"
    done
done
say "peak memory, one thread, CPU-only builds (KB)"
for p in sextractor radio lesson; do
    for n in 4096 8192; do
        for w in old new; do
            python3 -c "import resource,subprocess,sys; subprocess.run(sys.argv[1:]); print('$p $w $n maxrss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" \
                .xb/bin/skyfind_$w run -q -b cpu -p $p --threads 1 -o $P/mem_$w $P/sim$n.fits | tee -a "$LOG"
        done
        cmp -s $P/mem_old/sim$n.cat.csv $P/mem_new/sim$n.cat.csv && echo "$p sim$n old/new catalogue same" | tee -a "$LOG"
    done
done
say "one thread: old against new, SExtractor (harness settings)"
SEXTRACTOR=.xb/bin/source-extractor SEXWORK=harness PIPES="sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; cat /tmp/ab1/cpu-ab.md | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callB-cpu-ab-1.md
say "16 threads: old against new"
THREADS=16 PIPES="sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 7 >/dev/null 2>&1
echo "cpu-ab rc=$?" | tee -a "$LOG"; cat /tmp/ab16/cpu-ab.md | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callB-cpu-ab-16.md
say "16 cores: threads.sh radio sextractor lesson, 3 rounds, the new CPU-only build"
PIPES="radio sextractor lesson" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callB-threads.csv
say "skyfind compare: the four pipelines, real images and skies"
real=$(ls "$SKYFIND_TEST_DATA"/*.fits "$SKYFIND_TEST_DATA"/*.fits.gz "$SKYFIND_TEST_DATA"/*.fz 2>/dev/null |
       grep -v -e REF_ -e TRUTH -e quirk_tilecomp_uint16)
for p in sextractor lesson radio aegean; do
    $B/skyfind compare -q -p $p --json $real >$P/cmp_$p.json 2>$P/cmp_$p.err; rc=$?
    echo "real images, $p: rc=$rc, $(grep -c '"agree":true' $P/cmp_$p.json) agree, $(grep -c '"agree":false' $P/cmp_$p.json) disagree" | tee -a "$LOG"
    for n in 2048 4096 8192; do
        $B/skyfind compare -p $p $P/sim$n.fits >$P/cmp_$n.txt 2>&1; rc=$?
        echo "sim$n $p: rc=$rc $(grep -E 'result' $P/cmp_$n.txt | tr -s ' ')" | tee -a "$LOG"
    done
done
say "done"
