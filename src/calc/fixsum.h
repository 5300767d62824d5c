/* Exact, order-independent sums for the measure stage: a 128-bit two's-
 * complement fixed-point accumulator usable from C (CPU twins) and CUDA
 * (device code), plus the order-preserving float key used for peaks. */
#ifndef SKYFIND_FIXSUM_H
#define SKYFIND_FIXSUM_H

/* How it works
 * ------------
 * A sum of doubles depends on the order of the additions; a sum of integers
 * does not. Every term t (a pixel value v, or v*x, v*y, later v*x*x, ...) is
 * scaled by 2^e, rounded to the nearest integer (rint, ties to even), and
 * added as a 128-bit integer, value = (hi*2^64 + lo) * 2^-e. Integer addition
 * modulo 2^128 is associative and commutative, so any order (CPU raster
 * order, GPU atomics, warp shuffles) gives the same bits; intermediate
 * wrap-around does not matter as long as the final sum fits in 127 bits.
 *
 * Scale: M = max |v| over the finite labelled pixels, frexp(M) = f*2^E with
 * f in [0.5, 1), e = 66 - E (e = 0 when M == 0). Then |v|*2^e < 2^66, a term
 * with a coordinate factor up to x*x (x < 2^16) is below 2^98 and 2^28 such
 * terms below 2^126: room for second moments (sum v*dx*dx, v*dy*dy, v*dx*dy,
 * taken relative to the peak by measure) on images of up to 2^28 pixels per
 * source; larger images drop bits from e (ms_scale_shift in
 * measure_calc.h). First moments
 * (|x| < 2^31) leave even more room (2^97 per term).
 *
 * Terms are formed by multiplications only: tv = (double)v * 2^e is exact
 * (a power-of-two scale of a float, far from under/overflow), tv * x is exact
 * while x < 2^29 (24 + 29 bits) and otherwise rounded once by IEEE double
 * multiplication, which both backends do identically (no FMA can contract a
 * pure product). A term's rounding error is at most 2^-e/2 <= M*2^-66.
 *
 * Dynamic range: the absolute resolution of every sum is 2^-e, i.e. between
 * M*2^-66 and M*2^-65. Values much smaller than the brightest labelled pixel
 * lose relative precision and, below M*2^-67, contribute nothing: in an image
 * with a 1e30 source, a source made of 1e-30 pixels measures flux_sum = 0
 * (centroid NaN) while its npix and peak stay exact. Nothing overflows, no
 * infinities or NaNs appear in the sums, and both backends agree bit for bit.
 *
 * Conversion back: the magnitude |value| is converted as (double)hi*2^64 +
 * (double)lo (hi >= 0 here, at most about two roundings), then the sign and
 * ldexp(., -e) are applied. Converting the magnitude (rather than the raw
 * two's-complement pair) keeps small negative sums accurate: with hi = -1 the
 * raw form would cancel catastrophically. The same expression runs on both
 * backends, so the doubles are identical. */

#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __CUDACC__
#define SF_FIX_FN __host__ __device__ __forceinline__
#else
#define SF_FIX_FN static inline
#endif

typedef struct {
    uint64_t lo; /* low 64 bits */
    int64_t hi;  /* high 64 bits, carries the sign */
} sf_fix128;

/* e = 66 - E for frexp(M) = f*2^E; 0 when M == 0 (or not finite). */
SF_FIX_FN int sf_fix_exponent(double M)
{
    int E = 0;
    if (!(M > 0) || !isfinite(M))
        return 0;
    (void)frexp(M, &E);
    return 66 - E;
}

SF_FIX_FN sf_fix128 sf_fix_zero(void)
{
    sf_fix128 r;
    r.lo = 0;
    r.hi = 0;
    return r;
}

/* Two's-complement negation of the 128-bit pair. */
SF_FIX_FN sf_fix128 sf_fix_neg(sf_fix128 a)
{
    sf_fix128 r;
    r.lo = (uint64_t)0 - a.lo;
    r.hi = (int64_t)((uint64_t)0 - (uint64_t)a.hi - (uint64_t)(a.lo != 0));
    return r;
}

/* Round an already scaled term t (|t| < 2^126, finite) to the nearest
 * integer and return it as 128-bit fixed point. a = rint(|t|) is an integer
 * of at most 53 significant bits; hi = floor(a*2^-64) and lo = a - hi*2^64
 * are both exact (a power-of-two scale, then the low bits of a). */
SF_FIX_FN sf_fix128 sf_fix_from_double(double t)
{
    sf_fix128 r;
    double a = rint(fabs(t));
    double h = floor(a * 0x1p-64);
    double l = a - h * 0x1p64;
    r.lo = (uint64_t)l;
    r.hi = (int64_t)h;
    return t < 0 ? sf_fix_neg(r) : r;
}

/* acc += a (mod 2^128). The carry out of the low word is lo' < a.lo. */
SF_FIX_FN void sf_fix_add(sf_fix128 *acc, sf_fix128 a)
{
    uint64_t lo = acc->lo + a.lo;
    uint64_t carry = lo < a.lo;
    acc->lo = lo;
    acc->hi = (int64_t)((uint64_t)acc->hi + (uint64_t)a.hi + carry);
}

SF_FIX_FN int sf_fix_is_zero(sf_fix128 a) { return a.lo == 0 && a.hi == 0; }

/* value * 2^-e as a double (see "Conversion back" above). */
SF_FIX_FN double sf_fix_to_double(sf_fix128 a, int e)
{
    int neg = a.hi < 0;
    sf_fix128 m = neg ? sf_fix_neg(a) : a;
    double d = (double)(uint64_t)m.hi * 0x1p64 + (double)m.lo;
    d = ldexp(d, -e);
    return neg ? -d : d;
}

/* Quiet NaNs with fixed bit patterns (0.0/0.0 differs between x86 and the
 * GPU, and catalogues are compared byte for byte). */
SF_FIX_FN double sf_fix_nan(void)
{
    uint64_t b = 0x7ff8000000000000ull;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

SF_FIX_FN float sf_fix_nanf(void)
{
    uint32_t b = 0x7fc00000u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Order-preserving key of a float: unsigned comparison of keys is the IEEE
 * total order of the values (-0 < +0; NaNs are never passed here). Positive
 * floats get the sign bit set, negative floats are bit-inverted. Finite
 * values all give keys >= 0x00800000, so key 0 can mean "no pixel". */
SF_FIX_FN uint32_t sf_fkey(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

SF_FIX_FN float sf_fkey_value(uint32_t k)
{
    uint32_t b = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

#endif
