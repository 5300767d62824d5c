/* skyfind for programs: find the sources of an image held in memory.
 *
 * One call runs a pipeline (by name, file or text) on an array of any
 * common pixel type and returns the catalogue as columns: the same columns,
 * values and text formats as `skyfind run`'s CSV catalogue of the same
 * pixels and header. The Python package (src/python) is a thin layer over
 * these functions.
 *
 *   sf_array a = {pixels, SF_DT_FLOAT32, nx, ny, nx * sizeof(float), header_text};
 *   sf_find_opts o = {"radio", "auto", NULL, 0, 0};
 *   sf_found *f;
 *   if (sf_find(&a, &o, &f) != SF_OK) fprintf(stderr, "%s\n", sf_errdetail());
 *   for (int j = 0; j < sf_found_ncols(f); j++) ... sf_found_column(f, j) ...
 *   sf_found_free(f);
 *
 * Ownership: the caller's pixels and strings are only read during the call
 * (the pixels are converted to a float32 copy); everything a sf_found holds
 * is its own until sf_found_free.
 * Threads: sf_find and sf_find_file may be called from several threads at
 * once. CPU runs proceed side by side; GPU runs share one context per
 * device (made on first use, kept until the process ends) and take turns on
 * it. sf_errdetail() is per thread. */
#ifndef SKYFIND_SKYFIND_H
#define SKYFIND_SKYFIND_H

#include "skyfind/status.h"
#include "skyfind/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pixel types, native byte order. Values are converted to float32 as the
 * FITS reader converts (through double: (float)(double)v), +-Inf becomes
 * NaN, and NaN marks a blank pixel. */
typedef enum {
    SF_DT_UINT8 = 1, SF_DT_INT8, SF_DT_UINT16, SF_DT_INT16, SF_DT_UINT32, SF_DT_INT32,
    SF_DT_UINT64, SF_DT_INT64, SF_DT_FLOAT32, SF_DT_FLOAT64
} sf_dtype;

typedef struct {
    const void *data;    /* pixel (0, 0); rows follow at row_bytes from each other */
    int dtype;           /* sf_dtype */
    int nx, ny;          /* columns (the fastest axis, FITS NAXIS1) and rows */
    long long row_bytes; /* bytes from one row to the next: at least nx * the pixel size */
    const char *header;  /* FITS header text (80-character cards, as in a file; END
                            optional) for BUNIT, the restoring beam and the WCS;
                            NULL or "": none. Structural cards (SIMPLE, BITPIX,
                            NAXISn, BSCALE, BZERO, BLANK, ...) are ignored. */
    int on_gpu;          /* 0: host memory. 1: CUDA device memory (SF_DT_FLOAT32, rows
                            a whole number of floats apart): used on its device,
                            which must be the backend's ("gpu" or "auto"); the
                            pixels never cross to the host (copied on the device,
                            after a device synchronisation, as the runner changes
                            its image) */
} sf_array;

typedef struct {
    const char *pipeline; /* a name ("radio": $SKYFIND_PIPELINES, then the installed
                             pipelines), a path to a .pipe file, or .pipe text (any
                             string holding a newline); NULL: "radio" */
    const char *backend;  /* "cpu", "gpu" or "auto" (the GPU when a CUDA device is
                             found, else the CPU); NULL: "auto" */
    const char *const *set; /* nset assignments "stage.param=value" (as --set) */
    int nset;
    unsigned keep;        /* maps to keep (sf_found_map): SF_KEEP_BKG (background and
                             rms), SF_KEEP_LABELS (segmentation), SF_KEEP_FILTERED,
                             SF_KEEP_MASK, or'ed; 0: none. With an on_gpu image they
                             stay in device memory, else they are host memory */
} sf_find_opts;

typedef struct sf_found sf_found;

/* Run the pipeline on img. On success *out holds the result (free it with
 * sf_found_free); on failure *out is NULL and sf_errdetail() says why. */
sf_status sf_find(const sf_array *img, const sf_find_opts *opts, sf_found **out);
/* The same on one plane of a FITS file, read as `skyfind run` reads it
 * (plane: 1-based plane of a cube; 0: the first). */
sf_status sf_find_file(const char *path, int plane, const sf_find_opts *opts, sf_found **out);

int sf_found_nrows(const sf_found *f);       /* sources (catalogue rows) */
int sf_found_ncols(const sf_found *f);       /* catalogue columns */
const char *sf_found_colname(const sf_found *f, int j);
const char *sf_found_colunit(const sf_found *f, int j); /* "" when none */
const char *sf_found_colfmt(const sf_found *f, int j);  /* the CSV's printf format */
int sf_found_colint(const sf_found *f, int j);          /* 1: integer values */
const double *sf_found_column(const sf_found *f, int j); /* nrows values */
const char *sf_found_backend(const sf_found *f);        /* "cpu" or "gpu" */
/* A kept map: "background", "rms", "filtered" (float32), "segmentation" (int32
 * labels, 0: background, else the catalogue's id) or "mask" (uint8); NULL
 * when the run did not keep it (or made none). nx, ny, row_bytes, dtype
 * (sf_dtype) and on_gpu (1: device memory of the image's GPU), each when not
 * NULL, describe it. It lives until sf_found_free. */
const void *sf_found_map(const sf_found *f, const char *name, int *nx, int *ny,
                         long long *row_bytes, int *dtype, int *on_gpu);
/* Everything else the run gave (background statistics, stage times, the
 * maps it kept): see sf_run_result in skyfind/pipeline.h. */
const sf_run_result *sf_found_result(const sf_found *f);
/* One number of the run: "h2d_bytes", "d2h_bytes" (bytes copied to and from
 * the GPU), "total_ms" (the run's wall time), "upload_ms", "stages_ms" (the
 * stages' summed time: CUDA events on the GPU); NaN for another key. */
double sf_found_stat(const sf_found *f, const char *key);
/* The run's stages in order: the i-th one's name (NULL past the last) and,
 * in *ms when not NULL, its time (CUDA events on the GPU, wall time on the
 * CPU; a stage that ran twice, for negative detections, counts both). */
int sf_found_nstages(const sf_found *f);
const char *sf_found_stage(const sf_found *f, int i, double *ms);
void sf_found_free(sf_found *f);

#ifdef __cplusplus
}
#endif
#endif
