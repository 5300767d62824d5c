#!/usr/bin/env bash
# Call M, 2026-12-02 (night), on the H200 host (16 cores): HEAD 341f938
# (the deblend's and the label walks' CPU changes) against f981983, both
# CPU-only. The GPU suites of the changed CPU twins' stages (deblend,
# measure, segment, fit, threshold: GPU against the new twins); `skyfind
# compare` of lesson, sextractor and radio on the real images and the
# simulated 2048, 4096 and 8192 skies; one thread, old against new beside
# SExtractor at the harness's settings (cpu-ab.sh, 5 alternations);
# threads.sh round by round, 5 rounds, on the CUDA build's CPU backend; the
# harness at one thread with SEP and SExtractor at both works. Carry
# .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90, and
# ../shared/data; .xb: skyfind_old and skyfind_new, CPU-only, Debian's
# source-extractor with its libraries, SEP 1.4.1's wheel).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callM.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "host"
{ nproc; lscpu | grep -E 'Model name|Thread'; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } 2>&1 | tee -a "$LOG"
python3 -c "import sep" 2>/dev/null ||
    python3 -m pip install -q --no-deps --no-index --find-links .xb/whl sep 2>&1 | tail -2 | tee -a "$LOG"
say "GPU suites against the new CPU twins: deblend measure segment fit threshold"
SUITES="deblend measure segment fit threshold" SUITE_JOBS=5 tests/gpu/run-all.sh /tmp/ra checks 2>&1 | tee -a "$LOG"
say "compare lesson, sextractor, radio"
COMPARE_PIPES="lesson sextractor radio" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
echo "floor.sh rc=$?" | tee -a "$LOG"
grep -E "AGREE|DISAGREE|real images|sim" /tmp/fl/floor.log | tail -20 | tee -a "$LOG"
cp /tmp/fl/floor.log $O/callM-compare.log 2>/dev/null
say "one thread: old against new, beside SExtractor (harness settings)"
PIPES="radio sextractor lesson" SEXWORK="harness" SEXTRACTOR=.xb/bin/source-extractor \
    tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callM-cpu-ab-1.md
say "16 cores: threads.sh, round by round, the CUDA build's CPU backend"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callM-threads.csv
say "harness, one thread, SEP and SExtractor at both works"
PATH=$PWD/.xb/bin:$PATH OMP_NUM_THREADS=1 timeout 300 python3 tests/bench/harness.py --build .gpu-bundle/bin \
    --sizes 2048,4096 --peers sep,sextractor --peer-work both --threads 1 --out /tmp/h 2>&1 | tail -45 | tee -a "$LOG"
cp /tmp/h/results.md $O/callM-harness.md 2>/dev/null
say "done"
