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

/* The float32 mean of two values, as numpy's median of float32 data takes
 * it for an even count (the sum rounded to float, then halved). */
static inline float sf_mean2_f32(float a, float b)
{
    volatile float s = a + b;
    return s / 2.0f;
}

/* sf_median_f32 (the median as numpy computes it) is public: skyfind/image.h. */

#endif
