/* Check suite for the catalogue writers' number formatting (src/io/numfmt.c):
 * sf_fmt_g against snprintf's "%.Pg" and sf_fmt_int against "%d", byte for
 * byte, on random doubles of every magnitude, the values catalogues hold,
 * exact halves (which it must leave to snprintf), the boundaries where %g
 * switches between its fixed and exponent forms and where rounding carries
 * into a new digit; and a catalogue written with it against the same rows
 * through snprintf. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sftest.h"
#include "../src/io/numfmt.h"

static unsigned long long rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* v through sf_fmt_g at precision p against snprintf; returns 1 when
 * sf_fmt_g left it to snprintf (-1) */
static int check_g(double v, int p)
{
    char a[64], b[64];
    const int n = sf_fmt_g(a, sizeof a, v, p), m = snprintf(b, sizeof b, "%.*g", p, v);
    if (n < 0)
        return 1;
    ck_assert_msg(n == m && strcmp(a, b) == 0, "%.17g at %%.%dg: \"%s\", snprintf \"%s\"", v, p,
                  a, b);
    return 0;
}

START_TEST(test_random_bits)
{
    long fell = 0, total = 0;
    for (int i = 0; i < 400000; i++) {
        uint64_t u = next();
        double v;
        memcpy(&v, &u, sizeof v);
        if (!isfinite(v))
            continue;
        for (int p = 1; p <= 12; p += (p < 9 ? 4 : 1)) {
            fell += check_g(v, p);
            total++;
        }
    }
    /* outside 1e-280..1e280 (a quarter of all doubles) goes to snprintf */
    ck_assert_msg(fell < total * 0.3, "%ld of %ld values left to snprintf", fell, total);
}
END_TEST

START_TEST(test_catalogue_values)
{
    long fell = 0, total = 0;
    for (int i = 0; i < 600000; i++) {
        /* fluxes, positions, errors, angles: 1e-9 .. 1e7, floats widened
         * and doubles, both signs */
        const double mag = pow(10.0, (double)(next() % 1700) / 100.0 - 9.0);
        double v = mag * (1.0 + (double)(next() >> 11) / 9007199254740992.0);
        if (i % 3 == 0)
            v = (double)(float)v;
        if (i & 1)
            v = -v;
        fell += check_g(v, 10) + check_g(v, 12) + check_g(v, 6);
        total += 3;
    }
    ck_assert_msg(fell < total / 1000, "%ld of %ld values left to snprintf", fell, total);
}
END_TEST

START_TEST(test_edges)
{
    static const double fixed[] = {0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1.5, 2.5, 9.5, 10.0, 100.0,
                                   1e-4, 1e-5, 9.99999999995e-5, 0.000123456789012, 123456789.0,
                                   1234567890.0, 12345678901.0, 9999999999.0, 9999999999.5,
                                   99999999999.0, 1e10, 1e11, 1e12, 9.9999999999e9, 1e-10,
                                   3.14159265358979, 2.718281828459045, 1e100, 1e-100, 1e279,
                                   1e-279, 6.02214076e23, 1.602176634e-19, 0.30000000000000004,
                                   4.35, 0.045, 1.0000000005, 1.00000000005, 5e-324, 1e308};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        for (int p = 1; p <= 12; p++) {
            check_g(fixed[i], p);
            check_g(-fixed[i], p);
        }
    /* the values next to every power of ten: %g's form switches there, and
     * 9.99..9 rounds up into the next digit */
    for (int e = -30; e <= 30; e++) {
        double v = pow(10.0, e);
        double lo = nextafter(v, 0.0), hi = nextafter(v, INFINITY);
        for (int p = 1; p <= 12; p++) {
            check_g(v, p);
            check_g(lo, p);
            check_g(hi, p);
            check_g(v * (1.0 - 0.5 * pow(10.0, -p)), p);
            check_g(v * (1.0 - 0.49 * pow(10.0, -p)), p);
            check_g(v * (1.0 - 0.51 * pow(10.0, -p)), p);
        }
    }
    /* exact halves at the last digit (to even, as printf), and floats
     * whose short binary fractions end in one */
    for (int i = 0; i < 20000; i++) {
        const double v = (double)(next() % 100000000000ULL) + 0.5;
        const float f = (float)((double)(next() % 100000000ULL) / 64.0);
        check_g(v, 11);
        check_g(v, 12);
        check_g(v / 1024.0, 10);
        for (int p = 4; p <= 12; p++) {
            check_g(f, p);
            check_g(-f / 4096.0f, p);
        }
    }
}
END_TEST

START_TEST(test_ints_and_formats)
{
    static const long long ints[] = {0, 1, -1, 9, 10, -10, 99, 100, 2147483647, -2147483647 - 1,
                                     9223372036854775807LL, -9223372036854775807LL - 1};
    char a[32], b[32];
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        ck_assert_int_eq(sf_fmt_int(a, sizeof a, ints[i]), snprintf(b, sizeof b, "%lld", ints[i]));
        ck_assert_str_eq(a, b);
    }
    for (int i = 0; i < 100000; i++) {
        const long long v = (long long)next() >> (next() % 63);
        ck_assert_int_eq(sf_fmt_int(a, sizeof a, v), snprintf(b, sizeof b, "%lld", v));
        ck_assert_str_eq(a, b);
    }
    ck_assert_int_eq(sf_fmt_int(a, 3, 123), -1); /* no room for the NUL */
    ck_assert_int_eq(sf_fmt_int(a, 4, -12), 3);
    ck_assert_int_eq(sf_fmt_g_prec("%.10g"), 10);
    ck_assert_int_eq(sf_fmt_g_prec("%.12g"), 12);
    ck_assert_int_eq(sf_fmt_g_prec("%.6g"), 6);
    ck_assert_int_eq(sf_fmt_g_prec("%.13g"), 0);
    ck_assert_int_eq(sf_fmt_g_prec("%.10f"), 0);
    ck_assert_int_eq(sf_fmt_g_prec("%d"), 0);
    ck_assert_int_eq(sf_fmt_g_prec("%.10gx"), 0);
    ck_assert_int_eq(sf_fmt_g_prec("%.0g"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("numfmt");
    TCase *t = tcase_create("cpu");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_random_bits);
    tcase_add_test(t, test_catalogue_values);
    tcase_add_test(t, test_edges);
    tcase_add_test(t, test_ints_and_formats);
    suite_add_tcase(s, t);
    return sftest_main(s, NULL, 0);
}
