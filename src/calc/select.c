/* Exact order statistics of float arrays and of their keys (see select.h). */
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

void sf_radix_sort_keys(uint32_t *a, uint32_t *b, size_t n)
{
    uint32_t c0[2048] = {0}, c1[2048] = {0}, c2[1024] = {0}, r0 = 0, r1 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        c0[a[i] & 2047u]++;
        c1[(a[i] >> 11) & 2047u]++;
        c2[a[i] >> 22]++;
    }
    for (int d = 0; d < 2048; d++) {
        const uint32_t k0 = c0[d], k1 = c1[d];
        c0[d] = r0;
        c1[d] = r1;
        r0 += k0;
        r1 += k1;
        if (d < 1024) {
            const uint32_t k2 = c2[d];
            c2[d] = r2;
            r2 += k2;
        }
    }
    for (size_t i = 0; i < n; i++)
        b[c0[a[i] & 2047u]++] = a[i];
    for (size_t i = 0; i < n; i++)
        a[c1[(b[i] >> 11) & 2047u]++] = b[i];
    for (size_t i = 0; i < n; i++)
        b[c2[a[i] >> 22]++] = a[i];
}

void sf_select_key_ranks(uint32_t *a, uint32_t *b, size_t n, const size_t *ks, int nk,
                         uint32_t *out)
{
    uint32_t lo = a[0], hi = a[0], cnt[2048] = {0};
    size_t below = 0, c = 0, run = 0;
    int top, shift, dlo = -1, dhi = -1;
    for (size_t i = 1; i < n; i++) {
        lo = a[i] < lo ? a[i] : lo;
        hi = a[i] > hi ? a[i] : hi;
    }
    if (lo == hi) {
        for (int j = 0; j < nk; j++)
            out[j] = lo;
        return;
    }
    top = 31 - __builtin_clz(lo ^ hi);
    shift = top >= 10 ? top - 10 : 0;
    for (size_t i = 0; i < n; i++)
        cnt[(a[i] >> shift) & 2047u]++;
    for (int d = 0; d < 2048 && dhi < 0; d++) { /* the digits that hold ranks ks[0], ks[nk-1] */
        if (dlo < 0 && run + cnt[d] > ks[0]) {
            dlo = d;
            below = run;
        }
        if (run + cnt[d] > ks[nk - 1])
            dhi = d;
        run += cnt[d];
    }
    for (size_t i = 0; i < n; i++) {
        const int d = (int)((a[i] >> shift) & 2047u);
        b[c] = a[i];
        c += d >= dlo && d <= dhi;
    }
    sf_radix_sort_keys(b, a, c); /* sorted into a */
    for (int j = 0; j < nk; j++)
        out[j] = a[ks[j] - below];
}
