/* The arithmetic of the fit stage that both backends share: the Gaussian
 * model and its derivatives, an exp of its own, the parameter bounds and
 * their projection, the initial shapes, the Marquardt matrix and the
 * Cholesky steps. IEEE operations that round alike on the host and the
 * device (measure_calc.h's ms_*: no FMA contraction), so a fitted component
 * does not depend on the backend. The order of every sum is fixed: lane l
 * of 32 adds the pixels l, l + 32, l + 64, ... in order, then the 32 lane
 * sums are reduced by sf_fit_butterfly (what a warp's shuffle-xor gives). */
#ifndef SKYFIND_FIT_CALC_H
#define SKYFIND_FIT_CALC_H

#include "skyfind/fit.h"
#include "measure_calc.h"

#define SF_FIT_NP 6            /* parameters of a component: A, x0, y0, P, Q, R */
#define SF_FIT_LANES 32        /* lanes of every sum (a warp) */
#define SF_FIT_LAMBDA0 1e-3
#define SF_FIT_LAMBDA_MAX 1e10
#define SF_FIT_LAMBDA_MIN 1e-12
#define SF_FIT_RTOL 1e-9       /* converged: an accepted step lowers chi^2 by less than this */
#define SF_FIT_ATOL 1e-2       /* ... relative, or by less than this (chi^2 units: it rises
                                  by 1 at one error from the minimum) */
#define SF_FIT_F2S 0.42466090014400952136 /* FWHM -> sigma: 1 / sqrt(8 ln 2) */

/* e^x: ms_exp_reduce's x = n ln 2 + r, then the Taylor series of e^r to
 * r^13 (truncation below 4e-18 relative) by Horner with the coefficients
 * 1/k! as constants, and an exact scaling by 2^n. */
SF_FIX_FN double sf_fit_exp(double x)
{
    const double c[14] = {1.0,
                          1.0,
                          0.5,
                          1.6666666666666666e-01,
                          4.1666666666666664e-02,
                          8.3333333333333332e-03,
                          1.3888888888888889e-03,
                          1.9841269841269841e-04,
                          2.4801587301587302e-05,
                          2.7557319223985893e-06,
                          2.7557319223985888e-07,
                          2.5052108385441720e-08,
                          2.0876756987868100e-09,
                          1.6059043836821613e-10};
    double n, r, p;
    if (!ms_exp_reduce(x, &n, &r, &p))
        return p;
    p = c[13];
    for (int k = 12; k >= 0; k--)
        p = ms_add(c[k], ms_mul(r, p));
    return ldexp(p, (int)n);
}

/* One pixel of an island: the model of nc components at (x, y), the
 * weighted residual (m - model) * w and, when J is not NULL, the weighted
 * derivatives (d model / d par) * w, SF_FIT_NP per component, parameter k
 * at J[k * js]. The model is summed over the components in order. */
SF_FIX_FN double sf_fit_pixel(const double *par, int nc, double x, double y, double m, double w,
                              double *J, size_t js)
{
    double model = 0.0;
    for (int c = 0; c < nc; c++) {
        const double *q = par + SF_FIT_NP * c;
        const double dx = ms_sub(x, q[1]), dy = ms_sub(y, q[2]);
        const double dxx = ms_mul(dx, dx), dyy = ms_mul(dy, dy), dxy = ms_mul(dx, dy);
        const double qf = ms_add(ms_add(ms_mul(q[3], dxx), ms_mul(q[4], dyy)),
                                 ms_mul(ms_mul(2.0, q[5]), dxy));
        const double e = sf_fit_exp(ms_mul(-0.5, qf)), f = ms_mul(q[0], e);
        model = ms_add(model, f);
        if (J) {
            const double fw = ms_mul(f, w);
            double *j = J + (size_t)SF_FIT_NP * c * js;
            j[0] = ms_mul(e, w);
            j[js] = ms_mul(fw, ms_add(ms_mul(q[3], dx), ms_mul(q[5], dy)));
            j[2 * js] = ms_mul(fw, ms_add(ms_mul(q[5], dx), ms_mul(q[4], dy)));
            j[3 * js] = ms_mul(ms_mul(-0.5, fw), dxx);
            j[4 * js] = ms_mul(ms_mul(-0.5, fw), dyy);
            j[5 * js] = ms_mul(ms_mul(-1.0, fw), dxy);
        }
    }
    return ms_mul(ms_sub(m, model), w);
}

/* The bounds of an island's parameters (sf_fit_bounds_box). */
typedef struct {
    double amax;               /* 0 <= A <= amax */
    double xlo, xhi, ylo, yhi; /* the centre */
    double lmin, lmax;         /* eigenvalues of [[P, R], [R, Q]]: 1/smax^2 .. 1/smin^2 */
} sf_fit_bounds;

/* The bounds of an island from its box [x0, x1] x [y0, y1] and largest m
 * (min and max: they do not depend on the order), smin and smax as fit.h
 * says from the beam's FWHM axes in pixels (in; 0: none). */
SF_FIX_FN void sf_fit_bounds_box(sf_fit_bounds *b, int x0, int x1, int y0, int y1, float mmax,
                                 const sf_fit_in *in)
{
    const double beam_maj = in->beam_maj, beam_min = in->beam_min;
    double smin = beam_min > 0 ? ms_mul(0.8, ms_mul(beam_min, SF_FIT_F2S)) : 0.3;
    double smax = (double)((x1 - x0 > y1 - y0 ? x1 - x0 : y1 - y0) + 1);
    const double bmax = beam_maj > 0 ? ms_mul(2.0, ms_mul(beam_maj, SF_FIT_F2S)) : 0.0;
    if (smax < bmax)
        smax = bmax;
    if (smax < ms_mul(2.0, smin))
        smax = ms_mul(2.0, smin);
    b->amax = mmax > 0 ? ms_mul(2.0, (double)mmax) : 0.0;
    b->xlo = (double)x0 - 1.0;
    b->xhi = (double)x1 + 1.0;
    b->ylo = (double)y0 - 1.0;
    b->yhi = (double)y1 + 1.0;
    b->lmin = ms_div(1.0, ms_mul(smax, smax));
    b->lmax = ms_div(1.0, ms_mul(smin, smin));
}

SF_FIX_FN double sf_fit_clamp(double v, double lo, double hi, int *hit)
{
    if (!(v >= lo)) { /* NaN goes to the lower bound */
        *hit = 1;
        return lo;
    }
    if (v > hi) {
        *hit = 1;
        return hi;
    }
    return v;
}

/* The eigen decomposition of [[P, R], [R, Q]]: mean m, half difference
 * d >= 0 of the eigenvalues (m + d, m - d), and cos, sin of twice the angle
 * of the larger one's axis (1, 0 for a circle). */
SF_FIX_FN void sf_fit_eig(double P, double Q, double R, double *m, double *d, double *c2,
                          double *s2)
{
    const double h = ms_mul(0.5, ms_sub(P, Q));
    *m = ms_mul(0.5, ms_add(P, Q));
    *d = ms_sqrt(ms_add(ms_mul(h, h), ms_mul(R, R)));
    if (*d > 0) {
        *c2 = ms_div(h, *d);
        *s2 = ms_div(R, *d);
    } else {
        *c2 = 1.0;
        *s2 = 0.0;
    }
}

/* Put a component's parameters inside the bounds; returns 1 when one was
 * moved. */
SF_FIX_FN int sf_fit_project(double *q, const sf_fit_bounds *b)
{
    int hit = 0, hs = 0;
    double m, d, c2, s2, l1, l2;
    q[0] = sf_fit_clamp(q[0], 0.0, b->amax, &hit);
    q[1] = sf_fit_clamp(q[1], b->xlo, b->xhi, &hit);
    q[2] = sf_fit_clamp(q[2], b->ylo, b->yhi, &hit);
    sf_fit_eig(q[3], q[4], q[5], &m, &d, &c2, &s2);
    l1 = sf_fit_clamp(ms_add(m, d), b->lmin, b->lmax, &hs);
    l2 = sf_fit_clamp(ms_sub(m, d), b->lmin, b->lmax, &hs);
    if (hs) {
        m = ms_mul(0.5, ms_add(l1, l2));
        d = ms_mul(0.5, ms_sub(l1, l2));
        q[3] = ms_add(m, ms_mul(d, c2));
        q[4] = ms_sub(m, ms_mul(d, c2));
        q[5] = ms_mul(d, s2);
    }
    return hit | hs;
}

/* 1 when a parameter of the component lies on its bound. */
SF_FIX_FN int sf_fit_on_bound(const double *q, const sf_fit_bounds *b)
{
    double m, d, c2, s2;
    if (q[0] <= 0.0 || q[0] >= b->amax || q[1] <= b->xlo || q[1] >= b->xhi || q[2] <= b->ylo ||
        q[2] >= b->yhi)
        return 1;
    sf_fit_eig(q[3], q[4], q[5], &m, &d, &c2, &s2);
    return ms_add(m, d) >= b->lmax || ms_sub(m, d) <= b->lmin;
}

/* A Gaussian's (P, Q, R) from its covariance [[xx, xy], [xy, yy]] (pix^2). */
SF_FIX_FN void sf_fit_from_cov(double xx, double yy, double xy, double *q)
{
    const double det = ms_sub(ms_mul(xx, yy), ms_mul(xy, xy));
    q[3] = ms_div(yy, det);
    q[4] = ms_div(xx, det);
    q[5] = ms_div(ms_mul(-1.0, xy), det);
}

/* The covariance of a Gaussian of FWHM axes maj, min (pix) whose major axis
 * lies at angle ang (deg counter-clockwise from +x): cos and sin given. */
SF_FIX_FN void sf_fit_cov(double maj, double min, double cs, double sn, double *xx, double *yy,
                          double *xy)
{
    const double a = ms_mul(maj, SF_FIT_F2S), b = ms_mul(min, SF_FIT_F2S);
    const double a2 = ms_mul(a, a), b2 = ms_mul(b, b);
    *xx = ms_add(ms_mul(a2, ms_mul(cs, cs)), ms_mul(b2, ms_mul(sn, sn)));
    *yy = ms_add(ms_mul(a2, ms_mul(sn, sn)), ms_mul(b2, ms_mul(cs, cs)));
    *xy = ms_mul(ms_sub(a2, b2), ms_mul(cs, sn));
}

/* The beam's covariance in pixels (cs, sn of its angle computed once on the
 * host), or 0 without a beam. */
typedef struct {
    double xx, yy, xy;
} sf_fit_cov2;

/* Initial parameters of a component at pixel (px, py) with amplitude amp:
 * the shape of the larger (by determinant) of the moments (x2, y2, xy; NaN
 * or not positive: unused) and the beam (xx = 0: none), at least a 1.5-px
 * sigma circle when neither is usable; then projected into the bounds. */
SF_FIX_FN void sf_fit_guess(double *q, double amp, int px, int py, double x2, double y2,
                            double xy, const sf_fit_cov2 *beam, const sf_fit_bounds *b)
{
    double xx = 2.25, yy = 2.25, cxy = 0.0, best = -1.0, det;
    det = ms_sub(ms_mul(x2, y2), ms_mul(xy, xy));
    if (x2 > 0 && y2 > 0 && det > 0 && det < INFINITY) {
        xx = x2, yy = y2, cxy = xy, best = det;
    }
    if (beam->xx > 0) {
        const double bd = ms_sub(ms_mul(beam->xx, beam->yy), ms_mul(beam->xy, beam->xy));
        if (bd > best)
            xx = beam->xx, yy = beam->yy, cxy = beam->xy;
    } else if (best > 0 && best < 5.0625) { /* at least a 1.5-px sigma without a beam */
        xx = xx > 2.25 ? xx : 2.25;
        yy = yy > 2.25 ? yy : 2.25;
        if (ms_sub(ms_mul(xx, yy), ms_mul(cxy, cxy)) <= 0)
            cxy = 0.0;
    }
    q[0] = amp;
    q[1] = (double)px;
    q[2] = (double)py;
    sf_fit_from_cov(xx, yy, cxy, q);
    sf_fit_project(q, b);
}

/* Index of entry (i, j), j <= i, of a packed lower triangle. */
SF_FIX_FN int sf_fit_tri(int i, int j) { return i * (i + 1) / 2 + j; }

/* The last step of every sum: the 32 lane sums t[0..31] to one value,
 * t[l] += t[l + off] for off = 16, 8, 4, 2, 1 (what lane 0 holds after a
 * shuffle-xor butterfly). */
SF_FIX_FN double sf_fit_butterfly(double *t)
{
    for (int off = SF_FIT_LANES / 2; off > 0; off >>= 1)
        for (int l = 0; l < off; l++)
            t[l] = ms_add(t[l], t[l + off]);
    return t[0];
}

/* The damped matrix's diagonal entry: JTJ_jj + lambda max(JTJ_jj, floor). */
SF_FIX_FN double sf_fit_damped(double jj, double lambda, double dfloor)
{
    return ms_add(jj, ms_mul(lambda, jj > dfloor ? jj : dfloor));
}

/* The Marquardt diagonal floor: 1e-12 of the largest JTJ_jj (positive). */
SF_FIX_FN double sf_fit_dfloor(double dmax)
{
    return dmax > 0 && dmax < INFINITY ? ms_mul(1e-12, dmax) : 1e-300;
}

/* The island's state between iterations. */
typedef struct {
    double lambda, chi2;
    int niter, status, done;
} sf_fit_lm;

/* After the trial chi^2 ct of a step from chi^2: 1 when it is accepted
 * (then lambda /10, and done when the gain is below SF_FIT_RTOL of chi^2
 * or below SF_FIT_ATOL), else
 * lambda x10 (done when it passes SF_FIT_LAMBDA_MAX: no step helps). */
SF_FIX_FN int sf_fit_judge(sf_fit_lm *s, double ct)
{
    if (ct == ct && ct < s->chi2) {
        const double gain = ms_sub(s->chi2, ct);
        if (gain <= ms_mul(SF_FIT_RTOL, s->chi2) || gain <= SF_FIT_ATOL)
            s->done = 1;
        s->chi2 = ct;
        s->lambda = ms_mul(s->lambda, 0.1);
        if (s->lambda < SF_FIT_LAMBDA_MIN)
            s->lambda = SF_FIT_LAMBDA_MIN;
        return 1;
    }
    s->lambda = ms_mul(s->lambda, 10.0);
    if (s->lambda > SF_FIT_LAMBDA_MAX)
        s->done = 1;
    return 0;
}

/* A local maximum's key for the brightest-first order: larger m first,
 * then the smaller index (raster order or label). Returns 1 when (ma, ia)
 * comes before (mb, ib). */
SF_FIX_FN int sf_fit_before(float ma, long long ia, float mb, long long ib)
{
    return ma > mb || (ma == mb && ia < ib);
}

/* An island pixel: position, measured value m and weight w = 1 / rms. */
typedef struct {
    int x, y;
    float m;
    double w;
} sf_fit_px;

/* A pixel the fit uses: m and its rms finite, rms > 0 (both written). */
SF_FIX_FN int sf_fit_usable(float v, const ms_in *mi, int x, int y, float *m, float *r)
{
    *m = ms_value(v, mi, x, y);
    *r = ms_noise(mi, x, y);
    return isfinite(*m) && isfinite(*r) && *r > 0;
}

SF_FIX_FN void sf_fit_px_set(sf_fit_px *p, int x, int y, float m, float r)
{
    p->x = x;
    p->y = y;
    p->m = m;
    p->w = ms_div(1.0, (double)r);
}

/* A component's seed: its peak m and key (label for objects, linear pixel
 * index for maxima). */
typedef struct {
    float m;
    long long key;
} sf_fit_seed;

/* Insert (m, key) into the brightest-first list s[0..*n) of at most K;
 * *more set when one falls off. */
SF_FIX_FN void sf_fit_seed_insert(sf_fit_seed *s, int *n, int K, float m, long long key,
                                  int *more)
{
    int i = *n;
    if (i == K) {
        *more = 1;
        if (!sf_fit_before(m, key, s[K - 1].m, s[K - 1].key))
            return;
        i = K - 1;
    } else {
        (*n)++;
    }
    while (i > 0 && sf_fit_before(m, key, s[i - 1].m, s[i - 1].key)) {
        s[i] = s[i - 1];
        i--;
    }
    s[i].m = m;
    s[i].key = key;
}

/* Island k's local maximum at (x, y) with value m (components=maxima): m
 * >= nsig * rms and m above every usable pixel of the island within h
 * pixels in x and y (>= for those after it in raster order: ties go to the
 * first); h = sf_fit_max_reach. */
SF_FIX_FN int sf_fit_is_max(const float *img, size_t istride, const int32_t *lab, size_t lstride,
                            const ms_in *mi, const int *isl_of, int nx, int ny, int x, int y,
                            int k, float m, double nsig, int h)
{
    const float r = ms_noise(mi, x, y);
    if (!((double)m >= ms_mul(nsig, (double)r)))
        return 0;
    for (int dy = -h; dy <= h; dy++)
        for (int dx = -h; dx <= h; dx++) {
            const int xx = x + dx, yy = y + dy;
            int32_t l;
            float mq, rq;
            if ((dx == 0 && dy == 0) || xx < 0 || yy < 0 || xx >= nx || yy >= ny)
                continue;
            l = lab[(size_t)yy * lstride + (size_t)xx];
            if (l <= 0 || isl_of[l] != k)
                continue;
            if (!sf_fit_usable(img[(size_t)yy * istride + (size_t)xx], mi, xx, yy, &mq, &rq))
                continue;
            if (dy < 0 || (dy == 0 && dx < 0) ? !(m > mq) : !(m >= mq))
                return 0;
        }
    return 1;
}

/* The reach of a local maximum (components=maxima): half the beam's minor
 * FWHM, rounded, at least 1 pixel (the 8 neighbours) and at most 8: one
 * component per beam, as Aegean's summits (regions of negative curvature)
 * are, not one per noise bump of an extended source. */
SF_FIX_FN int sf_fit_max_reach(const sf_fit_in *in)
{
    const double b = in->beam_min > 0 ? in->beam_min : in->beam_maj;
    const int h = b > 0 ? (int)floor(ms_add(ms_mul(0.5, b), 0.5)) : 1;
    return h < 1 ? 1 : h > 8 ? 8 : h;
}

/* Forward and back substitution with the packed Cholesky factor L of
 * order np: L L^T x = b. */
SF_FIX_FN void sf_fit_substitute(const double *L, const double *b, double *x, int np)
{
    for (int i = 0; i < np; i++) {
        double s = b[i];
        for (int j = 0; j < i; j++)
            s = ms_sub(s, ms_mul(L[sf_fit_tri(i, j)], x[j]));
        x[i] = ms_div(s, L[sf_fit_tri(i, i)]);
    }
    for (int i = np - 1; i >= 0; i--) {
        double s = x[i];
        for (int j = np - 1; j > i; j--)
            s = ms_sub(s, ms_mul(L[sf_fit_tri(j, i)], x[j]));
        x[i] = ms_div(s, L[sf_fit_tri(i, i)]);
    }
}


/* Background and noise at a pixel: the maps, else the global level (NaN
 * when unknown) and sigma. */
SF_FIX_FN void sf_fit_at(const ms_in *mi, int x, int y, float *bkg, float *rms)
{
    *bkg = ms_level_at(mi, x, y);
    *rms = ms_noise(mi, x, y);
}

/* Initial parameters of the nc components of an island from their seeds. */
SF_FIX_FN void sf_fit_seed_guess(const sf_fit_seed *sd, int nc, const sf_source *src, int nx,
                                 int mode, const sf_fit_cov2 *beam, const sf_fit_bounds *b,
                                 double *par)
{
    for (int c = 0; c < nc; c++) {
        double *q = par + SF_FIT_NP * c;
        if (mode == SF_FIT_OBJECTS) {
            const sf_source *s = &src[sd[c].key - 1];
            int px = s->peak_x, py = s->peak_y;
            if (px < 0) { /* no measurable pixel: the box's centre */
                px = (int)floor(ms_mul(0.5, ms_add(b->xlo, b->xhi)));
                py = (int)floor(ms_mul(0.5, ms_add(b->ylo, b->yhi)));
            }
            sf_fit_guess(q, (double)s->peak, px, py, s->x2, s->y2, s->xy, beam, b);
        } else {
            sf_fit_guess(q, (double)sd[c].m, (int)(sd[c].key % nx), (int)(sd[c].key / nx), NAN,
                         NAN, NAN, beam, b);
        }
    }
}

/* The seed pixel of component c. */
SF_FIX_FN void sf_fit_seed_pixel(const sf_fit_seed *sd, const sf_source *src, int nx, int mode,
                                 const double *q, int *px, int *py)
{
    if (mode == SF_FIT_OBJECTS) {
        *px = src[sd->key - 1].peak_x;
        *py = src[sd->key - 1].peak_y;
        if (*px < 0) {
            *px = (int)floor(q[1] + 0.5);
            *py = (int)floor(q[2] + 0.5);
        }
    } else {
        *px = (int)(sd->key % nx);
        *py = (int)(sd->key / nx);
    }
}

/* The components of island k as fitted (the fitted fields of sf_component;
 * the rest zero). */
SF_FIX_FN void sf_fit_write(sf_component *out, int k, int nc, long long npix, const double *par,
                            const sf_fit_bounds *b, const sf_fit_lm *s, double chi2,
                            double resid_ss, int more, const sf_fit_seed *sd,
                            const sf_source *src, const int32_t *lab, size_t lstride,
                            const ms_in *mi, int nx, int mode)
{
    for (int c = 0; c < nc; c++) {
        sf_component *o = &out[c];
        const double *q = par + SF_FIT_NP * c;
        int px, py, l;
        memset(o, 0, sizeof *o);
        sf_fit_seed_pixel(&sd[c], src, nx, mode, q, &px, &py);
        l = mode == SF_FIT_OBJECTS ? (int)sd[c].key : lab[(size_t)py * lstride + (size_t)px];
        o->island = k;
        o->component = c + 1;
        o->ncomp = nc;
        o->source = l;
        o->status = s->status;
        o->niter = s->niter;
        o->flags = (l > 0 ? src[l - 1].flags : 0) | (sf_fit_on_bound(q, b) ? SF_COMP_AT_BOUND : 0) |
                   (more ? SF_COMP_TOO_MANY : 0);
        o->sign = 1;
        o->px = px;
        o->py = py;
        o->npix = (int)npix;
        sf_fit_at(mi, px, py, &o->bkg, &o->rms);
        o->amp = q[0];
        o->x0 = q[1];
        o->y0 = q[2];
        o->cP = q[3];
        o->cQ = q[4];
        o->cR = q[5];
        o->chi2 = chi2;
        o->resid_ss = resid_ss;
    }
}

/* ---- the derived values (sf_fit_finish on the host, fit_finish on the GPU)
 * From +, -, *, /, sqrt and measure_calc.h's ms_atan2 and ms_sincos only,
 * so the components the GPU finishes on the device are the CPU's bit for
 * bit; every derived value a NaN of one pattern when it is one. */

/* Condon's rho^2 with exponents (aM, am) in {1.5, 2.5} x {0.5, 1.5, 2.5}
 * (half-integers: a power is a product and one square root); nM, nm = the
 * noise's correlation FWHM along the component's major and minor axes (0:
 * white noise). */
SF_FIX_FN double sf_fit_half_pow(double v, double sv, int twice)
{ /* v^(twice/2) from v and sqrt(v), twice odd */
    double r = sv;
    for (int k = 1; k < twice; k += 2)
        r = ms_mul(r, v);
    return r;
}

SF_FIX_FN double sf_fit_condon_rho2(double tM, double tm, double snr2, double nM, double nm,
                                    int aM2, int am2)
{
    double A, B;
    if (!(nM > 0)) /* independent pixels of side 1: pi / (8 ln 2) tM tm snr2 */
        return ms_mul(ms_mul(ms_mul(ms_div(3.141592653589793, ms_mul(8.0, 0.6931471805599453)), tM),
                             tm), snr2);
    A = ms_add(1.0, ms_div(ms_mul(nM, nM), ms_mul(tM, tM)));
    B = ms_add(1.0, ms_div(ms_mul(nm, nm), ms_mul(tm, tm)));
    return ms_mul(ms_mul(ms_mul(ms_div(ms_mul(tM, tm), ms_mul(ms_mul(4.0, nM), nm)),
                                sf_fit_half_pow(A, ms_sqrt(A), aM2)),
                         sf_fit_half_pow(B, ms_sqrt(B), am2)),
                  snr2);
}

/* The FWHM of the beam's Gaussian along direction (cs, sn): its variance
 * along that line (cov in sigma^2). */
SF_FIX_FN double sf_fit_beam_fwhm_along(const sf_fit_cov2 *b, double cs, double sn)
{
    const double v = ms_add(ms_add(ms_mul(ms_mul(cs, cs), b->xx), ms_mul(ms_mul(ms_mul(2.0, cs), sn), b->xy)),
                            ms_mul(ms_mul(sn, sn), b->yy));
    return v > 0 ? ms_div(ms_sqrt(v), SF_FIT_F2S) : 0.0;
}

/* An angle in degrees (from ms_atan2 in radians, halved) into (-90, 90]. */
SF_FIX_FN double sf_fit_deg_half(double s2, double c2, double add)
{
    double a = ms_add(ms_div(ms_mul(ms_mul(0.5, ms_atan2(s2, c2)), 180.0), 3.141592653589793), add);
    while (a > 90.0)
        a = ms_sub(a, 180.0);
    while (a <= -90.0)
        a = ms_add(a, 180.0);
    return a;
}

/* The derived values of one component from its fitted fields: position,
 * peak, FWHM axes and angle (deg from +x, (-90, 90]), integrated flux,
 * Condon's errors (noise correlated over the beam when corr) and, with a
 * beam (bc: its covariance), the deconvolved size. Each component alone:
 * the same bits on any thread and either backend. */
SF_FIX_FN void sf_fit_finish_one(sf_component *o, const sf_fit_cov2 *bc, int beam, int corr)
{
    const double qnan = sf_fix_nan(), pi = 3.141592653589793, ln2 = 0.6931471805599453;
    double m, d, c2, s2, smaj, smin, cs, sn, snr2;
    sf_fit_eig(o->cP, o->cQ, o->cR, &m, &d, &c2, &s2);
    o->maj = ms_div(1.0, ms_mul(ms_sqrt(ms_sub(m, d)), SF_FIT_F2S));
    o->min = ms_div(1.0, ms_mul(ms_sqrt(ms_add(m, d)), SF_FIT_F2S));
    o->pa = d > 0 ? sf_fit_deg_half(s2, c2, 90.0) : 0.0; /* the major axis */
    smaj = ms_mul(o->maj, SF_FIT_F2S);
    smin = ms_mul(o->min, SF_FIT_F2S);
    o->x = o->x0;
    o->y = o->y0;
    o->peak = o->amp;
    o->flux = ms_mul(ms_mul(ms_mul(ms_mul(2.0, pi), o->amp), smaj), smin);
    o->resid_rms = o->npix > 0 ? ms_sqrt(ms_div(o->resid_ss, (double)o->npix)) : qnan;
    o->x_err = o->y_err = o->peak_err = o->flux_err = qnan;
    o->maj_err = o->min_err = o->pa_err = qnan;
    o->dmaj = o->dmin = o->dpa = o->dmaj_err = o->dmin_err = qnan;
    ms_sincos(ms_div(ms_mul(o->pa, pi), 180.0), &sn, &cs);
    snr2 = ms_mul(ms_div(o->amp, o->rms), ms_div(o->amp, o->rms));
    if ((o->status == SF_FIT_OK || o->status == SF_FIT_MAXITER) && o->rms > 0 &&
        isfinite(o->rms) && o->amp > 0) {
        /* the correlation length along each axis of the component: an
         * elliptical beam correlates the noise more along its major axis
         * (Condon's theta_N for a circular one; white: independent pixels) */
        const double nM = corr ? sf_fit_beam_fwhm_along(bc, cs, sn) : 0.0;
        const double nm = corr ? sf_fit_beam_fwhm_along(bc, -sn, cs) : 0.0;
        const double n2 = corr ? ms_mul(nM, nm) : ms_div(ms_mul(2.0, ln2), pi); /* theta_N^2 */
        const double rA = sf_fit_condon_rho2(o->maj, o->min, snr2, nM, nm, 3, 3);
        const double rM = sf_fit_condon_rho2(o->maj, o->min, snr2, nM, nm, 5, 1);
        const double rm = sf_fit_condon_rho2(o->maj, o->min, snr2, nM, nm, 1, 5);
        const double eM = ms_mul(smaj, ms_sqrt(ms_div(2.0, rM)));
        const double em = ms_mul(smin, ms_sqrt(ms_div(2.0, rm)));
        const double muA2 = ms_div(2.0, rA), muM2 = ms_div(2.0, rM), mum2 = ms_div(2.0, rm);
        double epa;
        o->peak_err = ms_mul(o->amp, ms_sqrt(muA2));
        o->maj_err = ms_mul(o->maj, ms_sqrt(muM2));
        o->min_err = ms_mul(o->min, ms_sqrt(mum2));
        epa = smaj > smin
                  ? ms_div(ms_mul(ms_div(ms_mul(ms_mul(ms_mul(ms_sqrt(ms_div(2.0, rm)), 2.0), smaj), smin),
                                         ms_sub(ms_mul(smaj, smaj), ms_mul(smin, smin))),
                                  180.0),
                           pi)
                  : 90.0;
        o->pa_err = epa < 90.0 ? epa : 90.0;
        o->flux_err = ms_mul(o->flux, ms_sqrt(ms_add(muA2, ms_mul(ms_div(n2, ms_mul(o->maj, o->min)),
                                                                  ms_add(muM2, mum2)))));
        o->x_err = ms_sqrt(ms_add(ms_mul(ms_mul(ms_mul(eM, eM), cs), cs), ms_mul(ms_mul(ms_mul(em, em), sn), sn)));
        o->y_err = ms_sqrt(ms_add(ms_mul(ms_mul(ms_mul(eM, eM), sn), sn), ms_mul(ms_mul(ms_mul(em, em), cs), cs)));
    }
    if (beam) { /* the fitted FWHM matrix less the beam's */
        double xx, yy, xy, lbig, lsmall;
        sf_fit_cov(o->maj, o->min, cs, sn, &xx, &yy, &xy);
        /* the eigenvalues of the difference (sigma^2) and the axis of the larger */
        sf_fit_eig(ms_sub(xx, bc->xx), ms_sub(yy, bc->yy), ms_sub(xy, bc->xy), &m, &d, &c2, &s2);
        lbig = ms_add(m, d);
        lsmall = ms_sub(m, d);
        o->dmaj = lbig > 0 ? ms_div(ms_sqrt(lbig), SF_FIT_F2S) : 0.0;
        o->dmin = lsmall > 0 ? ms_div(ms_sqrt(lsmall), SF_FIT_F2S) : 0.0;
        if (o->dmaj > 0)
            o->dpa = d > 0 ? sf_fit_deg_half(s2, c2, 0.0) : o->pa;
        /* theta_d^2 = theta^2 - beam^2 along the axis: d theta_d = theta d theta / theta_d */
        if (o->dmaj > 0)
            o->dmaj_err = ms_div(ms_mul(o->maj, o->maj_err), o->dmaj);
        if (o->dmin > 0)
            o->dmin_err = ms_div(ms_mul(o->min, o->min_err), o->dmin);
        if (!(lsmall > 0))
            o->flags |= SF_COMP_UNRESOLVED;
    }
    /* NaNs computed on x86 and on the GPU differ in their sign bit */
    o->maj = ms_canon(o->maj), o->min = ms_canon(o->min), o->pa = ms_canon(o->pa);
    o->flux = ms_canon(o->flux), o->resid_rms = ms_canon(o->resid_rms);
    o->x_err = ms_canon(o->x_err), o->y_err = ms_canon(o->y_err);
    o->peak_err = ms_canon(o->peak_err), o->flux_err = ms_canon(o->flux_err);
    o->maj_err = ms_canon(o->maj_err), o->min_err = ms_canon(o->min_err);
    o->pa_err = ms_canon(o->pa_err), o->dmaj = ms_canon(o->dmaj), o->dmin = ms_canon(o->dmin);
    o->dpa = ms_canon(o->dpa), o->dmaj_err = ms_canon(o->dmaj_err);
    o->dmin_err = ms_canon(o->dmin_err);
}

#endif
