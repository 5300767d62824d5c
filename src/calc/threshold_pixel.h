/* The per-pixel rule of stage `threshold`, shared by the CPU twin and the
 * GPU kernels (plain C, __host__ __device__ under CUDA) so both backends
 * make the same float32 decision for every pixel. */
#ifndef SKYFIND_CPU_THRESHOLD_PIXEL_H
#define SKYFIND_CPU_THRESHOLD_PIXEL_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SF_THR_HD static __host__ __device__ __forceinline__
#else
#define SF_THR_HD static inline
#endif
#ifdef __CUDA_ARCH__
#define SF_THR_FMUL(a, b) __fmul_rn((a), (b))
#else
#define SF_THR_FMUL(a, b) ((a) * (b))
#endif

/* Mask values. */
enum { SF_MASK_SEED = 1, SF_MASK_FLOOD = 2 };

/* v: the (filtered) pixel; level, noise: its background level and sigma
 * (already scaled for a filtered image); seed, flood: the two levels in
 * sigma (flood == seed for one level). Non-finite pixels are never set.
 * Written without branches (selects of comparisons), so that the CPU's row
 * loops vectorise. */
SF_THR_HD uint8_t sf_thresh_pixel(float v, float level, float noise, float seed, float flood)
{
    const float d = v - level;
    const int fin = fabsf(v) < INFINITY; /* 0 for NaN and +-inf */
    const int s = d > SF_THR_FMUL(seed, noise), f = d > SF_THR_FMUL(flood, noise);
    /* seed: 1; flood only: 2; else 0; nothing when not finite */
    return (uint8_t)((s * SF_MASK_SEED + (f & (s ^ 1)) * SF_MASK_FLOOD) * fin);
}

#endif
