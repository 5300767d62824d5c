#!/usr/bin/env bash
# Call B: is the CUDA build's CPU backend slower than the CPU-only build's
# on the GPU host (call A: radio.pipe's stages 25-35% longer in threads.sh
# and the harness than in cpu-ab.sh)? The same file, one thread, alternated;
# with and without OMP_NUM_THREADS; the BANE phases (SKYFIND_BANE_PROFILE).
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .xb/env.sh
. .gpu-bundle/env.sh
LOG=$O/callB.log
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag | tee -a $LOG
S=.gpu-bundle/bin/skyfind
$S simulate -q -n 4096 --seed 11 -o /tmp/s4096.fits; cat /tmp/s4096.fits > /dev/null
one() { # label, env..., binary
    local label=$1; shift
    /usr/bin/time -f "%e s %M KB %R faults" env "$@" run -q -b cpu --threads 1 --json -o /tmp/o /tmp/s4096.fits 2>/tmp/err >/tmp/j.json
    python3 - "$label" /tmp/j.json /tmp/err <<'PY' | tee -a $LOG
import json, sys
label, f, e = sys.argv[1:]
for l in open(f):
    d = json.loads(l)
    if "stages" in d:
        st = " ".join("%s=%.0f" % (s["name"][:4], s["ms"]) for s in d["stages"])
        ph = d["phases"]
print("%-26s %s read=%.0f dec=%.0f wr=%.0f | %s" % (label, st, ph["read_ms"], ph["decode_ms"], ph["write_ms"],
      " ".join(x.strip() for x in open(e) if "profile" in x or "faults" in x).replace("bane profile: 1 threads, 4096x4096, 58564 nodes: ", "")))
PY
}
for r in 1 2 3 4; do
    one cuda-build SKYFIND_BANE_PROFILE=1 OMP_NUM_THREADS=1 $S
    one cpu-build SKYFIND_BANE_PROFILE=1 OMP_NUM_THREADS=1 .xb/bin/skyfind_new
    one cuda-build-no-omp-env SKYFIND_BANE_PROFILE=1 $S
    one cuda-build-CUDA_VISIBLE= SKYFIND_BANE_PROFILE=1 OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES= $S
done
