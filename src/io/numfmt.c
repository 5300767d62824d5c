/* Numbers as text for the catalogue writers: "%.Pg" and "%d" as snprintf
 * writes them (numfmt.h). A double is scaled by a power of ten in long
 * double (64-bit significand on x86-64: the scaled value's error is a few
 * parts in 2^64) to an integer of P digits, whose rounding is decided
 * unless the scaled value lies within 2^-60 of it of a half (it is off by
 * at most 11 roundings of 2^-64, one a step of scale10): an exact half
 * (fmal finds no remainder: floats' short binary fractions often are one)
 * goes to the even digit as printf's does, anything else that near, and
 * everything where long double is no wider than double, to snprintf; the digits
 * are then laid out by %g's rule: exponent X of the rounded value, %e style
 * when X < -4 or X >= P, else %f style, trailing zeros and a bare decimal
 * point removed. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include "numfmt.h"

#if LDBL_MANT_DIG >= 64
static const long double P10[28] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,
                                    1e7L,  1e8L,  1e9L,  1e10L, 1e11L, 1e12L, 1e13L,
                                    1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L,
                                    1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};

/* Does long double arithmetic carry its 64 bits here? (valgrind, for one,
 * computes x87 long doubles in double precision: the roundings above would
 * then be wrong, so everything goes to snprintf.) Checked once. */
static int ld_ok(void)
{
    static atomic_int ok = -1;
    int v = atomic_load_explicit(&ok, memory_order_relaxed);
    if (v < 0) {
        volatile long double one = 1.0L, tiny = 0x1p-63L;
        v = one + tiny != one;
        atomic_store_explicit(&ok, v, memory_order_relaxed);
    }
    return v;
}

/* v 10^k: every power up to 10^27 is exact in long double, so each step
 * rounds once */
static long double scale10(double v, int k)
{
    long double t = v;
    if (k >= 0) {
        for (; k > 27; k -= 27)
            t *= P10[27];
        return t * P10[k];
    }
    for (k = -k; k > 27; k -= 27)
        t /= P10[27];
    return t / P10[k];
}
#endif

int sf_fmt_g(char *buf, size_t cap, double v, int prec)
{
#if LDBL_MANT_DIG >= 64
    char d[16];
    char *o = buf;
    int e2, e10, X = 0, ok = 0;
    if (prec < 1 || prec > 12 || !isfinite(v) || cap < 32 || !ld_ok())
        return -1;
    if (signbit(v)) {
        *o++ = '-';
        v = -v;
    }
    if (v == 0.0) {
        *o++ = '0';
        *o = '\0';
        return (int)(o - buf);
    }
    if (v < 1e-280 || v > 1e280)
        return -1;
    (void)frexp(v, &e2);                                   /* v in [2^(e2-1), 2^e2) */
    e10 = (int)floor((e2 - 1) * 0.301029995663981195); /* floor(log10 v), or one less */
    for (int tries = 0; tries < 3 && !ok; tries++) {
        const long double t = scale10(v, prec - 1 - e10);
        if (t >= P10[prec]) {
            e10++;
            continue;
        }
        if (t < P10[prec - 1]) {
            e10--;
            continue;
        }
        {
            const long double fl = floorl(t), fr = t - fl; /* exact */
            uint64_t n;
            const int k = prec - 1 - e10;
            if (fabsl(fr - 0.5L) > t * 0x1p-60L)
                n = (uint64_t)fl + (fr > 0.5L);
            else if (fr == 0.5L && k >= -27 && k <= 27 &&
                     (k >= 0 ? fmal((long double)v, P10[k], -t) : fmal(t, P10[-k], -(long double)v)) == 0.0L)
                n = (uint64_t)fl + ((uint64_t)fl & 1u); /* t is v 10^k exactly: a tie, to even as printf */
            else
                return -1; /* too near a half to round from t */
            if (n >= (uint64_t)P10[prec]) { /* 99..9.7 rounds to 10^P */
                n /= 10;
                e10++;
            }
            for (int i = prec - 1; i >= 0; i--) {
                d[i] = (char)('0' + n % 10);
                n /= 10;
            }
            X = e10;
            ok = 1;
        }
    }
    if (!ok)
        return -1;
    if (X < -4 || X >= prec) { /* d.ddde+XX */
        int last = prec - 1, ax = X < 0 ? -X : X;
        while (last > 0 && d[last] == '0')
            last--;
        *o++ = d[0];
        if (last > 0) {
            *o++ = '.';
            memcpy(o, d + 1, (size_t)last);
            o += last;
        }
        *o++ = 'e';
        *o++ = X < 0 ? '-' : '+';
        if (ax >= 100) {
            *o++ = (char)('0' + ax / 100);
            ax %= 100;
        }
        *o++ = (char)('0' + ax / 10);
        *o++ = (char)('0' + ax % 10);
    } else if (X >= 0) { /* ddd.ddd */
        int last = prec - 1;
        while (last > X && d[last] == '0')
            last--;
        memcpy(o, d, (size_t)X + 1);
        o += X + 1;
        if (last > X) {
            *o++ = '.';
            memcpy(o, d + X + 1, (size_t)(last - X));
            o += last - X;
        }
    } else { /* 0.000ddd */
        int last = prec - 1;
        while (last > 0 && d[last] == '0')
            last--;
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -X - 1; i++)
            *o++ = '0';
        memcpy(o, d, (size_t)last + 1);
        o += last + 1;
    }
    *o = '\0';
    return (int)(o - buf);
#else
    (void)buf;
    (void)cap;
    (void)v;
    (void)prec;
    return -1;
#endif
}

int sf_fmt_int(char *buf, size_t cap, long long v)
{
    char t[24];
    int n = 0, k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        t[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if ((size_t)n + (v < 0) + 1 > cap)
        return -1;
    if (v < 0)
        buf[k++] = '-';
    while (n)
        buf[k++] = t[--n];
    buf[k] = '\0';
    return k;
}

int sf_fmt_g_prec(const char *fmt)
{
    if (fmt[0] != '%' || fmt[1] != '.' || fmt[2] < '0' || fmt[2] > '9')
        return 0;
    if (fmt[3] == 'g' && !fmt[4])
        return fmt[2] - '0' >= 1 ? fmt[2] - '0' : 0;
    if (fmt[3] >= '0' && fmt[3] <= '9' && fmt[4] == 'g' && !fmt[5]) {
        const int p = (fmt[2] - '0') * 10 + (fmt[3] - '0');
        return p >= 1 && p <= 12 ? p : 0;
    }
    return 0;
}
