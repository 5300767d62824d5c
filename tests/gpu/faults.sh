#!/usr/bin/env bash
# GPU faults on a GPU machine (tests/gpu/run-all.sh batch calls it): a file
# too large for the device memory allowed (SKYFIND_GPU_MEMLIMIT) fails alone
# with a clear message under -b gpu, and runs on the CPU twin under -b auto;
# a sticky CUDA error (SKYFIND_GPU_FAULT) takes that GPU out of use and the
# batch goes on (on the CPU twins under -b auto);
# then the same for real, with the card's memory held by another process.
# Prints "N passed, M failed".
set -u
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
SF=$B/bin/skyfind
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
"$SF" simulate -q -n 256 --seed 1 -o "$T/small.fits"
"$SF" simulate -q -n 2048 --seed 2 -o "$T/big.fits"
"$SF" simulate -q -n 256 --seed 3 -o "$T/small2.fits"
# 40 MB: the 256^2 images fit, the 2048^2 one (16 MB image + maps + scratch) does not
SKYFIND_GPU_MEMLIMIT=40M "$SF" run -b gpu -o "$T/g" "$T/small.fits" "$T/big.fits" "$T/small2.fits" 2>"$T/err"; rc=$?
cat "$T/err"
[ $rc = 1 ] && grep -q "big.fits: .*out of GPU memory" "$T/err" && [ -s "$T/g/small.cat.csv" ] && [ -s "$T/g/small2.cat.csv" ] &&
    [ ! -e "$T/g/big.cat.csv" ] && ok || bad "-b gpu with a file too large: exit $rc"
SKYFIND_GPU_MEMLIMIT=40M "$SF" run -b auto -o "$T/a" "$T/small.fits" "$T/big.fits" "$T/small2.fits" 2>"$T/err"; rc=$?
cat "$T/err"
[ $rc = 0 ] && grep -q "big.fits: ran on the CPU" "$T/err" && [ -s "$T/a/big.cat.csv" ] && ok || bad "-b auto fallback: exit $rc"
"$SF" run -q -b cpu -o "$T/c" "$T/big.fits"
tail -n +2 "$T/c/big.cat.csv" | cmp -s - <(tail -n +2 "$T/a/big.cat.csv") && ok || bad "fallback catalogue differs from a CPU run's"
# a sticky CUDA error (an illegal address, forced in the 3rd decode): that
# GPU is taken out of use; under -b auto the image and those after it run on
# the CPU twins, all equal to a CPU run's; under -b gpu they fail, the two
# done before stay complete, exit status 1
for i in 1 2 3 4 5 6; do "$SF" simulate -q -n 300 --seed $((10 + i)) -o "$T/f$i.fits"; done
"$SF" run -q -b cpu -o "$T/cpu6" "$T"/f?.fits
same6() { local n=0; for i in 1 2 3 4 5 6; do tail -n +2 "$1/f$i.cat.csv" 2>/dev/null | cmp -s - <(tail -n +2 "$T/cpu6/f$i.cat.csv") && n=$((n + 1)); done; echo $n; }
for mode in "" "--no-overlap"; do
    SKYFIND_GPU_FAULT=3 "$SF" run -b auto $mode -o "$T/sticky$mode" "$T"/f?.fits 2>"$T/err"; rc=$?
    grep -v '^  ' "$T/err" | tail -4
    n=$(same6 "$T/sticky$mode")
    [ $rc = 0 ] && grep -q "out of use after a sticky CUDA error" "$T/err" && [ "$n" = 6 ] && ok ||
        bad "sticky error, -b auto $mode: exit $rc, $n of 6 catalogues equal the CPU's"
done
SKYFIND_GPU_FAULT=3 "$SF" run -b gpu -o "$T/stickyg" "$T"/f?.fits 2>"$T/err"; rc=$?
grep -v '^  ' "$T/err" | tail -3
# the readers decode in parallel, so the two images decoded before the fault
# are not always f1 and f2: exactly two catalogues, each equal to the CPU's
n=$(same6 "$T/stickyg"); k=$(ls "$T/stickyg"/*.cat.csv 2>/dev/null | wc -l)
[ $rc = 1 ] && [ "$n" = 2 ] && [ "$k" = 2 ] && grep -q "out of use" "$T/err" && ok ||
    bad "sticky error, -b gpu: exit $rc, $k catalogues written, $n equal to the CPU's"
# a card that really runs out: another process (CuPy) holds all but
# FAULT_KEEP_MB of the device memory; an 8192^2 image then cannot have its
# buffers and fails alone with the message under -b gpu (lesson.pipe, and
# radio.pipe with the FFT convolution), or runs on the CPU twin under -b auto
# (lesson.pipe); the small images beside it run on the GPU
if python3 -c 'import cupy' 2>/dev/null; then
    "$SF" simulate -q -n 8192 --seed 4 -o "$T/huge.fits"
    python3 - "$T/hold" "${FAULT_KEEP_MB:-700}" <<'PY' &
import sys, time, cupy as cp
free, total = cp.cuda.runtime.memGetInfo()
keep = int(sys.argv[2]) << 20
a = cp.cuda.runtime.malloc(max(free - keep, 0))
free2, _ = cp.cuda.runtime.memGetInfo()
open(sys.argv[1], 'w').write(f'{free2 >> 20} MB free of {total >> 20} MB\n')
time.sleep(120)
PY
    holder=$!
    for i in $(seq 100); do [ -s "$T/hold" ] && break; sleep 0.1; done
    echo "real out of memory: another process holds the card, $(cat "$T/hold" 2>/dev/null)"
    for p in lesson "radio --set convolve.method=fft"; do
        tag=${p%% *}
        "$SF" run -b gpu -p $p -o "$T/r_$tag" "$T/small.fits" "$T/huge.fits" "$T/small2.fits" 2>"$T/err"; rc=$?
        grep -v '^  ' "$T/err" | tail -3
        [ $rc = 1 ] && grep -q "huge.fits: .*out of GPU memory" "$T/err" && [ -s "$T/r_$tag/small.cat.csv" ] &&
            [ -s "$T/r_$tag/small2.cat.csv" ] && [ ! -e "$T/r_$tag/huge.cat.csv" ] && ok ||
            bad "real out of memory, $tag, -b gpu: exit $rc"
        [ $tag = lesson ] || continue
        "$SF" run -b auto -p $p -o "$T/ra_$tag" "$T/small.fits" "$T/huge.fits" "$T/small2.fits" 2>"$T/err"; rc=$?
        grep -v '^  ' "$T/err" | tail -2
        [ $rc = 0 ] && grep -q "huge.fits: ran on the CPU: out of GPU memory" "$T/err" && [ -s "$T/ra_$tag/huge.cat.csv" ] &&
            ! grep -q "out of use" "$T/err" && ok || bad "real out of memory, $tag, -b auto: exit $rc"
    done
    kill $holder 2>/dev/null; wait $holder 2>/dev/null
    "$SF" run -q -b cpu -p lesson -o "$T/rc" "$T/huge.fits"
    tail -n +2 "$T/rc/huge.cat.csv" | cmp -s - <(tail -n +2 "$T/ra_lesson/huge.cat.csv") && ok ||
        bad "real out of memory: the CPU twin's catalogue differs from a CPU run's"
else
    echo "SKIP: real out of memory (no CuPy to hold the card's memory)"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
