/* Private to the FITS reader (src/io/fits.c), its pre-check
 * (src/io/fits_precheck.c) and sf_find's header stub (src/engine/api.c). */
#ifndef SKYFIND_FITS_INTERNAL_H
#define SKYFIND_FITS_INTERNAL_H

#include "skyfind/status.h"

/* Check the raw header blocks (and the tiles of a compressed HDU) of path
 * before CFITSIO reads it: SF_OK, or a failure naming the HDU and the
 * problem. */
sf_status sf_fits_precheck(const char *path);

/* Cards that describe the file layout (or a tile-compressed table) and
 * must not be copied into a new 2-D image. */
int sf_fits_structural(const char *key, const char *card);

/* Keyword name of an 80-char card (up to 8 chars, no blanks). */
void sf_card_key(const char *card, char key[9]);

#endif
