/* The arithmetic of the measure stage shared by the CPU twin (cpu/measure.c)
 * and the GPU version (gpu/measure.cu): which sums are kept, their fixed-
 * point scales, and the one function that turns a label's totals into its
 * sf_source. Both backends compile this same code, with IEEE double
 * operations that cannot be fused (explicit __dmul_rn & co on the device, no
 * FMA on the host's x86-64 baseline) and an atan2 built from them, so the
 * catalogues agree bit for bit. */
#ifndef SKYFIND_MEASURE_CALC_H
#define SKYFIND_MEASURE_CALC_H

#include "skyfind/measure.h"
#include "fixsum.h"
#include "skyfind/background.h" /* sf_bkg_view_at */
/* A map's pixel from a CPU view (sf_bkg_view_at); never on the device */
#ifdef __CUDA_ARCH__
#define MS_VIEW_AT(v, r, x, y) (0.0f)
#else
#define MS_VIEW_AT(v, r, x, y) sf_bkg_view_at((v), (r), (x), (y))
#endif

/* The sums kept per label, relative to the peak pixel (dx = x - peak_x,
 * dy = y - peak_y): value sums with tv = m * 2^e, noise sums with
 * tr = r^2 * 2^er. Terms are products formed in this order: tv*dx,
 * (tv*dx)*dx, (tv*dy)*dy, (tv*dx)*dy (each rounded once, identically on both
 * backends), then rounded to integers (sf_fix_from_double). */
enum {
    MS_V, MS_VX, MS_VY, MS_VXX, MS_VYY, MS_VXY,
    MS_R, MS_RX, MS_RY, MS_RXX, MS_RYY, MS_RXY,
    MS_NSUM
};

/* Internal flag bits, never in the catalogue: the noise is not known at
 * some pixel of the island (errors NaN); a pixel is a seed local maximum. */
#define MS_FLAG_NOISE_BAD 0x100
#define MS_IS_PEAK 0x200

/* A seed pixel of the detection mask. threshold.h: 1 = above the detection
 * (seed) threshold, 2 = above only the flood threshold; a one-level mask is
 * all 1. This is the one place that reads the encoding. */
#define MS_IS_SEED(m) (((m) & 1) != 0)

/* The inputs of a run as plain pointers and float32 levels. */
typedef struct {
    const float *bkg, *rms;  /* maps, or NULL */
    size_t bstride, rstride;
    const sf_bkg_view *view; /* CPU: both maps before they are made (bkg, rms NULL), or NULL */
    const uint8_t *mask;     /* or NULL */
    size_t mstride;
    float level;             /* subtracted when subtract and no maps (0 without stats) */
    float level_out, sigma;  /* global level and noise, NaN when unknown */
    int subtract;
} ms_in;

/* Measured value of pixel (x, y) with image value v (float32 arithmetic).
 * A difference of two finite floats that overflows (v = 3e38 over a
 * background of -1e38) is clamped to +-FLT_MAX, so the pixel still counts
 * (the threshold took it: +inf > any level) and no label is left without a
 * measurable pixel; a non-finite v or background stays non-finite. */
SF_FIX_FN float ms_value(float v, const ms_in *in, int x, int y)
{
    float b, m;
    if (!in->subtract)
        return v;
    b = in->bkg    ? in->bkg[(size_t)y * in->bstride + (size_t)x]
        : in->view ? MS_VIEW_AT(in->view, 0, x, y)
                   : in->level;
    m = v - b;
    if (isinf(m) && isfinite(v) && isfinite(b))
        m = m > 0 ? 3.40282346638528859812e+38f : -3.40282346638528859812e+38f;
    return m;
}

/* Background level of pixel (x, y): the map, else level_out (the global
 * level, NaN when unknown). */
SF_FIX_FN float ms_level_at(const ms_in *in, int x, int y)
{
    return in->bkg    ? in->bkg[(size_t)y * in->bstride + (size_t)x]
           : in->view ? MS_VIEW_AT(in->view, 0, x, y)
                      : in->level_out;
}

/* Noise of pixel (x, y). */
SF_FIX_FN float ms_noise(const ms_in *in, int x, int y)
{
    return in->rms    ? in->rms[(size_t)y * in->rstride + (size_t)x]
           : in->view ? MS_VIEW_AT(in->view, 1, x, y)
                      : in->sigma;
}

/* The 8 neighbours of a measured pixel (x, y) of label l with value m:
 * SF_SRC_NAN when one of them is a NaN/blank image pixel, MS_IS_PEAK when
 * seed is set and m is strictly above every measurable neighbour of the
 * same label. */
SF_FIX_FN int ms_look_around(const float *img, size_t istride, const int32_t *lab,
                             size_t lstride, const ms_in *in, int nx, int ny, int x, int y,
                             int32_t l, float m, int seed)
{
    int nan = 0, ismax = seed;
    for (int dy = -1; dy <= 1; dy++) {
        const int yy = y + dy;
        if (yy < 0 || yy >= ny)
            continue;
        for (int dx = -1; dx <= 1; dx++) {
            const int xx = x + dx;
            float vq;
            if ((dx == 0 && dy == 0) || xx < 0 || xx >= nx)
                continue;
            vq = img[(size_t)yy * istride + (size_t)xx];
            if (!isfinite(vq)) {
                nan = 1;
                continue;
            }
            if (ismax && lab[(size_t)yy * lstride + (size_t)xx] == l) {
                const float mq = ms_value(vq, in, xx, yy);
                if (isfinite(mq) && !(m > mq))
                    ismax = 0;
            }
        }
    }
    return (nan ? SF_SRC_NAN : 0) | (ismax ? MS_IS_PEAK : 0);
}

/* Totals of one label after both passes. */
typedef struct {
    sf_fix128 s[MS_NSUM];
    uint64_t npix;
    float peak;             /* the peak's measured value (npix > 0) */
    int peak_x, peak_y;
    int xmin, xmax, ymin, ymax;
    int flags;              /* SF_SRC_NAN and MS_FLAG_NOISE_BAD as accumulated */
    int npeaks;             /* -1: no mask */
    float bkg, rms;         /* at the peak (NaN: unknown) */
} ms_totals;

/* Non-fusable double arithmetic (see the top of the file). */
SF_FIX_FN double ms_mul(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
SF_FIX_FN double ms_add(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
SF_FIX_FN double ms_sub(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}
SF_FIX_FN double ms_div(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
SF_FIX_FN double ms_sqrt(double a)
{
#ifdef __CUDA_ARCH__
    return __dsqrt_rn(a);
#else
    return sqrt(a);
#endif
}

/* The argument reduction of the exps that must round alike on both
 * backends (the deblending's sf_db_exp, the fit's sf_fit_exp): 0 with *out
 * the result for x <= -745 (0; NaN for NaN) and x > 709.78 (+inf); else 1
 * with x = n ln 2 + r, |r| <= 0.35 (ln 2 in two parts, the first with 11
 * trailing zero bits, so n ln2_hi is exact). e^x is then e^r 2^n. */
SF_FIX_FN int ms_exp_reduce(double x, double *n, double *r, double *out)
{
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10,
                 inv_ln2 = 1.4426950408889634074;
    if (!(x > -745.0)) {
        *out = x != x ? x : 0.0;
        return 0;
    }
    if (x > 709.78) {
        *out = INFINITY;
        return 0;
    }
    *n = floor(ms_add(ms_mul(x, inv_ln2), 0.5));
    *r = ms_sub(ms_sub(x, ms_mul(*n, ln2_hi)), ms_mul(*n, ln2_lo));
    return 1;
}

/* Bits to drop from the fixed-point scales on very large images, so that no
 * sum can overflow: a term is below 2^66 * D^2 (|dx|, |dy| < D = max(nx, ny)
 * <= 2^bD) and a label has at most nx*ny <= 2^bN terms, so the sums stay
 * below 2^(66 + 2 bD + bN), which must not exceed 2^126. 0 up to about
 * 16384 x 16384. */
SF_FIX_FN int ms_scale_shift(int nx, int ny)
{
    uint64_t n = (uint64_t)nx * (uint64_t)ny, d = (uint64_t)(nx > ny ? nx : ny);
    int bN = 0, bD = 0, s;
    while (bN < 64 && ((uint64_t)1 << bN) < n)
        bN++;
    while (bD < 64 && ((uint64_t)1 << bD) < d)
        bD++;
    s = 66 + 2 * bD + bN - 126;
    return s > 0 ? s : 0;
}

/* Add one pixel's six terms t, t dx, t dy, t dx^2, t dy^2, t dx dy to the
 * sums s[0..5] (t: the scaled value or noise^2). */
SF_FIX_FN void ms_add_terms(sf_fix128 *s, double t, double dx, double dy)
{
    const double tx = ms_mul(t, dx), ty = ms_mul(t, dy);
    sf_fix_add(&s[0], sf_fix_from_double(t));
    sf_fix_add(&s[1], sf_fix_from_double(tx));
    sf_fix_add(&s[2], sf_fix_from_double(ty));
    sf_fix_add(&s[3], sf_fix_from_double(ms_mul(tx, dx)));
    sf_fix_add(&s[4], sf_fix_from_double(ms_mul(ty, dy)));
    sf_fix_add(&s[5], sf_fix_from_double(ms_mul(tx, dy)));
}

/* atan(t) for 0 <= t <= 1 from +, -, *, / and sqrt only: three halvings
 * atan(t) = 2 atan(t / (1 + sqrt(1 + t^2))) bring t below tan(pi/32), then
 * the Taylor series to u^17 (truncation below 1e-19 relative). */
SF_FIX_FN double ms_atan_unit(double t)
{
    double u2, p;
    for (int k = 0; k < 3; k++)
        t = ms_div(t, ms_add(1.0, ms_sqrt(ms_add(1.0, ms_mul(t, t)))));
    u2 = ms_mul(t, t);
    p = ms_div(1.0, 17.0);
    for (int k = 7; k >= 0; k--)
        p = ms_sub(ms_div(1.0, (double)(2 * k + 1)), ms_mul(u2, p));
    return ms_mul(8.0, ms_mul(t, p));
}

/* atan2(y, x) in (-pi, pi] (x, y finite, not both zero), the same bits on
 * both backends. */
SF_FIX_FN double ms_atan2(double y, double x)
{
    const double pi = 3.141592653589793, half_pi = 1.5707963267948966;
    double ax = fabs(x), ay = fabs(y), r;
    r = ay <= ax ? ms_atan_unit(ms_div(ay, ax)) : ms_sub(half_pi, ms_atan_unit(ms_div(ax, ay)));
    if (x < 0)
        r = ms_sub(pi, r);
    return y < 0 ? -r : r;
}

/* sin and cos of x for |x| <= pi/2, the same bits on both backends: the
 * Taylor series to x^25 and x^24 by Horner in x^2, nested as x (1 - x^2/(2
 * 3) (1 - x^2/(4 5) (...))) with the reciprocals 1/((2k)(2k+1)) and
 * 1/((2k-1)(2k)) as constants (truncation below 1e-20 at pi/2; absolute
 * error a few 1e-16, which is all a position angle's cos and sin need). */
SF_FIX_FN void ms_sincos(double x, double *s, double *c)
{
    const double rs[12] = {0.16666666666666666,   0.05,
                           0.023809523809523808,  0.013888888888888888,
                           0.00909090909090909,   0.00641025641025641,
                           0.004761904761904762,  0.003676470588235294,
                           0.0029239766081871343, 0.002380952380952381,
                           0.001976284584980237,  0.0016666666666666668};
    const double rc[12] = {0.5,                   0.08333333333333333,
                           0.03333333333333333,   0.017857142857142856,
                           0.011111111111111112,  0.007575757575757576,
                           0.005494505494505495,  0.004166666666666667,
                           0.0032679738562091504, 0.002631578947368421,
                           0.0021645021645021645, 0.0018115942028985507};
    const double x2 = ms_mul(x, x);
    double ps = 1.0, pc = 1.0;
    for (int k = 11; k >= 0; k--) {
        ps = ms_sub(1.0, ms_mul(ms_mul(x2, rs[k]), ps));
        pc = ms_sub(1.0, ms_mul(ms_mul(x2, rc[k]), pc));
    }
    *s = ms_mul(x, ps);
    *c = pc;
}

SF_FIX_FN double ms_canon(double v) { return v == v ? v : sf_fix_nan(); }
SF_FIX_FN float ms_canonf(float v) { return v == v ? v : sf_fix_nanf(); }

/* The sf_source of label id from its totals; e and er are the scale
 * exponents of the value and noise sums. Writes every field (the caller
 * zeroes the padding-free struct first). */
SF_FIX_FN void ms_finish(const ms_totals *t, int id, int e, int er, int nx, int ny,
                         sf_source *s)
{
    const double qnan = sf_fix_nan();
    double F, mx, my, x2, y2, xy;
    int noise = !(t->flags & MS_FLAG_NOISE_BAD);
    s->id = id;
    s->npix = (long long)t->npix;
    s->flags = t->flags & (SF_SRC_NAN);
    s->npeaks = t->npeaks;
    s->parent = id; /* the runner sets both after a deblend stage */
    s->nchildren = 1;
    s->sign = 1; /* the runner sets -1 on the negative pass */
    s->x = s->y = s->x2 = s->y2 = s->xy = s->a = s->b = s->theta = qnan;
    s->snr = s->flux_err = s->x_err = s->y_err = qnan;
    if (t->npix == 0) {
        s->flux_sum = 0.0;
        s->peak = s->bkg = s->rms = sf_fix_nanf();
        s->peak_x = s->peak_y = -1;
        s->xmin = s->xmax = s->ymin = s->ymax = -1;
        return;
    }
    s->peak = t->peak;
    s->peak_x = t->peak_x;
    s->peak_y = t->peak_y;
    s->xmin = t->xmin;
    s->xmax = t->xmax;
    s->ymin = t->ymin;
    s->ymax = t->ymax;
    s->bkg = ms_canonf(t->bkg);
    s->rms = ms_canonf(t->rms);
    if (t->xmin == 0 || t->ymin == 0 || t->xmax == nx - 1 || t->ymax == ny - 1)
        s->flags |= SF_SRC_EDGE;
    if (t->peak_x == 0 || t->peak_y == 0 || t->peak_x == nx - 1 || t->peak_y == ny - 1)
        s->flags |= SF_SRC_TRUNCATED;
    if (t->npeaks > 1)
        s->flags |= SF_SRC_MERGED;
    if (t->rms > 0)
        s->snr = ms_div((double)t->peak, (double)t->rms);
    if (noise)
        s->flux_err = ms_sqrt(sf_fix_to_double(t->s[MS_R], er));

    F = sf_fix_to_double(t->s[MS_V], e);
    s->flux_sum = F;
    if (sf_fix_is_zero(t->s[MS_V]))
        return;
    mx = ms_div(sf_fix_to_double(t->s[MS_VX], e), F);
    my = ms_div(sf_fix_to_double(t->s[MS_VY], e), F);
    s->x = ms_add((double)t->peak_x, mx);
    s->y = ms_add((double)t->peak_y, my);
    x2 = ms_sub(ms_div(sf_fix_to_double(t->s[MS_VXX], e), F), ms_mul(mx, mx));
    y2 = ms_sub(ms_div(sf_fix_to_double(t->s[MS_VYY], e), F), ms_mul(my, my));
    xy = ms_sub(ms_div(sf_fix_to_double(t->s[MS_VXY], e), F), ms_mul(mx, my));
    s->x2 = x2;
    s->y2 = y2;
    s->xy = xy;

    /* SExtractor's A, B, THETA (analyse.c / extract.c) */
    {
        double xm2 = x2, ym2 = y2, d, q, p, th;
        int singular = 0;
        if (ms_sub(ms_mul(xm2, ym2), ms_mul(xy, xy)) < 0.00694) {
            xm2 = ms_add(xm2, 0.0833333);
            ym2 = ms_add(ym2, 0.0833333);
            singular = 1;
        }
        d = ms_sub(xm2, ym2);
        /* SExtractor takes pi/4 whenever x2 == y2; only a circle (xy == 0 too)
         * has no angle: a diagonal island with xy < 0 keeps its -45 */
        th = (fabs(d) > 0.0 || xy != 0.0) ? ms_mul(0.5, ms_atan2(ms_mul(2.0, xy), d))
                                          : 0.7853981633974483;
        th = ms_mul(th, 57.29577951308232);
        if (th > 90.0)
            th = 90.0;
        if (th <= -90.0)
            th = 90.0;
        q = ms_sqrt(ms_add(ms_mul(0.25, ms_mul(d, d)), ms_mul(xy, xy)));
        p = ms_mul(0.5, ms_add(xm2, ym2));
        s->a = ms_sqrt(ms_add(p, q));
        s->b = ms_sqrt(ms_sub(p, q));
        s->theta = th;
        if (!(s->a == s->a && s->b == s->b)) /* not positive definite */
            s->a = s->b = s->theta = qnan;

        /* position errors: SExtractor's ERRX2, ERRY2, ERRXY with r_i^2 */
        if (noise) {
            double R0 = sf_fix_to_double(t->s[MS_R], er);
            double Rx = sf_fix_to_double(t->s[MS_RX], er), Ry = sf_fix_to_double(t->s[MS_RY], er);
            double F2 = ms_mul(F, F), ex2, ey2, exy;
            ex2 = ms_add(ms_sub(sf_fix_to_double(t->s[MS_RXX], er), ms_mul(ms_mul(2.0, mx), Rx)),
                         ms_mul(ms_mul(mx, mx), R0));
            ey2 = ms_add(ms_sub(sf_fix_to_double(t->s[MS_RYY], er), ms_mul(ms_mul(2.0, my), Ry)),
                         ms_mul(ms_mul(my, my), R0));
            exy = ms_add(ms_sub(ms_sub(sf_fix_to_double(t->s[MS_RXY], er), ms_mul(mx, Ry)),
                                ms_mul(my, Rx)),
                         ms_mul(ms_mul(mx, my), R0));
            ex2 = ms_div(ex2 > 0 ? ex2 : 0.0, F2);
            ey2 = ms_div(ey2 > 0 ? ey2 : 0.0, F2);
            exy = ms_div(exy, F2);
            if (singular) {
                double es = ms_div(ms_mul(R0, 0.08333), F2);
                if (ms_sub(ms_mul(ex2, ey2), ms_mul(exy, exy)) < ms_mul(es, es)) {
                    ex2 = ms_add(ex2, es);
                    ey2 = ms_add(ey2, es);
                }
            }
            s->x_err = ms_canon(ms_sqrt(ex2));
            s->y_err = ms_canon(ms_sqrt(ey2));
        }
    }
    s->x = ms_canon(s->x);
    s->y = ms_canon(s->y);
    s->x2 = ms_canon(s->x2);
    s->y2 = ms_canon(s->y2);
    s->xy = ms_canon(s->xy);
    s->snr = ms_canon(s->snr);
}

#ifdef __cplusplus
extern "C" {
#endif
/* Argument checks shared by both backends (cpu/measure.c). */
sf_status sf_measure_check(const sf_image *img, const sf_labels *labels, int nlabels,
                           const sf_measure_aux *aux, const sf_source *out, sf_loc loc);
/* The ms_in of aux and p (either may be NULL). */
void sf_measure_inputs(const sf_measure_aux *aux, const sf_measure_params *p, ms_in *in);
#ifdef __cplusplus
}
#endif

#endif
