/* Exact order statistics of float arrays on the host (quickselect), shared
 * by the background stage's CPU twin and `skyfind info`. */
#ifndef SKYFIND_SELECT_H
#define SKYFIND_SELECT_H

#include <stddef.h>
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

/* The float32 mean of two values, as numpy's median of float32 data takes
 * it for an even count (the sum rounded to float, then halved). */
static inline float sf_mean2_f32(float a, float b)
{
    volatile float s = a + b;
    return s / 2.0f;
}

/* sf_median_f32 (the median as numpy computes it) is public: skyfind/image.h. */

#endif
