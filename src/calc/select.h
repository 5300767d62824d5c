/* Exact order statistics on the host, shared by the background stage's CPU
 * twin and `skyfind info`: of float arrays (quickselect, radix selection),
 * and of order-preserving keys (sf_fkey: a serial radix sort, and several
 * ranks at once). */
#ifndef SKYFIND_SELECT_H
#define SKYFIND_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include "skyfind/image.h"

/* k-th smallest of a[0..n-1] (0-based, n >= 1); reorders a so that every
 * element before k is <= a[k] and every element after it is >= a[k]. */
float sf_select_kth(float *a, size_t n, size_t k);

/* The same, with the (k-1)-th smallest (k >= 1) in *prev: after the
 * selection it is the largest element before position k. */
float sf_select_kth_prev(float *a, size_t n, size_t k, float *prev);

/* The k-th smallest of a[0..n-1] (no NaN, n >= 1) without reordering it,
 * and with prev (k >= 1) the (k-1)-th, by radix selection on the
 * order-preserving keys (sf_fkey): a histogram of their top 16 bits, then
 * of the low 16 bits of the keys in the chosen bin. Two passes whatever the
 * values (quickselect's pivots wander on the node grids of the bane
 * background: 232,000 values at 8192^2); the same values as sf_select_kth
 * and sf_select_kth_prev, except that -0 orders before +0. Falls back to
 * them (on a copy) when its 256 KB of counts cannot be allocated. */
float sf_select_radix(const float *a, size_t n, size_t k, float *prev);

/* Sorts the n keys a (uint32, n < 2^32) into b, a left as scratch: an LSD
 * radix sort of three digits (11, 11, 10 bits), all three counted in one
 * pass, with 32-bit counters that stay in L1. */
void sf_radix_sort_keys(uint32_t *a, uint32_t *b, size_t n);

/* The keys of a[0..n) (n >= 1) at ranks ks[0..nk) (0-based, ascending,
 * each < n; nk >= 1) into out, as the sorted keys hold them; a's order is
 * destroyed, b is n keys of scratch. The keys' extremes share every bit
 * above the highest where they differ; a count of the eleven bits from
 * there down (key order, within that range) places the lowest and the
 * highest rank's digits, and only the keys between those digits are sorted:
 * for the global clipping's first window (ranks m/2 -+ 3 sqrt(m) of m =
 * 65536 samples, background_global.h) a few thousand keys, where the sort
 * of every key took 0.7-1.1 ms on one thread of the H200 host. */
void sf_select_key_ranks(uint32_t *a, uint32_t *b, size_t n, const size_t *ks, int nk,
                         uint32_t *out);

/* The float32 mean of two values, as numpy's median of float32 data takes
 * it for an even count (the sum rounded to float, then halved). */
static inline float sf_mean2_f32(float a, float b)
{
    volatile float s = a + b;
    return s / 2.0f;
}

/* sf_median_f32 (the median as numpy computes it) is public: skyfind/image.h. */

#endif
