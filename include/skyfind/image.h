/* skyfind images, masks and label maps: row-major 2-D buffers, x fastest,
 * 0-based indices, living on the host or on the device. Only
 * sf_*_upload / sf_*_download cross PCIe, and they count the bytes. */
#ifndef SKYFIND_IMAGE_H
#define SKYFIND_IMAGE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "skyfind/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SF_HOST = 0, SF_DEVICE = 1 } sf_loc;

typedef struct sf_gpu sf_gpu; /* per-run GPU context, see gpu.h */

typedef struct {
    int nx, ny;     /* width (x, fastest) and height */
    size_t stride;  /* elements between rows; equals nx for buffers made here */
    float *data;    /* NaN marks blank pixels */
    sf_loc loc;
} sf_image;

typedef struct {
    int nx, ny;
    size_t stride;
    uint8_t *data;  /* 0, or 1 (seed) or 2 (flood only): see threshold.h */
    sf_loc loc;
} sf_mask;

typedef struct {
    int nx, ny;
    size_t stride;
    int32_t *data;  /* 0 = background, 1..N sources in canonical raster order */
    sf_loc loc;
} sf_labels;

/* Host memory for image-sized buffers and scratch, released with
 * sf_host_free: aligned to 4096 bytes (enough for SIMD loads, FFTW's plans
 * and cudaHostRegister); blocks of 4 MB or more are aligned to 2 MB, advised for transparent huge pages (fewer first-touch page faults;
 * SKYFIND_HUGEPAGES=0 turns the advice off) and, when freed, kept (up to 16
 * blocks, 1 GB) for the next request of the same rounded size, so that a
 * batch does not make the kernel zero fresh memory for every image. NULL
 * when out of memory. Release such a block only with sf_host_free (which
 * also takes any other malloc'd block, and NULL). sf_host_cache_release
 * frees the kept blocks (the batch engine does when it ends). */
void *sf_host_alloc(size_t bytes);
void sf_host_free(void *ptr);
void sf_host_cache_release(void);

/* Allocation: host buffers with sf_host_alloc (or pinned memory when g != NULL and
 * loc == SF_HOST), device buffers with cudaMalloc through g. nx, ny >= 1. */
sf_status sf_image_alloc(sf_image *im, int nx, int ny, sf_loc loc, sf_gpu *g);
sf_status sf_mask_alloc(sf_mask *m, int nx, int ny, sf_loc loc, sf_gpu *g);
sf_status sf_labels_alloc(sf_labels *l, int nx, int ny, sf_loc loc, sf_gpu *g);
/* Free whatever is held (safe on zeroed structs); g as given to alloc. */
void sf_image_free(sf_image *im, sf_gpu *g);
void sf_mask_free(sf_mask *m, sf_gpu *g);
void sf_labels_free(sf_labels *l, sf_gpu *g);

/* Host <-> device copies of whole buffers of equal shape (counted in g). */
sf_status sf_image_upload(sf_gpu *g, const sf_image *host, sf_image *dev);
sf_status sf_image_download(sf_gpu *g, const sf_image *dev, sf_image *host);
sf_status sf_mask_download(sf_gpu *g, const sf_mask *dev, sf_mask *host);
sf_status sf_labels_upload(sf_gpu *g, const sf_labels *host, sf_labels *dev);
sf_status sf_labels_download(sf_gpu *g, const sf_labels *dev, sf_labels *host);
sf_status sf_mask_upload(sf_gpu *g, const sf_mask *host, sf_mask *dev);

/* Flip the sign bit of every pixel in place (x -> -x exactly, NaN stays NaN;
 * twice restores the bits), on the host or, through g, on the device. The
 * runner's negative pass (threshold sign=negative|both) uses it. */
sf_status sf_image_negate(sf_gpu *g, sf_image *im);

static inline size_t sf_npix(int nx, int ny) { return (size_t)nx * (size_t)ny; }

/* Median of a[0..n-1] (n >= 1) as numpy computes it for float32 data: the
 * middle element, or the float32 mean of the two middle elements; exact
 * (quickselect), and reorders a. The global background uses it, and
 * `skyfind info` for its statistics. */
float sf_median_f32(float *a, size_t n);

/* The one rule for pixel values read from a file (CFITSIO's path in
 * src/io/fits.c, the raw decode on the CPU and on the GPU): NaN, +Inf and -Inf
 * are all blank, NaN inside skyfind, and counted with the blank pixels
 * (sf_fits_info.nnan). Any finite float is kept as it is. */
#ifdef __CUDACC__
#define SF_PIXEL_HD static __host__ __device__ __forceinline__
#else
#define SF_PIXEL_HD static inline
#endif
SF_PIXEL_HD float sf_pixel_clean(float v)
{
    return isfinite(v) ? v : NAN;
}

#ifdef __cplusplus
}
#endif
#endif
