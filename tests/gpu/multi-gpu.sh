#!/usr/bin/env bash
# Files/s with one GPU and with every GPU on the same batch (a machine of two
# or more GPUs; tests/gpu/run-all.sh multigpu calls it): the default radio
# pipeline on 4096^2 files (bound by reading on the host: the GPUs are idle
# most of the time, so a second one cannot help much), and a compute-bound
# batch of 2048^2 files (a 121x121 non-separable matched filter, direct), where
# the GPUs are the bottleneck, and the same 256 files listed 4 times over
# (1024 images, written by position with --name), a batch long enough that the
# CUDA driver's start (cuInit and the contexts, 0.4-0.6 s on the 2-GPU host:
# tests/bench/bench_startup) no longer hides the scaling. Catalogues of 1 and
# N GPUs must be identical.
# Usage: tests/gpu/multi-gpu.sh OUTDIR
set -u
OUT=${1:?OUTDIR}
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
SF=$B/bin/skyfind
W=/tmp/skyfind-mgpu
mkdir -p "$OUT" "$W/a" "$W/b"
ng=$(nvidia-smi -L | wc -l)
all=$(seq -s, 0 $((ng - 1)))
nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
seq 1 64 | xargs -P 16 -I{} "$SF" simulate -q -n 4096 --seed {} -o "$W/a/img{}.fits"
seq 1 256 | xargs -P 16 -I{} "$SF" simulate -q -n 2048 --seed {} -o "$W/b/img{}.fits"
cat "$W"/a/*.fits "$W"/b/*.fits >/dev/null
heavy="--set convolve.kernel=gauss --set convolve.fwhm=20 --set convolve.fwhm_min=12 --set convolve.pa=30 --set convolve.size=121 --set convolve.method=direct"
fail=0
for r in 1 2 3 4; do ls "$W/b"/*.fits | sort -V; done >"$W/list_c.txt"
for set in a b c; do
    if [ $set = c ]; then files="--name {index}_{stem} @$W/list_c.txt"; else files=$(ls "$W/$set"/*.fits | sort -V); fi
    extra=""; [ $set != a ] && extra=$heavy
    for devs in 0 "$all"; do
        for rep in 1 2; do
            rm -rf "$W/o_${set}_${devs//,/_}"
            "$SF" run -v -b gpu --devices "$devs" $extra --json -o "$W/o_${set}_${devs//,/_}" $files >"$OUT/mg_${set}_${devs//,/_}_$rep.json" 2>"$OUT/mg_${set}_${devs//,/_}_$rep.err"
            python3 - "$set" "$devs" "$OUT/mg_${set}_${devs//,/_}_$rep.json" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[3])]
s = L[-1]["summary"]; per = {}
for d in L[:-1]:
    per[d.get("device")] = per.get(d.get("device"), 0) + 1
steady = (s["ok"] - 1) / ((s["last_done_ms"] - s["first_done_ms"]) / 1e3)
what = {'a': '4096^2 radio', 'b': '2048^2, 121x121 direct filter', 'c': 'set b x4, 1024 images'}[sys.argv[1]]
print(f"set {sys.argv[1]} ({what}) GPUs {sys.argv[2]:<8} {s['ok']:>3} ok {s['failed']} failed "
      f"{s['wall_ms']/1e3:6.2f} s  {s['files_per_s']:7.1f} files/s  steady {steady:7.1f} files/s  busy {100*s['busy']:5.1f}%  images per GPU {per}")
PY
        done
    done
    a=$W/o_${set}_0; b=$W/o_${set}_${all//,/_}
    n=0; d=0
    for f in "$a"/*.cat.csv; do n=$((n + 1)); tail -n +2 "$f" | cmp -s - <(tail -n +2 "$b/$(basename "$f")") || d=$((d + 1)); done
    echo "set $set: $n catalogues, $d differ between 1 GPU and GPUs $all"
    [ $d = 0 ] || fail=1
done
rm -rf "$W"
exit $fail
