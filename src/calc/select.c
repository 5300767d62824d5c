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

float sf_median_f32(float *a, size_t n)
{
    float hi = sf_select_kth(a, n, n / 2);
    if (n % 2)
        return hi;
    /* the lower middle is the largest element before position n/2 */
    float lo = a[0];
    for (size_t i = 1; i < n / 2; i++)
        if (a[i] > lo)
            lo = a[i];
    volatile float s = lo + hi; /* rounded to float, as np.mean of two float32 */
    return s / 2.0f;
}
