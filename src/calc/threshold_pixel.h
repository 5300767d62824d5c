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
 * sigma (flood == seed for one level). Non-finite pixels are never set. */
SF_THR_HD uint8_t sf_thresh_pixel(float v, float level, float noise, float seed, float flood)
{
    float d = v - level;
    if (!isfinite(v))
        return 0;
    if (d > SF_THR_FMUL(seed, noise))
        return SF_MASK_SEED;
    return d > SF_THR_FMUL(flood, noise) ? SF_MASK_FLOOD : 0;
}

#endif
