/* Raw FITS pixels to float32, as CFITSIO converts them: the big-endian data
 * of an uncompressed HDU (BITPIX 8, 16, 32, 64, -32, -64), scaled by
 * BSCALE/BZERO in double, with BLANK (integer data) and every non-finite
 * value as NaN (blank). The per-pixel rule is here, shared by the CPU twin
 * (cpu/decode.c) and the GPU version (gpu/decode.cu). */
#ifndef SKYFIND_DECODE_H
#define SKYFIND_DECODE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "skyfind/image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bitpix as on disk; SF_RAW_NATIVE: float32 in host order, already converted
 * (by CFITSIO, for compressed data), only non-finite values are blanked. */
enum { SF_RAW_NATIVE = 0 };

typedef struct {
    int bitpix;          /* 8, 16, 32, 64, -32, -64, or SF_RAW_NATIVE */
    double bscale, bzero;
    int has_blank;       /* integer data: BLANK marks blank pixels */
    long long blank;
    int nx, ny;
    /* set by sf_fits_read_raw_cpu: the buffer already holds the plane's
     * float32 pixels, decoded in place as it was read, nblank of them NaN */
    int decoded;
    long long nblank;
} sf_raw_layout;

/* Bytes of one pixel in this layout (4: it can be decoded in place, see
 * sf_decode_cpu). */
static inline size_t sf_raw_pixel_bytes(const sf_raw_layout *l)
{
    return l->bitpix == SF_RAW_NATIVE ? 4 : (size_t)(l->bitpix < 0 ? -l->bitpix : l->bitpix) / 8;
}

/* Bytes of one plane in this layout. */
static inline size_t sf_raw_bytes(const sf_raw_layout *l)
{
    return sf_npix(l->nx, l->ny) * sf_raw_pixel_bytes(l);
}

#ifdef __CUDACC__
#define SF_DEC_HD static __host__ __device__ __forceinline__
#else
#define SF_DEC_HD static inline
#endif

/* v * bscale + bzero rounded twice, never fused, as CFITSIO computes it. */
SF_DEC_HD double sf_decode_scale(double v, double bscale, double bzero)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(__dmul_rn(v, bscale), bzero);
#else
    volatile double p = v * bscale; /* no contraction into an FMA */
    return p + bzero;
#endif
}

/* The float of a converted value; non-finite values are blank (NaN). */
SF_DEC_HD float sf_decode_finish(double d)
{
    float f = (float)d;
    return isfinite(f) ? f : NAN;
}

/* The FITS convention for unsigned 64-bit integers: BITPIX 64, BSCALE 1,
 * BZERO 2^63. v * 1 + 2^63 in double (CFITSIO's arithmetic for float output)
 * keeps no bit of small values (ulp(2^63) is 2048), so these are decoded
 * exactly instead: the stored value with its top bit flipped, as uint64,
 * then converted to float32 through double. */
SF_DEC_HD int sf_raw_uint64(const sf_raw_layout *l)
{
    return l->bitpix == 64 && l->bscale == 1.0 && l->bzero == 9223372036854775808.0;
}

/* BITPIX -32's value from its word (already in host byte order): a
 * non-finite one (exponent all ones) becomes NaN, as CFITSIO does; as bits
 * (sf_decode_f32_bits: the CPU twin's row loop) or as the float. */
SF_DEC_HD uint32_t sf_decode_f32_bits(uint32_t w)
{
    return (w & 0x7f800000u) == 0x7f800000u ? 0x7fc00000u : w; /* the NaN that NAN is */
}

SF_DEC_HD float sf_decode_f32(uint32_t w)
{
    float f;
    w = sf_decode_f32_bits(w);
    memcpy(&f, &w, 4);
    return f;
}

/* One pixel from its big-endian bytes p (of |bitpix|/8 bytes). */
SF_DEC_HD float sf_decode_pixel(const unsigned char *p, const sf_raw_layout *l, int scaled)
{
    uint64_t u = 0;
    switch (l->bitpix) {
    case 8:
        if (l->has_blank && (long long)p[0] == l->blank)
            return NAN;
        return scaled ? sf_decode_finish(sf_decode_scale((double)p[0], l->bscale, l->bzero))
                      : (float)p[0];
    case 16: {
        int16_t v = (int16_t)(uint16_t)((p[0] << 8) | p[1]);
        if (l->has_blank && (long long)v == l->blank)
            return NAN;
        return scaled ? sf_decode_finish(sf_decode_scale((double)v, l->bscale, l->bzero)) : (float)v;
    }
    case 32: {
        int32_t v = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                              ((uint32_t)p[2] << 8) | p[3]);
        if (l->has_blank && (long long)v == l->blank)
            return NAN;
        return sf_decode_finish(scaled ? sf_decode_scale((double)v, l->bscale, l->bzero) : (double)v);
    }
    case 64: {
        int64_t v;
        for (int k = 0; k < 8; k++)
            u = (u << 8) | p[k];
        v = (int64_t)u;
        if (l->has_blank && (long long)v == l->blank)
            return NAN;
        if (sf_raw_uint64(l)) /* unsigned 64-bit: the value exactly, then rounded once */
            return (float)(double)(u ^ 0x8000000000000000ull);
        return sf_decode_finish(scaled ? sf_decode_scale((double)v, l->bscale, l->bzero) : (double)v);
    }
    case -32: {
        const float f = sf_decode_f32(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                                      ((uint32_t)p[2] << 8) | p[3]);
        if (isnan(f))
            return f;
        return scaled ? sf_decode_finish(sf_decode_scale((double)f, l->bscale, l->bzero)) : f;
    }
    case -64: {
        double d;
        for (int k = 0; k < 8; k++)
            u = (u << 8) | p[k];
        memcpy(&d, &u, 8);
        if (!isfinite(d))
            return NAN;
        return sf_decode_finish(scaled ? sf_decode_scale(d, l->bscale, l->bzero) : d);
    }
    default: { /* SF_RAW_NATIVE */
        float f;
        memcpy(&f, p, 4);
        return isfinite(f) ? f : NAN;
    }
    }
}

/* Is the scaling more than the identity? */
static inline int sf_raw_scaled(const sf_raw_layout *l)
{
    return l->bitpix != SF_RAW_NATIVE && (l->bscale != 1.0 || l->bzero != 0.0);
}

/* Decode a plane: raw (host, sf_raw_bytes(l) bytes) into out (host, nx x ny);
 * *nblank counts the blank pixels (NULL: not counted). CPU twin. out may be
 * raw itself (out->data == raw, stride nx) when a pixel takes 4 bytes
 * (BITPIX -32 and 32, SF_RAW_NATIVE): each pixel is read before it is
 * written in its own place. */
sf_status sf_decode_cpu(const void *raw, const sf_raw_layout *l, sf_image *out, long long *nblank);
/* Decode n consecutive pixels of a layout of 4-byte pixels in place (buf:
 * their raw bytes, then their floats), on the calling thread; returns the
 * NaNs written. The reader's piece of a plane (sf_fits_read_raw_cpu), the
 * values sf_decode_cpu gives. The layout must have passed sf_raw_check. */
long long sf_decode_cpu_span(void *buf, int n, const sf_raw_layout *l);
/* The same on the device, on the context's stream: raw and out in device memory. */
sf_status sf_decode_gpu(sf_gpu *g, const void *raw, const sf_raw_layout *l, sf_image *out,
                        long long *nblank);
/* Check a layout (known BITPIX, positive size, finite non-zero BSCALE). */
sf_status sf_raw_check(const sf_raw_layout *l);

#ifdef __cplusplus
}
#endif
#endif
