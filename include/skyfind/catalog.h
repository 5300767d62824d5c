/* Catalogue writers. CSV: comment lines (what the columns mean, units, the
 * run), a header row, one source per row; x, y, peak_x, peak_y are 1-based
 * FITS pixel coordinates (the SExtractor / ds9 convention). Written
 * atomically: a temporary file renamed when complete. */
#ifndef SKYFIND_CATALOG_H
#define SKYFIND_CATALOG_H

#include "skyfind/measure.h"
#include "skyfind/background.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *input;     /* input file name */
    const char *pipeline;  /* pipeline name or path */
    const char *backend;   /* "cpu" or "gpu" */
    const char *bunit;     /* image units, "" if unknown */
    int have_bkg;
    sf_bkg_stats bkg;
} sf_catalog_meta;

sf_status sf_catalog_write_csv(const char *path, const sf_source *src, int n,
                               const sf_catalog_meta *meta);

/* Open "<path>.tmp.<pid>" for writing; commit renames it to path (after a
 * successful fclose), abort removes it. Errors name path. */
sf_status sf_atomic_open(const char *path, char *tmp, size_t tmpn, void **file);
sf_status sf_atomic_commit(void *file, const char *tmp, const char *path);
void sf_atomic_abort(void *file, const char *tmp);

#ifdef __cplusplus
}
#endif
#endif
