#!/usr/bin/env bash
# Call U, 2026-12-03 (stop 54), on the H200 host: f13d890 (4-byte pixels
# decoded as they are read on the CPU backend; the -32 decode's NaN count in
# 32-bit lanes) against 7eef8e4, both CPU-only. The GPU decode, fits and
# outdir suites and memcheck on the decode suite and whole GPU runs (the
# raw layout grew two fields); the GPU fault tests (the batch engine's CPU
# fallback); test_simd.sh; bench_read_decode on 2048^2-8192^2 skies;
# old against new at one thread with SExtractor (harness settings) and at
# 16; threads.sh for the three pipelines, 3 rounds. Carry
# .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90, ../shared/data;
# .xb: skyfind_old, skyfind_new, bench_read_decode, source-extractor).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callU.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$LOG"
say "GPU suites decode, fits, outdir"
SUITES="decode fits outdir" tests/gpu/run-all.sh /tmp/ra checks 2>&1 | tee -a "$LOG"
say "memcheck: test_decode, whole GPU runs"
CK_FORK=no compute-sanitizer --tool memcheck --error-exitcode 9 .gpu-bundle/bin/tests/test_decode 2>&1 | grep -E "SUMMARY|^[0-9]+%" | tee -a "$LOG"
.gpu-bundle/bin/skyfind simulate -q -n 1024 --seed 5 -o /tmp/s1024.fits
for p in radio lesson; do
    compute-sanitizer --tool memcheck --error-exitcode 9 .gpu-bundle/bin/skyfind run -q -b gpu -p $p -o /tmp/san_$p /tmp/s1024.fits /tmp/s1024.fits 2>&1 | grep -E "SUMMARY" | tee -a "$LOG"
    echo "memcheck run $p rc=${PIPESTATUS[0]}" | tee -a "$LOG"
done
say "GPU faults and non-finite pixels"
tests/gpu/run-all.sh /tmp/rf faults 2>&1 | tail -40 | tee -a "$LOG"
say "test_simd.sh on this host (the CPU-only build)"
SKYFIND=.xb/bin/skyfind_new bash tests/cli/test_simd.sh 2>&1 | tail -3 | tee -a "$LOG"
say "bench_read_decode"
P=/tmp/prof; mkdir -p $P
for n in 2048 4096 8192; do
    .xb/bin/skyfind_new simulate -q -n $n --seed 11 -o $P/sim$n.fits; cat $P/sim$n.fits >/dev/null
done
.xb/bin/bench_read_decode $P/sim2048.fits $P/sim4096.fits $P/sim8192.fits 2>&1 | tee -a "$LOG"
say "one thread: old against new, SExtractor (harness settings)"
SEXTRACTOR=.xb/bin/source-extractor SEXWORK=harness PIPES="lesson sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callU-cpu-ab-1.md
say "16 threads: old against new"
THREADS=16 PIPES="lesson sextractor radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "4096 8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callU-cpu-ab-16.md
say "16 cores: threads.sh, round by round, the new CPU-only build"
PIPES="lesson sextractor radio" tests/bench/threads.sh .xb/bin/skyfind_new /tmp/th "4096 8192" 3 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callU-threads.csv
say "done"
