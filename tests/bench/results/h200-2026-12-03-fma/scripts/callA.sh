#!/usr/bin/env bash
# Call A, 2026-12-03 (stop 55), on the H200 host: the general 2-D direct
# convolution's sums as the GPU's fused multiply-add chains on the CPU
# (cpu/convolve_fma.c; AVX-512, AVX2 + FMA and scalar builds), and the CPU
# picker taking it up to 225 taps. The convolve suite (the GPU's direct
# sums bit for bit against the CPU twin's; the CPU case in each build);
# memcheck and racecheck on its GPU case; CPU and GPU radio.pipe on two
# skies: filtered images and catalogues byte for byte; test_simd.sh;
# sf_convolve_tool at 2048^2 and 4096^2 (direct in each build, FFT; one
# and two column blocks at 15 columns); old (b1cf9c3) against new at one
# thread beside SExtractor and at 16; threads.sh for radio.pipe; skyfind
# compare and the scipy convolution test on both backends. Carry
# .gpu-bundle.tar.xz (.gpu-bundle: skyfind, test_convolve, sf_convolve_tool
# of the CUDA build, sm_90, ../shared/data; .xb: skyfind_old, skyfind_new,
# sf_convolve_tool of CPU-only builds, source-extractor).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callA.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$LOG"
grep -o -w 'avx512f\|fma' /proc/cpuinfo | sort | uniq -c | tee -a "$LOG"
B=.gpu-bundle/bin
say "convolve suite (CUDA build): GPU against the CPU twin, and the CPU case"
CK_FORK=no $B/tests/test_convolve 2>&1 | grep -E "^[0-9]+%|gpu direct|direct 2-D|test_convolve.c|SKIP" | tee -a "$LOG"
for lv in avx2 0; do
    SKYFIND_SIMD=$lv CK_RUN_CASE=cpu CK_FORK=no $B/tests/test_convolve 2>&1 | grep -E "^[0-9]+%|direct 2-D|test_convolve.c" | tee -a "$LOG"
done
say "compute-sanitizer memcheck and racecheck on the GPU case (quick sizes)"
for tool in memcheck racecheck; do
    SKYFIND_TEST_QUICK=1 CK_RUN_CASE=gpu CK_FORK=no compute-sanitizer --tool $tool --error-exitcode 9 \
        $B/tests/test_convolve 2>&1 | grep -E "SUMMARY|^[0-9]+%|gpu direct" | tee -a "$LOG"
    echo "$tool rc=${PIPESTATUS[0]}" | tee -a "$LOG"
done
P=/tmp/prof; mkdir -p $P
for n in 2048 4096 8192; do
    $B/skyfind simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
say "radio.pipe on both backends: filtered images and catalogues"
for n in 2048 4096; do
    for b in cpu gpu; do
        $B/skyfind run -q -b $b -p radio -v --save filtered -o $P/rb_$b $P/sim$n.fits 2>$P/rb_$b.err
        grep convolve $P/rb_$b.err | tee -a "$LOG"
    done
    for x in filt.fits cat.csv comp.csv; do
        cmp -s $P/rb_cpu/sim$n.$x $P/rb_gpu/sim$n.$x && r=same || r=DIFFER
        echo "sim$n $x cpu vs gpu: $r" | tee -a "$LOG"
    done
done
say "test_simd.sh (the CPU-only build)"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -3 | tee -a "$LOG"
say "sf_convolve_tool, CPU-only build, median of 7"
T=.xb/bin/sf_convolve_tool
for n in 2048 4096; do
    for k in 9 15 21; do
        ker=gauss:$(python3 -c "print($k/3.0)"),$(python3 -c "print($k/4.5)"),30,$k
        [ $k = 15 ] && ker=gauss:5,3.5,30,15
        for th in 1 16; do
            for v in direct direct-nb2 direct-avx2 fft; do
                case $v in
                    direct-nb2) e="SKYFIND_CONV2D_NB2=15" m=direct ;;
                    direct-avx2) e="SKYFIND_SIMD=avx2" m=direct ;;
                    *) e="SKYFIND_X=" m=$v ;;
                esac
                env $e $T --fits $P/sim$n.fits --kernel $ker --method $m --threads $th --nan 0 --repeat 7 2>&1 |
                    tail -1 | sed "s/^/$n k$k t$th $v: /" | tee -a "$LOG"
            done
        done
    done
done
say "one thread: old (b1cf9c3) against new, SExtractor (harness settings)"
SEXTRACTOR=.xb/bin/source-extractor SEXWORK=harness PIPES="radio aegean" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callA-cpu-ab-1.md
say "16 threads: old against new"
THREADS=16 PIPES="radio aegean" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callA-cpu-ab-16.md
say "16 cores: threads.sh radio, 3 rounds, the new CPU-only build"
PIPES="radio" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callA-threads.csv
say "skyfind compare (real images, 2048/4096/8192 skies) and the scipy convolution test on both backends"
sizes="2048 4096 8192" tests/gpu/run-all.sh /tmp/rc compare 2>&1 | tail -60 | tee -a "$LOG"
say "done"
