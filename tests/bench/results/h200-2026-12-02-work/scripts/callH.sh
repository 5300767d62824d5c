#!/usr/bin/env bash
# Call H, 2026-12-02, on the H200 host (16 cores): HEAD b74b24b (the CSV
# rows derived by the threads, each with its own WCS) against e84d441's C
# code, both CPU-only, at one thread beside SExtractor with the harness's
# settings and with radio.pipe's detection work (tests/bench/cpu-ab.sh
# SEXWORK="harness radio"); threads.sh round by round, 5 rounds, on the CUDA
# build's CPU backend; the harness with SEP and SExtractor at both works;
# what starting a process costs (/bin/true, skyfind --version of both
# builds). Carry .gpu-bundle.tar.xz (.gpu-bundle: the CUDA build, sm_90,
# skyfind and bench_pipeline; .xb: skyfind_old and skyfind_new, CPU-only,
# Debian's source-extractor with its libraries, SEP 1.4.1 wheels).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callH.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "host"
{ nproc; lscpu | grep -E 'Model name|Thread'; python3 --version
  python3 -c "import numpy; print('numpy', numpy.__version__)"; } 2>&1 | tee -a "$LOG"
python3 -c "import sep" 2>/dev/null ||
    python3 -m pip install -q --no-deps --no-index --find-links .xb/whl sep 2>&1 | tail -2 | tee -a "$LOG"
python3 -c "import sep; print('sep', sep.__version__)" 2>&1 | tee -a "$LOG"
.xb/bin/source-extractor --version 2>&1 | tee -a "$LOG"
say "process start: 50 runs each, ms per run"
for c in /bin/true ".xb/bin/skyfind_new --version" ".gpu-bundle/bin/skyfind --version"; do
    t0=$(date +%s%N); for i in $(seq 50); do $c >/dev/null; done; t1=$(date +%s%N)
    echo "$c: $(((t1 - t0) / 50000)) us" | tee -a "$LOG"
done
say "one thread: old against new, beside SExtractor (harness and radio work)"
PIPES="radio sextractor lesson" SEXWORK="harness radio" SEXTRACTOR=.xb/bin/source-extractor \
    tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callH-cpu-ab-1.md
say "16 cores: old against new, lesson"
THREADS=16 PIPES="lesson radio" tests/bench/cpu-ab.sh .xb/bin/skyfind_old .xb/bin/skyfind_new /tmp/ab16 "8192" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab16/cpu-ab.md $O/callH-cpu-ab-16.md
say "16 cores: threads.sh, round by round, the CUDA build's CPU backend"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callH-threads.csv
say "harness, one thread, SEP and SExtractor at both works"
PATH=$PWD/.xb/bin:$PATH OMP_NUM_THREADS=1 timeout 300 python3 tests/bench/harness.py --build .gpu-bundle/bin \
    --sizes 2048,4096 --peers sep,sextractor --peer-work both --threads 1 --out /tmp/h 2>&1 | tail -45 | tee -a "$LOG"
cp /tmp/h/results.md $O/callH-harness.md 2>/dev/null
say "done"
