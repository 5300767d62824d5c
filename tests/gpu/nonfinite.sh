#!/usr/bin/env bash
# Non-finite and float-limit pixels on both backends (issue 16), on a GPU
# machine: the images of tests/cli/test_hostile.sh (a 3x3 island of +Inf in
# noise, noise of rms 1e38 where some pixels overflow to +-Inf, a source of
# 3.3e38 on a background of -1e38) plus a 512^2 simulated sky with +Inf, -Inf
# and NaN pixels put on sources, written with numpy alone (no astropy there).
# For the lesson, radio and sextractor pipelines: `skyfind compare` agrees,
# the CPU and GPU catalogues are identical after their first line, and no
# catalogue cell is NaN or Inf (but flux_jy and flux_jy_err, NaN by definition
# in these headers without a beam). Prints "N passed, M failed".
set -u
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
SF=$B/bin/skyfind
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$SF" simulate -q -n 512 --seed 7 -o "$T/sim.fits"
python3 - "$T" <<'PY' || exit 1
import sys, numpy as np
T = sys.argv[1]
def write(name, a):
    a = np.asarray(a, '>f4')
    cards = ['SIMPLE  =                    T', 'BITPIX  =                  -32', 'NAXIS   =                    2',
             'NAXIS1  = %20d' % a.shape[1], 'NAXIS2  = %20d' % a.shape[0], 'END']
    h = ''.join(c.ljust(80) for c in cards).encode()
    h += b' ' * (-len(h) % 2880)
    d = a.tobytes()
    open(f'{T}/{name}', 'wb').write(h + d + b'\0' * (-len(d) % 2880))
rng = np.random.default_rng(16)
a = rng.normal(0, 1, (128, 128)).astype(np.float32)
a[60:63, 60:63] = np.inf
write('inf_island.fits', a)
with np.errstate(over='ignore'):
    b = (rng.normal(0, 1, (128, 128)) * 1e38).astype(np.float32)
assert np.isinf(b).any()
write('huge_noise.fits', b)
c = (rng.normal(0, 1, (64, 64)) * 1e36 - 1e38).astype(np.float32)
c[30:33, 30:33] = 3.3e38
write('extreme.fits', c)
# the simulated sky (one HDU, BITPIX -32, data after the first header)
raw = open(f'{T}/sim.fits', 'rb').read()
end = 0
while True:
    blk = raw[end:end + 2880]; end += 2880
    if any(blk[i:i + 8] == b'END     ' for i in range(0, 2880, 80)): break
s = np.frombuffer(raw[end:end + 512 * 512 * 4], '>f4').reshape(512, 512).astype(np.float32)
ys, xs = np.unravel_index(np.argsort(s, axis=None)[-40:], s.shape)   # on the brightest pixels
for k, (y, x) in enumerate(zip(ys, xs)):
    s[y, x] = (np.inf, -np.inf, np.nan)[k % 3]
s[100:103, 200:203] = np.inf
write('sim_nonfinite.fits', s)
PY
pass=0 fail=0
for f in inf_island huge_noise extreme sim_nonfinite; do
    for p in lesson radio sextractor; do
        "$SF" compare -q -p $p "$T/$f.fits" >"$T/cmp.txt" 2>&1; rc=$?
        [ $rc = 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: compare $f $p: exit $rc"; cat "$T/cmp.txt"; }
        "$SF" run -q -b cpu -p $p -o "$T/cpu_$p" "$T/$f.fits"; rc1=$?
        "$SF" run -q -b gpu -p $p -o "$T/gpu_$p" "$T/$f.fits"; rc2=$?
        c=$T/cpu_$p/$f.cat.csv g=$T/gpu_$p/$f.cat.csv
        rows=$(grep -vc '^#' "$c" 2>/dev/null)
        if [ $rc1 = 0 ] && [ $rc2 = 0 ] && tail -n +2 "$c" | cmp -s - <(tail -n +2 "$g") &&
           awk -F, '/^#/ { next } !h { for (i = 1; i <= NF; i++) jy[i] = $i ~ /^flux_jy/; h = 1; next }
                    { for (i = 1; i <= NF; i++) if (!jy[i] && tolower($i) ~ /nan|inf/) bad = 1 } END { exit bad }' "$c"; then
            pass=$((pass + 1)); echo "ok   $f $p: CPU and GPU catalogues identical, finite, $((rows - 1)) rows"
        else
            fail=$((fail + 1)); echo "FAIL: $f $p: exits $rc1/$rc2"; diff <(tail -n +2 "$c") <(tail -n +2 "$g") | head -5
        fi
    done
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
