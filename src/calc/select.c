/* Exact order statistics of float arrays (see select.h). */
#include "select.h"

float sf_select_kth(float *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (hi > lo) {
        /* median of three as the pivot */
        size_t mid = lo + (hi - lo) / 2;
        float x = a[lo], y = a[mid], z = a[hi], piv;
        piv = (x < y) ? ((y < z) ? y : (x < z ? z : x)) : ((x < z) ? x : (y < z ? z : y));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < piv)
                i++;
            while (a[j] > piv)
                j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

float sf_select_kth_prev(float *a, size_t n, size_t k, float *prev)
{
    float kth = sf_select_kth(a, n, k), lo = a[0];
    for (size_t i = 1; i < k; i++)
        if (a[i] > lo)
            lo = a[i];
    *prev = lo;
    return kth;
}

float sf_median_f32(float *a, size_t n)
{
    float lo, hi;
    if (n % 2)
        return sf_select_kth(a, n, n / 2);
    hi = sf_select_kth_prev(a, n, n / 2, &lo);
    return sf_mean2_f32(lo, hi);
}
