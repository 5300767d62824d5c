/* FITS input from a memory buffer: the bytes are put in an anonymous
 * in-memory file (Linux memfd) that sf_fits_read opens by its /proc path, so
 * a buffer goes through exactly the reader that files go through (used by
 * the fuzzing harnesses in tests/fuzz). */
#ifndef SKYFIND_FITS_MEM_H
#define SKYFIND_FITS_MEM_H

#include <stddef.h>
#include "skyfind/fits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An anonymous in-memory file holding n bytes of buf, rewound; path
 * (pathlen >= 32) receives a name that open(), fopen() and CFITSIO accept
 * while the descriptor is open. Returns the descriptor (close it when done)
 * or -1 (errno set). */
int sf_memfile(const void *buf, size_t n, char *path, size_t pathlen);

/* sf_fits_read (host memory) of a FITS file held in buf; name replaces the
 * /proc path in info->path (error details name the /proc path). */
sf_status sf_fits_read_mem(const void *buf, size_t n, const char *name, int plane,
                           sf_image *img, sf_fits_info *info);

#ifdef __cplusplus
}
#endif
#endif
