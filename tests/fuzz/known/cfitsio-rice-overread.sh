#!/bin/sh
# Makes the reproducer of a crash fuzz_fits found inside CFITSIO 4.2.0
# (Debian 12): optical_ngc1316_440x300_RICE_tilecompressed.fits of
# $SKYFIND_TEST_DATA with two bytes of its RICE tile heap changed. Reading it
# (sf_fits_read -> ffgsv -> imcomp_decompress_tile -> fits_rdecomp_short)
# reads past the compressed tile: valgrind "Invalid read of size 1" under the
# plain tool (which then reports a corrupt tile, exit 1), SEGV under ASan.
# Usage: tests/fuzz/known/cfitsio-rice-overread.sh OUT.fits
set -eu
out=${1:?usage: cfitsio-rice-overread.sh OUT.fits}
src=$(cd "$(dirname "$0")/../../.." && pwd)
data=${SKYFIND_TEST_DATA:-$src/../shared/data}
cp "$data/optical_ngc1316_440x300_RICE_tilecompressed.fits" "$out"
chmod u+w "$out"
printf '\271' | dd of="$out" bs=1 seek=27190 conv=notrunc status=none  # 0x49 -> 0xb9
printf '\044' | dd of="$out" bs=1 seek=41018 conv=notrunc status=none  # 0xfb -> 0x24
