#!/bin/sh
# Makes the reproducer of RESULTS.md crash 6 from the data folder's RICE image
# (the image data is not kept in the repository): the corrupt tile of
# cfitsio-rice-overread.sh, and ZIMAGE's card replaced by the one fuzzing
# found, "ZIMAGE  =                  THEAP   =ension ...", which CFITSIO
# reads as true (a logical beginning with T) and the pre-check once did
# not, so the RICE walk was skipped and CFITSIO decoded the corrupt tile
# past its end (SEGV under ASan). src/io/fits.c now refuses the file.
# Usage: tests/fuzz/known/cfitsio-rice-overread-theap.sh OUT.fits
set -eu
out=${1:?usage: cfitsio-rice-overread-theap.sh OUT.fits}
"$(dirname "$0")"/cfitsio-rice-overread.sh "$out"
printf '%-80s' 'ZIMAGE  =                  THEAP   =ension contains compressed image' |
    dd of="$out" bs=1 seek=3680 conv=notrunc status=none
