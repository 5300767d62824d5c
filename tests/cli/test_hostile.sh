#!/usr/bin/env bash
# Hostile input (issue 16): every case gives a one-line message naming the
# file and the problem and a sensible exit status (1 runtime failure, 2 usage),
# never a signal, a hang or a memory bomb. The files are made here, in a
# temporary folder; the four crash reproducers of ../shared/data/fuzz/ are
# read where they are. Prints a table (case, exit status, message) and exits
# non-zero on any mismatch. tests/cli/HOSTILE.md documents the same table.
set -u
SKYFIND=${SKYFIND:-build/skyfind}
DATA=${SKYFIND_TEST_DATA:-../shared/data}
PY=/usr/bin/python3
T=$(mktemp -d)
cleanup() { [ -n "${MNT:-}" ] && umount "$MNT" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
pass=0 fail=0 skip=0 xf=0
ROWS=()

# case NAME CODE PATTERN cmd... : run cmd under a 60 s timeout and a 4 GB
# address-space limit (a memory bomb fails fast instead of taking the
# machine); exit status must be CODE and the output must match the
# extended regex PATTERN (empty: anything).
# A sanitizer build (its shadow memory) cannot start under the limit: then
# only the timeout guards, and ASan's own allocation limit.
LIMIT_KB=4000000
(ulimit -v $LIMIT_KB; exec "$SKYFIND" --version) >/dev/null 2>&1 || LIMIT_KB=unlimited
case_() {
    local name=$1 code=$2 want=$3; shift 3
    (ulimit -v $LIMIT_KB; exec timeout -k 5 60 "$@") >"$T/out" 2>"$T/err" </dev/null
    local rc=$? msg
    msg=$(grep -v -e '^skyfind: no CUDA device' -e '^  ' -e 'images\? ok, ' -e '^skyfind: summed' "$T/err" | head -1)
    [ -n "$want" ] && grep -qhE -- "$want" "$T/err" "$T/out" && msg=$(grep -hE -- "$want" "$T/err" "$T/out" | head -1)
    [ -z "$msg" ] && msg=$(head -1 "$T/out")
    msg=${msg//"$T"/\$T}
    if [ "$rc" != "$code" ]; then
        fail=$((fail + 1)); ROWS+=("FAIL | $name | $rc (wanted $code) | $msg")
    elif [ -n "$want" ] && ! grep -qE -- "$want" "$T/err" "$T/out"; then
        fail=$((fail + 1)); ROWS+=("FAIL | $name | $rc | $msg (wanted /$want/)")
    else
        pass=$((pass + 1)); ROWS+=("ok   | $name | $rc | $msg")
    fi
}
skip_() { skip=$((skip + 1)); ROWS+=("skip | $1 | - | $2"); }
# xfail_: as case_, for a known bug: passing is an XPASS (a failure: update the case)
xfail_() {
    local f0=$fail p0=$pass
    case_ "$@"
    if [ "$pass" != "$p0" ]; then
        pass=$p0; fail=$((fail + 1)); ROWS[-1]="XPASS${ROWS[-1]#ok  }"
    else
        fail=$f0; xf=$((xf + 1)); ROWS[-1]="xfail${ROWS[-1]#FAIL}"
    fi
}

RUN=("$SKYFIND" run -q -b cpu -o "$T/o")

# ---- the files -----------------------------------------------------------------
"$PY" - "$T" <<'EOF' || { echo "cannot make the test files"; exit 1; }
import sys, gzip, numpy as np
from astropy.io import fits
T = sys.argv[1]
rng = np.random.default_rng(16)

def raw(name, cards, data=b''):
    """A file from header cards as written (no checks) and raw data bytes."""
    h = ''.join(c.ljust(80)[:80] for c in cards + ['END'])
    h = h.ljust((len(h) + 2879) // 2880 * 2880).encode('latin1')
    d = data + b'\0' * ((-len(data)) % 2880)
    open(f'{T}/{name}', 'wb').write(h + d)

def img(bitpix, nx, ny, extra=(), naxes=None):
    naxes = naxes or [nx, ny]
    c = ['SIMPLE  =                    T', f'BITPIX  = {bitpix:20d}', f'NAXIS   = {len(naxes):20d}']
    c += [f'NAXIS{k+1:<3d}= {n:20d}' for k, n in enumerate(naxes)]
    return c + list(extra)

noise = rng.normal(0, 1, (64, 64)).astype('>f4')
fits.PrimaryHDU(noise.astype(np.float32)).writeto(f'{T}/good.fits')
good = open(f'{T}/good.fits', 'rb').read()
open(f'{T}/truncated.fits', 'wb').write(good[:2880 + 5000])
open(f'{T}/empty.fits', 'wb').close()
open(f'{T}/notfits.fits', 'w').write('this is not a FITS file\n' * 200)
raw('naxis2zero.fits', img(-32, 64, 0))
raw('naxis6.fits', img(-32, 0, 0, naxes=[100000, 100000, 1000, 1000, 1000, 1000]))
raw('bitpix17.fits', img(17, 64, 64), b'\0' * 64 * 64 * 3)
i16 = (rng.normal(0, 100, (64, 64))).astype('>i2').tobytes()
raw('bscale_nan.fits', img(16, 64, 64, ['BSCALE  =                  NAN']), i16)
raw('bscale_zero.fits', img(16, 64, 64, ['BSCALE  =                  0.0']), i16)
raw('blank_float.fits', img(-32, 64, 64, ['BLANK   =                   -1']), noise.tobytes())
open(f'{T}/corrupt.fits.gz', 'wb').write(gzip.compress(good)[:3000] + b'\x55' * 500)
hdu = fits.CompImageHDU((noise * 100).astype(np.int16), compression_type='RICE_1', tile_shape=(8, 64))
fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(f'{T}/tile.fits')
t = bytearray(open(f'{T}/tile.fits', 'rb').read())
heap = len(t) - 2880 + 100           # inside the last data block: the heap
for k in range(heap - 1500, heap - 1200):
    t[k] ^= 0x5a
open(f'{T}/tile_corrupt.fits', 'wb').write(bytes(t))
# HCOMPRESS: the stream of tile 1 claims 100000 x 100000 pixels (CFITSIO: SIGSEGV)
import struct
hdu = fits.CompImageHDU((noise * 100).astype(np.int16), compression_type='HCOMPRESS_1', tile_shape=(16, 64))
fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(f'{T}/hc.fits')
h = bytearray(open(f'{T}/hc.fits', 'rb').read())
tab = (h.find(b'END     ', 2880) // 2880 + 1) * 2880      # the table of HDU 2
n0, o0 = struct.unpack('>ii', h[tab:tab + 8])
s0 = tab + 4 * 8 + o0                                   # 4 rows of one descriptor
assert h[s0:s0 + 2] == b'\xdd\x99'
h[s0 + 2:s0 + 10] = struct.pack('>ii', 100000, 100000)
open(f'{T}/hc_bomb.fits', 'wb').write(bytes(h))
# HCOMPRESS: ZNAXIS2 48 -> 41, so the last tile has 9 rows but its stream 16 (heap overflow)
hdu = fits.CompImageHDU((noise[:48, :40] * 100).astype(np.int16), compression_type='HCOMPRESS_1', tile_shape=(16, 40))
fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(f'{T}/hc48.fits')
h = bytearray(open(f'{T}/hc48.fits', 'rb').read())
k = h.find(b'ZNAXIS2 =', 2880)
h[k:k + 80] = b'ZNAXIS2 =                   41 / length of original image axis'.ljust(80)
open(f'{T}/hc_edge.fits', 'wb').write(bytes(h))
# ZTILE2 that is not an integer, END card with junk after it (CFITSIO: SIGFPE)
h = bytearray(open(f'{T}/hc.fits', 'rb').read())
for key, val in ((b'ZTILE2  =', b'ZTILE2  =    F              16'), (b'END     ', b'END                  `')):
    k = h.find(key, 2880)
    h[k:k + 80] = val.ljust(80)
open(f'{T}/ztile_junk.fits', 'wb').write(bytes(h))
# RICE BLOCKSIZE 0 (CFITSIO: SIGFPE); a byte above 0x7e in TFORM1 (CFITSIO: abort)
h = bytearray(open(f'{T}/tile.fits', 'rb').read())
k = h.find(b'ZVAL1   =', 2880)
assert h.find(b"'BLOCKSIZE'", 2880) > 0
h[k:k + 80] = b'ZVAL1   =                    0 / pixels per block'.ljust(80)
open(f'{T}/blocksize0.fits', 'wb').write(bytes(h))
h = bytearray(open(f'{T}/tile.fits', 'rb').read())
for key in (b'ZNAME2  =', b'ZVAL2   ='):                  # BYTEPIX gone: CFITSIO takes 4
    k = h.find(key, 2880)
    h[k:k + 80] = b'COMMENT removed'.ljust(80)
open(f'{T}/nobytepix.fits', 'wb').write(bytes(h))
h = bytearray(open(f'{T}/tile.fits', 'rb').read())
k = h.find(b"TFORM1  = '1PB(", 2880)
h[k + 14] = 0xf6
open(f'{T}/tform_byte.fits', 'wb').write(bytes(h))
# RICE floats: a tile that cannot be quantised (+Inf) is kept with GZIP in the
# GZIP_COMPRESSED_DATA column; its stream cut short makes CFITSIO realloc without end
g = rng.normal(0, 1, (64, 64)).astype(np.float32)
g[:16, :] = np.inf
fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(g, compression_type='RICE_1', tile_shape=(16, 64))]).writeto(f'{T}/gzcol.fits')
h = bytearray(open(f'{T}/gzcol.fits', 'rb').read())
tab = (h.find(b'END     ', 2880) // 2880 + 1) * 2880
assert h.find(b"'GZIP_COMPRESSED_DATA'", 2880) > 0
n1, o1 = struct.unpack('>ii', h[tab + 8:tab + 16])     # row 1, second column
h[tab + 8:tab + 12] = struct.pack('>i', n1 - 12)
open(f'{T}/gzcol_bomb.fits', 'wb').write(bytes(h))
raw('bomb.fits', img(-32, 2000000, 2000000), b'\0' * 2000)
open(f'{T}/bomb.fits.gz', 'wb').write(gzip.compress(open(f'{T}/bomb.fits', 'rb').read()))
fits.PrimaryHDU(np.full((64, 64), np.nan, np.float32)).writeto(f'{T}/allnan.fits')
fits.PrimaryHDU(np.ones((1, 1), np.float32)).writeto(f'{T}/one.fits')
fits.PrimaryHDU(noise.astype(np.float32)).writeto(f'{T}/with space é.fits')
fits.PrimaryHDU(np.ones((101, 101), np.float32)).writeto(f'{T}/bigpsf.fits')
open(f'{T}/ragged.conv', 'w').write('CONV NORM\n1 2 1\n2 4\n1 2 1\n')
# +-Inf: a 3x3 island of +Inf in noise, and noise of rms 1e38 where a few overflow
a = rng.normal(0, 1, (128, 128)).astype(np.float32)
a[60:63, 60:63] = np.inf
fits.PrimaryHDU(a).writeto(f'{T}/inf_island.fits')
with np.errstate(over='ignore'):
    b = (rng.normal(0, 1, (128, 128)) * 1e38).astype(np.float32)
assert np.isinf(b).any()
fits.PrimaryHDU(b).writeto(f'{T}/huge_noise.fits')
# a source of 3.3e38 over a background of -1e38: v - bkg overflows float
c = (rng.normal(0, 1, (64, 64)) * 1e36 - 1e38).astype(np.float32)
c[30:33, 30:33] = 3.3e38
fits.PrimaryHDU(c).writeto(f'{T}/extreme.fits')
EOF

# ---- the table -----------------------------------------------------------------
F=$DATA/fuzz
case_ "truncated file"            1 "truncated\.fits: file is truncated"   "${RUN[@]}" "$T/truncated.fits"
case_ "empty file"                1 "empty\.fits: file is empty"           "${RUN[@]}" "$T/empty.fits"
case_ "not a FITS file"           1 "notfits\.fits: .*not a FITS file"     "${RUN[@]}" "$T/notfits.fits"
case_ "directory"                 1 ": is a directory, not a FITS file"   "${RUN[@]}" "$T"
mkfifo "$T/fifo.fits"
case_ "FIFO (must not block)"     1 "fifo\.fits: is a FIFO"                "${RUN[@]}" "$T/fifo.fits"
case_ "character device"          1 "/dev/null: is a character device"     "${RUN[@]}" /dev/null
case_ "'-' (paths on stdin), none" 2 "the lists of inputs name no file"                             "${RUN[@]}" -
case_ "NAXIS2 = 0"                1 "naxis2zero\.fits: .*NAXIS2=0"         "${RUN[@]}" "$T/naxis2zero.fits"
case_ "NAXIS=6, long axes"        1 "naxis6\.fits: .*declares 100000 x 100000 x 1000"  "${RUN[@]}" "$T/naxis6.fits"
case_ "BITPIX = 17"               1 "bitpix17\.fits: .*BITPIX"             "${RUN[@]}" "$T/bitpix17.fits"
case_ "BSCALE = NaN"              1 "bscale_nan\.fits: HDU 1: BSCALE = NAN cannot scale"           "${RUN[@]}" "$T/bscale_nan.fits"
case_ "BSCALE = 0"                1 "bscale_zero\.fits: HDU 1: BSCALE = 0\.0 cannot scale"          "${RUN[@]}" "$T/bscale_zero.fits"
case_ "BLANK on a float image"    0 ""                                     "${RUN[@]}" "$T/blank_float.fits"
case_ "gzip'd, corrupt stream"    1 "corrupt\.fits\.gz: "                  "${RUN[@]}" "$T/corrupt.fits.gz"
case_ "tile-compressed, corrupt tile" 1 "tile_corrupt\.fits: HDU 2: tile [0-9]+ of the tile-compressed image is corrupt \(its RICE_1 stream ends" "${RUN[@]}" "$T/tile_corrupt.fits"
case_ "HCOMPRESS tile claiming 1e5^2 px" 1 "hc_bomb\.fits: HDU 2: tile 1 .* corrupt \(its HCOMPRESS stream says 100000 x 100000 pixels" "${RUN[@]}" "$T/hc_bomb.fits"
case_ "HCOMPRESS edge tile, stream too big" 1 "hc_edge\.fits: HDU 2: tile 3 .* corrupt \(its HCOMPRESS stream says 16 x 40 pixels, the tile has 360\)" "${RUN[@]}" "$T/hc_edge.fits"
case_ "ZTILE2 = 'F 16', junk after END" 1 "ztile_junk\.fits: HDU 2: .*ZTILE2 = F +16 \(must be an integer" "${RUN[@]}" "$T/ztile_junk.fits"
case_ "RICE BLOCKSIZE (ZVAL1) = 0" 1 "blocksize0\.fits: HDU 2: .*ZVAL1 = 0 for BLOCKSIZE" "${RUN[@]}" "$T/blocksize0.fits"
case_ "RICE int16 without BYTEPIX (read as 4)" 1 "nobytepix\.fits: HDU 2: tile [0-9]+ .* corrupt \(its RICE_1 stream ends" "${RUN[@]}" "$T/nobytepix.fits"
case_ "byte 0xf6 in TFORM1"       1 "tform_byte\.fits: HDU 2: the TFORM1 card is malformed" "${RUN[@]}" "$T/tform_byte.fits"
case_ "GZIP_COMPRESSED_DATA tile cut short" 1 "gzcol_bomb\.fits: HDU 2: tile 1 .* corrupt \(its GZIP stream does not end" "${RUN[@]}" "$T/gzcol_bomb.fits"
cp "$T/good.fits" "$T/unreadable.fits"; chmod 000 "$T/unreadable.fits"
if [ "$(id -u)" = 0 ]; then skip_ "unreadable file" "root reads any file"
else case_ "unreadable file"      1 "unreadable\.fits: .*permission denied" "${RUN[@]}" "$T/unreadable.fits"; fi
case_ "name with space and é"     0 ""                                     "${RUN[@]}" "$T/with space é.fits"
case_ "  (its catalogue)"         0 ""                                     test -s "$T/o/with space é.cat.csv"
case_ ".conv with ragged rows"    1 "ragged\.conv.*(row|column)"           "${RUN[@]}" --set convolve.kernel=file --set convolve.file="$T/ragged.conv" "$T/good.fits"
case_ "FITS PSF larger than the image" 0 "" "${RUN[@]}" --set convolve.kernel=file --set convolve.file="$T/bigpsf.fits" "$T/good.fits"
case_ "  (its catalogue)"         0 "" test -s "$T/o/good.cat.csv"
touch "$T/afile"
case_ "output folder is a file"   1 "afile: cannot create or write the output folder: Not a directory" "$SKYFIND" run -q -b cpu -o "$T/afile" "$T/good.fits"
case_ "5 kB file claiming 2e6^2 px" 1 "bomb\.fits: .*declares 2000000 x 2000000 pixels \(1\.6e\+04 GB\) but the file holds only 5760 bytes" "${RUN[@]}" "$T/bomb.fits"
# (about 1 run in 5 of this script on a loaded 2-core machine, and never in
# hundreds of runs of the same command alone, CFITSIO reports this gzip'd
# file as "truncated or corrupt (CFITSIO status 107)" instead of reaching
# the probe that names the declared size; once, in the AddressSanitizer
# build of a fresh clone's .ci/run (2026-12-02), as "not a FITS file
# (CFITSIO status 252: 1st key not SIMPLE or XTENSION)", which 100 runs
# of the same command, four side by side, did not repeat. Not understood
# yet: every one of these messages names the file and fails it, with no
# output written, which is what this case guards)
case_ "  the same gzip'd (.fits.gz)" 1 "bomb\.fits\.gz: (.*declares 2000000 x 2000000 pixels per plane \(1\.6e\+04 GB in all\) but its data end|file is truncated or corrupt \(CFITSIO status 107|not a FITS file \(CFITSIO status 252)" "${RUN[@]}" "$T/bomb.fits.gz"
case_ "  (no catalogue of it)"     0 "" test ! -e "$T/o/bomb.cat.csv"
case_ "all NaN"                   1 "allnan\.fits: stage background .*no finite pixels"                                     "${RUN[@]}" "$T/allnan.fits"
case_ "1x1"                       0 ""                                     "${RUN[@]}" "$T/one.fits"
case_ "3x3 island of +Inf"        0 ""                                     "${RUN[@]}" "$T/inf_island.fits"
case_ "  (Inf counted as blank)"  0 "^nan: 9 of 16384"                     "$SKYFIND" info "$T/inf_island.fits"
case_ "source of 3.3e38 on a background of -1e38" 0 ""                   "${RUN[@]}" "$T/extreme.fits"
case_ "  (finite row, npix 9)"    0 ""                                     grep -qE '^1,32,32,9,[0-9.e+]+,3\.40282346639e\+38,' "$T/o/extreme.cat.csv"
case_ "noise rms 1e38, overflows" 0 ""                                     "${RUN[@]}" "$T/huge_noise.fits"
# the mesh histogram's origin and bin width are clamped to +-FLT_MAX
# (src/calc/background_mesh.h sf_bkg_quantise, shared with the GPU): the
# background is finite, its rms about 1e38, and no row of NaN is written
case_ "  (no NaN/Inf row)"        1 ""                                     grep -qiE '(^|,)-?(nan|inf)(,|$)' "$T/o/huge_noise.cat.csv"
case_ "  (finite background, rms ~1e38)" 0 "median rms (9\.[5-9][0-9]*e\+37|1\.0[0-4][0-9]*e\+38)" "$SKYFIND" run -b cpu -o "$T/o" "$T/huge_noise.fits"
case_ "fuzz: wcspih SPECSYS quote" 0 ""                                    "${RUN[@]}" "$F/wcspih_abort_specsys.fits"
case_ "  (card dropped, noted)"   0 "^bad_cards: 1 "                       "$SKYFIND" info "$F/wcspih_abort_specsys.fits"
case_ "fuzz: wcspih CTYPE1 control byte" 0 ""                              "${RUN[@]}" "$F/wcspih_abort_ctype.fits"
case_ "  (cards dropped, noted)"  0 "^bad_cards: 3 "                       "$SKYFIND" info "$F/wcspih_abort_ctype.fits"
case_ "fuzz: ZTILE1 = 0 (SIGFPE)" 1 "cfitsio_sigfpe_ztile0\.fits\.fz: HDU 2: .*ZTILE1 = 0" "${RUN[@]}" "$F/cfitsio_sigfpe_ztile0.fits.fz"
case_ "fuzz: gzip tile bomb"      1 "cfitsio_gzip_tile_bomb\.fits\.fz: HDU 2: tile 1 .* is corrupt" "${RUN[@]}" "$F/cfitsio_gzip_tile_bomb.fits.fz"
# a full file system: a 1 MB tmpfs (root only)
MNT=
if [ "$(id -u)" = 0 ] && mkdir -p "$T/full" && mount -t tmpfs -o size=1m tmpfs "$T/full" 2>/dev/null; then
    MNT=$T/full
    dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null
    case_ "output folder on a full disk" 1 "(No space left|cannot write|cannot create)" "$SKYFIND" run -q -b cpu --save all -o "$MNT" "$T/good.fits"
    case_ "  (no partial final file)" 0 "" bash -c "! ls '$MNT' | grep -v -e '^filler\$' -e '^\.skyfind\$' | grep ."
else
    skip_ "output folder on a full disk" "needs root and tmpfs mounts"
fi

# ---- SIGKILL at random points: no final name ever holds a partial file ---------
# 20 runs writing every output (--save all, CSV and FITS catalogues) of a
# 1500x1200 image into one folder, each killed after a random 0-1.5 s; after
# each kill every final name must be complete (FITS: whole 2880-byte blocks
# that astropy reads without a truncation warning; CSV: ends with a newline,
# as many rows as its header says; PNG: ends with IEND; markers: end with a
# newline). Then a new run in the folder removes the dead runs' temporaries.
cat >"$T/complete.py" <<'EOF2'
import sys, os, re, warnings
from astropy.io import fits
warnings.simplefilter('error')
d = sys.argv[1]
bad = []
for root, _, files in os.walk(d):
    for f in files:
        p = os.path.join(root, f)
        if '.tmp.' in f:
            continue
        with open(p, 'rb') as fh:
            b = fh.read()
        try:
            if f.endswith('.fits'):
                assert len(b) % 2880 == 0, 'size %d' % len(b)
                with fits.open(p) as h:
                    for u in h:
                        u.data
            elif f.endswith('.csv'):
                t = b.decode()
                assert t.endswith('\n'), 'no final newline'
                n = int(re.search(r': (\d+) (?:sources|components)', t).group(1))
                rows = [l for l in t.splitlines() if l and not l.startswith('#')]
                assert len(rows) == n + 1, '%d rows for %d rows announced' % (len(rows) - 1, n)
            elif f.endswith('.png'):
                assert b.endswith(b'IEND\xaeB`\x82'), 'no IEND'
            elif f.endswith('.done'):
                assert b.endswith(b'\n'), 'marker without a final newline'
        except Exception as e:
            bad.append('%s: %s' % (p, e))
print('\n'.join(bad) if bad else 'complete')
sys.exit(1 if bad else 0)
EOF2
"$SKYFIND" simulate -q -n 1500 --ny 1200 --nsrc 200 --seed 5 -o "$T/big.fits"
K=$T/killed; mkdir -p "$K"
RANDOM=16
partial=0 killed=0 withtmp=0
ntmps() { ls -A "$K" "$K/.skyfind" 2>/dev/null | grep -c '\.tmp\.'; }
killrun() { # $1: seconds before the kill
    "$SKYFIND" run -q -b cpu --save all --format csv,fits -o "$K" "$T/big.fits" 2>/dev/null &
    local pid=$!
    sleep "$1"
    kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
    wait "$pid" 2>/dev/null
    [ "$(ntmps)" -gt 0 ] && withtmp=$((withtmp + 1))
    if ! "$PY" "$T/complete.py" "$K" >"$T/complete.out" 2>&1; then
        partial=$((partial + 1)); sed -n 1,3p "$T/complete.out"
    fi
}
# the kill times are drawn from this machine's own time for the whole run
# (fixed times missed the write phase on a machine faster or busier than
# the one they were tuned on)
t0=$(date +%s%N)
"$SKYFIND" run -q -b cpu --save all --format csv,fits -o "$T/whole" "$T/big.fits" 2>/dev/null
full_ms=$((($(date +%s%N) - t0) / 1000000 + 1))
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
for i in $(seq 1 20); do
    killrun "$(secs $((RANDOM * full_ms / 32768)))"
done
# end on a kill that left temporaries (during the writes, in the run's
# second half), for the clean-up below; a run that ended before its kill
# shrinks the window (the first run's time misjudges a machine whose load
# changes, as under ctest -j)
hi=$full_ms
for i in $(seq 1 40); do
    [ "$(ntmps)" -gt 0 ] && break
    k0=$killed
    killrun "$(secs $((hi / 2 + RANDOM * hi / 2 / 32768)))"
    [ "$killed" = "$k0" ] && hi=$((hi * 4 / 5 + 1))
done
ntmp=$(ntmps)
case_ "SIGKILL x$killed: finals complete" 0 "" test "$partial" = 0
case_ "  (kills that left temporaries: $withtmp; now $ntmp)" 0 "" test "$ntmp" -gt 0
case_ "  next run removes the dead runs' temporaries" 0 "" "$SKYFIND" run -q -b cpu -o "$K" "$T/good.fits"
case_ "  (none left)" 1 "" bash -c "ls -A '$K' '$K/.skyfind' | grep -q '\.tmp\.'"

printf '%s\n' "result | case | exit | message"
printf '%s\n' "${ROWS[@]}"
echo "$pass passed, $fail failed, $skip skipped, $xf known failures"
[ "$fail" = 0 ]
