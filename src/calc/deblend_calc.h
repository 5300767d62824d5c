/* The arithmetic of the deblend stage that decides labels: the levels, the
 * pixel test, the branch sums and the Gaussian weights of gatherup. Built
 * from IEEE operations that round alike on the host and the device (the
 * measure stage's ms_* helpers: no FMA contraction; log and exp from +, -, *,
 * / only), so a deblended label map does not depend on the backend. */
#ifndef SKYFIND_DEBLEND_CALC_H
#define SKYFIND_DEBLEND_CALC_H

#include "skyfind/deblend.h"
#include "measure_calc.h"
#include "threshold_pixel.h"

/* ln(x) for finite x > 0: x = m 2^E with m in [sqrt(1/2), sqrt(2)), then
 * ln m = 2 atanh(u), u = (m - 1)/(m + 1), |u| < 0.172, by its series to
 * u^29 (truncation below 1e-23 relative), plus E ln 2. */
SF_FIX_FN double sf_db_log(double x)
{
    const double ln2 = 0.6931471805599453094;
    int E = 0;
    double m = frexp(x, &E), u, u2, p;
    if (m < 0.70710678118654752440) {
        m = ms_mul(m, 2.0);
        E--;
    }
    u = ms_div(ms_sub(m, 1.0), ms_add(m, 1.0));
    u2 = ms_mul(u, u);
    p = ms_div(1.0, 29.0);
    for (int k = 13; k >= 0; k--)
        p = ms_add(ms_div(1.0, (double)(2 * k + 1)), ms_mul(u2, p));
    return ms_add(ms_mul((double)E, ln2), ms_mul(2.0, ms_mul(u, p)));
}

/* e^x: x = n ln 2 + r with n = round(x / ln 2), |r| <= 0.35 (ln 2 in two
 * parts, the first with 11 trailing zero bits, so n ln2_hi is exact), then
 * the Taylor series of e^r to r^18 / 18! (truncation below 1e-22 relative)
 * and an exact scaling by 2^n. 0 below -745, +inf above 709.8. */
SF_FIX_FN double sf_db_exp(double x)
{
    double n, r, p;
    if (!ms_exp_reduce(x, &n, &r, &p))
        return p;
    p = 1.0;
    for (int k = 18; k >= 1; k--)
        p = ms_add(1.0, ms_div(ms_mul(r, p), (double)k));
    return ldexp(p, (int)n);
}

/* The float32 levels t_1 .. t_{n-1} (t[k - 1]) of an island with threshold
 * t0 > 0 and peak P > t0 (both in sigma): t0 (P / t0)^(k / n), level k from
 * l = ln(P / t0) (sf_db_level_log) by sf_db_level, so the GPU can compute
 * the levels in parallel and get the same floats. */
SF_FIX_FN double sf_db_level_log(float t0, float P)
{
    return sf_db_log(ms_div((double)P, (double)t0));
}
SF_FIX_FN float sf_db_level(float t0, double l, int k, int n)
{
    return (float)ms_mul((double)t0, sf_db_exp(ms_div(ms_mul((double)k, l), (double)n)));
}
SF_FIX_FN void sf_db_levels(float t0, float P, int n, float *t)
{
    const double l = sf_db_level_log(t0, P);
    for (int k = 1; k < n; k++)
        t[k - 1] = sf_db_level(t0, l, k, n);
}

/* d and sigma of a pixel, as the threshold stage forms them (float32): its
 * product SF_THR_FMUL (src/calc/threshold_pixel.h), the difference and quotient
 * rounded alike on both backends. */
SF_FIX_FN float sf_db_fsub(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
SF_FIX_FN float sf_db_fdiv(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

/* A pixel the deblending can use: d finite, sigma finite and positive. An
 * island holding any other (an rms map gone negative or infinite between
 * meshes of values near the float32 limit), or one whose top level times a
 * pixel's sigma overflows float32, is left whole on both backends: its
 * branch sums would not be finite. */
SF_FIX_FN int sf_db_usable(float d, float sig) { return isfinite(d) && isfinite(sig) && sig > 0; }

/* The pixel test of a level (threshold_pixel.h's rule). */
SF_FIX_FN int sf_db_above(float d, float sig, float t) { return d > SF_THR_FMUL(t, sig); }

/* A branch's term above level t: d - t sigma (float32), >= 0 for its pixels. */
SF_FIX_FN float sf_db_excess(float d, float sig, float t)
{
    return sf_db_fsub(d, SF_THR_FMUL(t, sig));
}

/* The Gaussian of an object for gatherup, from the exact sums of its branch
 * (S[0..5] = sum w, w dx, w dy, w dx^2, w dy^2, w dx dy, w = d 2^e, dx, dy
 * relative to the island's corner), its pixel count, level and peak (in
 * sigma). Writes the centre (mx, my, relative to the corner), cxx, cyy, cxy
 * and la = ln(amplitude); the weight at (dx, dy) is
 * la - (cxx dx'^2 + cyy dy'^2 + cxy dx' dy') / 2. */
typedef struct {
    double mx, my, cxx, cyy, cxy, la;
} sf_db_gauss;

SF_FIX_FN void sf_db_gauss_make(const sf_fix128 *S, int e, long long npix, float t, float peak,
                                sf_db_gauss *g)
{
    const double two_pi = 6.283185307179586477;
    double F = sf_fix_to_double(S[0], e), mx, my, x2, y2, xy, det, q, a2, b2, ab, la, lmax;
    mx = ms_div(sf_fix_to_double(S[1], e), F);
    my = ms_div(sf_fix_to_double(S[2], e), F);
    x2 = ms_sub(ms_div(sf_fix_to_double(S[3], e), F), ms_mul(mx, mx));
    y2 = ms_sub(ms_div(sf_fix_to_double(S[4], e), F), ms_mul(my, my));
    xy = ms_sub(ms_div(sf_fix_to_double(S[5], e), F), ms_mul(mx, my));
    if (!(x2 > 0))
        x2 = 0;
    if (!(y2 > 0))
        y2 = 0;
    det = ms_sub(ms_mul(x2, y2), ms_mul(xy, xy));
    if (!(det >= 0.00694)) { /* a line or a single pixel, as SExtractor */
        x2 = ms_add(x2, 0.0833333);
        y2 = ms_add(y2, 0.0833333);
        det = ms_sub(ms_mul(x2, y2), ms_mul(xy, xy));
    }
    q = ms_sqrt(ms_add(ms_mul(0.25, ms_mul(ms_sub(x2, y2), ms_sub(x2, y2))), ms_mul(xy, xy)));
    a2 = ms_add(ms_mul(0.5, ms_add(x2, y2)), q);
    b2 = ms_sub(ms_mul(0.5, ms_add(x2, y2)), q);
    ab = ms_sqrt(ms_mul(a2, b2 > 0 ? b2 : 0.0));
    g->mx = mx;
    g->my = my;
    g->cxx = ms_div(y2, det);
    g->cyy = ms_div(x2, det);
    g->cxy = ms_div(ms_mul(-2.0, xy), det);
    /* amplitude t exp(npix / (2 pi a b)), at most 4 peak */
    la = ab > 0 ? ms_add(sf_db_log((double)t), ms_div((double)npix, ms_mul(two_pi, ab)))
                : INFINITY;
    lmax = sf_db_log(ms_mul(4.0, (double)peak));
    g->la = la < lmax ? la : lmax;
}

SF_FIX_FN double sf_db_gauss_weight(const sf_db_gauss *g, double dx, double dy)
{
    const double u = ms_sub(dx, g->mx), v = ms_sub(dy, g->my);
    const double r = ms_add(ms_add(ms_mul(g->cxx, ms_mul(u, u)), ms_mul(g->cyy, ms_mul(v, v))),
                            ms_mul(g->cxy, ms_mul(u, v)));
    return ms_sub(g->la, ms_mul(0.5, r));
}

#endif
