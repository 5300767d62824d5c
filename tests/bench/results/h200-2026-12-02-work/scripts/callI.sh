#!/usr/bin/env bash
# Call I, 2026-12-02, on the H200 host: the final code (HEAD after
# 53e5f7d; its C code that of b74b24b). The host's memory speed at 1 and 16
# threads (bw: read, copy and write of 1 GiB arrays already touched, best of
# 5); `skyfind compare` of lesson, sextractor and radio on the real images
# and the simulated 2048, 4096 and 8192 skies; CSV catalogues of both
# backends side by side (a sky and its TAN-SIP copy, radio.pipe); threads.sh
# of sextractor and lesson at 8192^2, 5 rounds. Carry .gpu-bundle.tar.xz
# (.gpu-bundle: the CUDA build, sm_90, and ../shared/data; .xb: bw, the
# CPU-only skyfind_new).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
export SKYFIND_PIPELINES=$PWD/pipelines SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data
LOG=$O/callI.log
say() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)" | tee -a "$LOG"; }
say "memory speed"
OMP_NUM_THREADS=16 OMP_PROC_BIND=spread .xb/bin/bw 2>&1 | tee -a "$LOG"
say "CSV catalogues of both backends (radio.pipe): a 2048^2 sky and its TAN-SIP copy"
S=/tmp/csv; mkdir -p $S
.gpu-bundle/bin/skyfind simulate -q -n 2048 --seed 3 -o $S/sky.fits
python3 - $S/sky.fits $S/sip.fits <<'PY'
import sys
raw = open(sys.argv[1], "rb").read()
cards = []
while not any(c.startswith("END ") for c in cards):
    cards += [raw[i:i + 80].decode("ascii") for i in range(80 * len(cards), 80 * len(cards) + 2880, 80)]
end = next(i for i, c in enumerate(cards) if c.startswith("END "))
fix = {"CTYPE1": "'RA---TAN-SIP'", "CTYPE2": "'DEC--TAN-SIP'"}
for i in range(end):
    k = cards[i][:8].strip()
    if k in fix:
        cards[i] = ("%-8s= %s" % (k, fix[k])).ljust(80)
sip = [("A_ORDER", "2"), ("B_ORDER", "2"), ("A_2_0", "2.0E-5"), ("A_0_2", "-1.0E-5"),
       ("A_1_1", "5.0E-6"), ("B_2_0", "-5.0E-6"), ("B_0_2", "1.5E-5"), ("B_1_1", "1.0E-5")]
cards[end:end + 1 + len(sip)] = [("%-8s= %20s" % kv).ljust(80) for kv in sip] + [cards[end]]
open(sys.argv[2], "wb").write("".join(cards).encode("ascii") + raw[80 * len(cards):])
PY
for b in cpu gpu; do .gpu-bundle/bin/skyfind run -q -b $b --threads 16 -o $S/$b $S/sky.fits $S/sip.fits; done
for f in sky.cat.csv sky.comp.csv sip.cat.csv sip.comp.csv; do
    if diff <(tail -n +2 $S/cpu/$f) <(tail -n +2 $S/gpu/$f) >/dev/null; then r=same; else r=DIFFERENT; fi
    echo "$f: cpu and gpu $r past the first line ($(grep -vc '^#' $S/cpu/$f) lines)" | tee -a "$LOG"
done
say "compare lesson, sextractor, radio"
COMPARE_PIPES="lesson sextractor radio" SIZES="2048 4096 8192" tests/gpu/floor.sh /tmp/fl compare >/dev/null 2>&1
echo "floor.sh rc=$?" | tee -a "$LOG"
grep -E "AGREE|DISAGREE|real images|sim" /tmp/fl/floor.log | tail -20 | tee -a "$LOG"
cp /tmp/fl/floor.log $O/callI-compare.log 2>/dev/null
say "16 cores: threads.sh of sextractor and lesson at 8192^2"
PIPES="sextractor lesson" tests/bench/threads.sh .gpu-bundle/bin/skyfind /tmp/th "8192" 5 >/dev/null 2>&1
echo "threads.sh rc=$?" | tee -a "$LOG"
cat /tmp/th/threads.md | tee -a "$LOG"
cp /tmp/th/threads.csv $O/callI-threads.csv
say "done"
