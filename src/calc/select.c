/* Exact order statistics of float arrays (see select.h). */
#include "select.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fixsum.h"

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

float sf_select_radix(const float *a, size_t n, size_t k, float *prev)
{
    uint32_t *cnt = calloc(65536, sizeof *cnt), hb = 0, lb = 0, key;
    size_t below = 0, acc = 0, r;
    if (!cnt) { /* quickselect on a copy */
        float *c = malloc(n * sizeof *c), v = NAN;
        if (c) {
            memcpy(c, a, n * sizeof *c);
            v = prev ? sf_select_kth_prev(c, n, k, prev) : sf_select_kth(c, n, k);
        } else if (prev) {
            *prev = NAN;
        }
        free(c);
        return v;
    }
    for (size_t i = 0; i < n; i++)
        cnt[sf_fkey(a[i]) >> 16]++;
    while (below + cnt[hb] <= k)
        below += cnt[hb++];
    /* rank k is rank r among the keys of bin hb */
    r = k - below;
    memset(cnt, 0, 65536 * sizeof *cnt);
    for (size_t i = 0; i < n; i++) {
        key = sf_fkey(a[i]);
        if (key >> 16 == hb)
            cnt[key & 0xffffu]++;
    }
    while (acc + cnt[lb] <= r)
        acc += cnt[lb++];
    key = hb << 16 | lb;
    if (prev) {
        if (r > acc) { /* rank k - 1 has the same key */
            *prev = sf_fkey_value(key);
        } else if (r > 0) { /* the last key of bin hb below lb */
            uint32_t j = lb - 1;
            while (cnt[j] == 0)
                j--;
            *prev = sf_fkey_value(hb << 16 | j);
        } else { /* the largest key of the bins below hb */
            uint32_t best = 0;
            for (size_t i = 0; i < n; i++) {
                uint32_t t = sf_fkey(a[i]);
                if (t < hb << 16 && t >= best)
                    best = t;
            }
            *prev = sf_fkey_value(best);
        }
    }
    free(cnt);
    return sf_fkey_value(key);
}
