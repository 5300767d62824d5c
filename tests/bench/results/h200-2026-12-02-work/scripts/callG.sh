#!/usr/bin/env bash
# Call G, 2026-12-02, on the H200 host (16 cores): HEAD 479d4ad (the C code
# of e84d441). One thread: the three pipelines beside SExtractor with the
# harness's settings and with radio.pipe's detection work (beam filter,
# 32-level deblending; tests/bench/cpu-ab.sh SEXWORK="harness radio"), and
# the harness with SEP and SExtractor at both (--peer-work both); 16 cores:
# threads.sh, now round by round, 5 rounds. Carry .gpu-bundle.tar.xz
# (.gpu-bundle: the CUDA build, sm_90, skyfind and bench_pipeline; .xb: the
# CPU-only build, Debian's source-extractor with its libraries, SEP 1.4.1
# wheels for CPython 3.10-3.13).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines
LOG=$O/callG.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "host"
{ nproc; nvidia-smi -L; lscpu | grep -E 'Model name|MHz|Thread'; python3 --version
  python3 -c "import numpy; print('numpy', numpy.__version__)"; } 2>&1 | tee -a "$LOG"
python3 -c "import sep" 2>/dev/null || pip install -q --no-index --find-links .xb/whl sep 2>&1 | tail -2 | tee -a "$LOG"
python3 -c "import sep; print('sep', sep.__version__)" 2>&1 | tee -a "$LOG"
say "one thread: the three pipelines beside SExtractor (harness and radio work)"
PIPES="radio sextractor lesson" SEXWORK="harness radio" SEXTRACTOR=.xb/bin/source-extractor \
    tests/bench/cpu-ab.sh .xb/bin/skyfind .xb/bin/skyfind /tmp/ab1 "2048 4096" 5 2>&1 | tee -a "$LOG"
cp /tmp/ab1/cpu-ab.md $O/callG-cpu-ab-1.md
say "16 cores: threads.sh, round by round, the CUDA build's CPU backend"
PIPES="radio sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "4096 8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callG-threads.csv
say "harness, one thread, SEP and SExtractor at both works"
PATH=$PWD/.xb/bin:$PATH OMP_NUM_THREADS=1 timeout 240 python3 tests/bench/harness.py --build .gpu-bundle/bin \
    --sizes 2048,4096 --peers sep,sextractor --peer-work both --threads 1 --out /tmp/h 2>&1 | tail -45 | tee -a "$LOG"
cp /tmp/h/results.md $O/callG-harness.md 2>/dev/null
say "done"
