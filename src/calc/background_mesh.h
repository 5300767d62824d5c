/* Stage `background`, method=mesh: the per-mesh statistics, grid filling and
 * filtering and the spline helpers shared by the CPU twin
 * (cpu/background_mesh.c) and the GPU version (gpu/background_mesh.cu).
 * Everything here is plain C usable from C11 and CUDA (__host__ __device__),
 * so both backends compute the same mesh values from the same operations.
 *
 * The algorithm is SExtractor's (back.c: backstat, backhisto, backguess,
 * filterback, makebackspline, subbackline) as SEP (src/background.c) has it;
 * each step below says which behaviour it reproduces. Differences, all
 * deliberate: NaN and +-Inf pixels are ignored (SExtractor only skips
 * values <= -BIG), the clipping kappa and iteration limit come from
 * sf_bkg_params (SExtractor hard-wires 3 and 100, our defaults), the
 * valid-pixel fraction is p->min_valid (BACK_MINGOODFRAC = 0.5, our default),
 * a mesh of one valid pixel gets that pixel (not twice it, see backguess),
 * the pixel moments are summed in a fixed order (that of a CUDA block, see
 * sf_bkg_moments) so the twin and the GPU agree bit for bit, a degenerate
 * histogram median (0/0) is guarded, and the bicubic surface is built from
 * derivative grids (sf_bkg_cubic) rather than a spline solve per image row:
 * the same surface, rounded differently.
 *
 * GPU port: products that feed a sum go through SF_BKG_DMUL/SF_BKG_FMUL
 * (__dmul_rn/__fmul_rn on the device) so nvcc cannot contract them into FMAs
 * that the host code does not have. */
#ifndef SKYFIND_CPU_BACKGROUND_MESH_H
#define SKYFIND_CPU_BACKGROUND_MESH_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include "skyfind/background.h"

#ifdef __CUDACC__
#define SF_BKG_HD __host__ __device__
#else
#define SF_BKG_HD
#endif
#ifdef __CUDA_ARCH__ /* device pass of nvcc */
#define SF_BKG_DMUL(a, b) __dmul_rn((a), (b))
#define SF_BKG_FMUL(a, b) __fmul_rn((a), (b))
#else
#define SF_BKG_DMUL(a, b) ((a) * (b))
#define SF_BKG_FMUL(a, b) ((a) * (b))
#endif

/* ---- constants (SExtractor's names in brackets) ------------------------- */
#define SF_BKG_PRECLIP_NSIGMA 2.0      /* pre-clip at mean +- 2 sigma (backstat) */
#define SF_BKG_QUANTIF_NSIGMA 5.0      /* histogram spans mean +- 5 sigma [QUANTIF_NSIGMA] */
#define SF_BKG_QUANTIF_NMAXLEVELS 4096 /* most histogram bins [QUANTIF_NMAXLEVELS] */
#define SF_BKG_QUANTIF_AMIN 4.0        /* min pixels per bin at the mode [QUANTIF_AMIN] */
#define SF_BKG_BIN_ROUND 0.499999      /* bin = (int)(v/qscale + 0.499999 - qzero/qscale) */
#define SF_BKG_GUESS_EPS 1e-4          /* stop when sigma changes by less [EPS in backguess] */
#define SF_BKG_GUESS_MINSIG 0.1        /* stop when sigma < 0.1 bin (backguess) */
#define SF_BKG_GUESS_START 10.0        /* first sigma = 10 * (nlevels-1) (backguess) */
#define SF_BKG_MODE_SKEW 0.3           /* |mean-median|/sigma >= 0.3: use the median */
#define SF_BKG_MODE_KMED 2.5           /* mode = 2.5 median - 1.5 mean */
#define SF_BKG_MODE_KMEAN 1.5
#define SF_BKG_FILTER_MAX 31           /* largest median-filter width (meshes) we accept */
#define SF_BKG_PI 3.14159265358979323846

/* The mesh (bx, by) covers pixels [x0, x0+w) x [y0, y0+h). SExtractor
 * (makeback/backstat) and SEP: nbx = (nx-1)/box + 1; the last column of
 * meshes is nx % box wide and the last row ny % box high when those are not
 * 0 ("lastbite"): partial meshes are statistics over just their own pixels,
 * and their valid-pixel test is against their own area. Their nodes for the
 * interpolation stay at the nominal positions (see sf_bkg_axis_pos). */
SF_BKG_HD static inline void sf_bkg_mesh_rect(int nx, int ny, int box, int bx, int by, int *x0,
                                              int *y0, int *w, int *h)
{
    *x0 = bx * box;
    *y0 = by * box;
    *w = nx - *x0 < box ? nx - *x0 : box;
    *h = ny - *y0 < box ? ny - *y0 : box;
}

/* Moments of a mesh: sums of v and v*v over its finite pixels (first pass)
 * or its pixels with lcut <= v <= hcut (second pass), and their count. The
 * double sums run in one fixed order, the order of the GPU's thread block, so
 * that the twin reproduces them bit for bit:
 * - the mesh is cut into tiles of tw x tw pixels (tw = sf_bkg_tile_w(box)),
 *   taken in raster order; the mesh's sum is 0 + tile + tile + ... in order;
 * - in a tile, "thread" t of SF_BKG_VT = 128 owns the 4-pixel column group
 *   g = t % (tw/4) of rows t / (tw/4) + k * rs, k = 0, 1, ... (rs = 128 /
 *   (tw/4)); it adds its pixels from 0 row by row, left to right;
 * - the 128 thread sums are reduced in 4 groups of 32 by the pairwise tree
 *   s[i] = s[i] + s[i + o] for o = 16, 8, 4, 2, 1 (i < o), and the tile's
 *   sum is (g0 + g1) + (g2 + g3).
 * Non-counted pixels add 0.0 (a sum starts at +0.0 and so never becomes
 * -0.0: adding 0.0 or skipping the pixel are the same). */
typedef struct {
    double s1, s2; /* sum of v and of v*v */
    long long n;
} sf_bkg_moments;

#define SF_BKG_VT 128 /* threads of the moment order (and of the GPU's block) */

/* The moment order's tile width: 32 for boxes up to 32 pixels, else 64. */
SF_BKG_HD static inline int sf_bkg_tile_w(int box)
{
    return box <= 32 ? 32 : 64;
}

/* The moment order's reduction of 128 thread sums s[] (destroyed). */
SF_BKG_HD static inline double sf_bkg_tree128(double *s)
{
    for (int g = 0; g < SF_BKG_VT; g += 32)
        for (int o = 16; o; o >>= 1)
            for (int i = 0; i < o; i++)
                s[g + i] = s[g + i] + s[g + i + o];
    return (s[0] + s[32]) + (s[64] + s[96]);
}

/* Mean and standard deviation (ddof 0) from moments, as backstat:
 * sigma = sqrt(s2/n - mean^2), 0 when that is not positive. */
SF_BKG_HD static inline void sf_bkg_mean_sigma(sf_bkg_moments m, double *mean, double *sigma)
{
    double mu = m.s1 / (double)m.n, var = m.s2 / (double)m.n - SF_BKG_DMUL(mu, mu);
    *mean = mu;
    *sigma = var > 0.0 ? sqrt(var) : 0.0;
}

/* Pre-clip (backstat, first pass): a mesh with fewer than min_valid * area
 * finite pixels (or none) is bad (returns 0). Otherwise the cuts are
 * mean -+ 2 sigma, rounded to float as SExtractor's PIXTYPE lcut/hcut. */
SF_BKG_HD static inline int sf_bkg_preclip(sf_bkg_moments m, long long area, double min_valid,
                                           float *lcut, float *hcut)
{
    double mean, sigma;
    if (m.n == 0 || (double)m.n < min_valid * (double)area)
        return 0;
    sf_bkg_mean_sigma(m, &mean, &sigma);
    *lcut = (float)(mean - SF_BKG_DMUL(SF_BKG_PRECLIP_NSIGMA, sigma));
    *hcut = (float)(mean + SF_BKG_DMUL(SF_BKG_PRECLIP_NSIGMA, sigma));
    return 1;
}

/* The histogram of a mesh (backstat, end of the second pass): from the
 * clipped moments, nlevels = (int)(sqrt(2/pi) * 5/4 * n + 1) bins, at most
 * 4096, of width qscale = 10 sigma / nlevels starting at qzero = mean -
 * 5 sigma (qscale 1 when sigma is 0); SExtractor keeps these in float. */
typedef struct {
    float mean, sigma;   /* clipped mean and sigma (float, as backstruct) */
    float qzero, qscale; /* histogram origin and bin width */
    float cste;          /* 0.499999 - qzero/qscale */
    int nlevels;
} sf_bkg_quant;

SF_BKG_HD static inline int sf_bkg_quantise(sf_bkg_moments m, sf_bkg_quant *q)
{
    double mean, sigma, qs, qz, step = sqrt(2.0 / SF_BKG_PI) * SF_BKG_QUANTIF_NSIGMA / SF_BKG_QUANTIF_AMIN;
    int nl;
    if (m.n == 0) /* cannot happen for a finite mesh: the cuts hold some value */
        return 0;
    sf_bkg_mean_sigma(m, &mean, &sigma);
    nl = (int)(SF_BKG_DMUL(step, (double)m.n) + 1.0);
    if (nl > SF_BKG_QUANTIF_NMAXLEVELS)
        nl = SF_BKG_QUANTIF_NMAXLEVELS;
    q->nlevels = nl;
    q->mean = (float)mean;
    q->sigma = (float)sigma;
    qs = sigma > 0.0 ? SF_BKG_DMUL(2.0 * SF_BKG_QUANTIF_NSIGMA, sigma) / nl : 1.0;
    qz = mean - SF_BKG_DMUL(SF_BKG_QUANTIF_NSIGMA, sigma);
    /* Noise near the float limit (sigma above 6.8e37): mean - 5 sigma and
     * 10 sigma / nlevels leave float's range, and an infinite origin would
     * bin nothing and give a level of -inf. Both are clamped to +-FLT_MAX:
     * the histogram still spans every finite value, and ordinary meshes,
     * far from the limit, are not touched. */
    q->qscale = (float)(qs < FLT_MAX ? qs : FLT_MAX);
    q->qzero = (float)(qz > -FLT_MAX ? (qz < FLT_MAX ? qz : FLT_MAX) : -FLT_MAX);
    q->cste = (float)(SF_BKG_BIN_ROUND - (double)(q->qzero / q->qscale));
    return 1;
}

/* Histogram bin of a pixel (backhisto): (int)(v/qscale + cste) in float,
 * truncated toward zero as C's cast (so values just below bin 0 land in
 * bin 0, as in SExtractor); -1 when outside [0, nlevels) or not finite.
 * Every finite pixel of the mesh is binned, not only those within the cuts. */
SF_BKG_HD static inline int sf_bkg_bin(float v, const sf_bkg_quant *q)
{
    float t;
    if (!isfinite(v))
        return -1;
    t = v / q->qscale + q->cste;
    if (!(t > -1.0f && t < (float)q->nlevels)) /* also keeps the cast defined */
        return -1;
    return (int)t;
}

/* One pass of backguess from its integer sums over [lcut, hcut]: the median
 * (interpolated between bin hi, holding b counts, and bin hi+1, holding a,
 * where the walk met), the mean and sigma in bins, and the next cuts. Shared
 * by the CPU twin and the GPU's clipping loop, so both round alike. */
SF_BKG_HD static inline void sf_bkg_guess_pass(unsigned long long sum, unsigned long long s1,
                                               unsigned long long s2,
                                               unsigned long long lowsum,
                                               unsigned long long highsum, int hi, unsigned a,
                                               unsigned b, int nlm1, double kappa, double *med,
                                               double *mea, double *sig, int *lcut, int *hcut)
{
    double m = (double)s1, sg = (double)s2, md, ftemp;
    if (hi >= 0) {
        unsigned mx = a > b ? a : b;
        md = (double)hi + 0.5 + (mx ? ((double)highsum - (double)lowsum) / (2.0 * mx) : 0.0);
    } else {
        md = 0.0;
    }
    if (sum) {
        m /= (double)sum;
        sg = sg / (double)sum - SF_BKG_DMUL(m, m);
    }
    sg = sg > 0.0 ? sqrt(sg) : 0.0;
    ftemp = md - SF_BKG_DMUL(kappa, sg);
    *lcut = ftemp > 0.0 ? (int)(ftemp + 0.5) : 0;
    ftemp = md + SF_BKG_DMUL(kappa, sg);
    *hcut = ftemp < nlm1 ? (int)(ftemp > 0.0 ? ftemp + 0.5 : ftemp - 0.5) : nlm1;
    *med = md;
    *mea = m;
    *sig = sg;
}

/* The mesh's level (by the estimator) and rms in data units from the last
 * pass's median, mean and sigma in bins. */
SF_BKG_HD static inline void sf_bkg_guess_level(const sf_bkg_quant *q, int estimator, double med,
                                                double mea, double sig, float *level, float *rms)
{
    double lev;
    if (!(fabs(sig) > 0.0))
        lev = mea;
    else if (estimator == SF_BKG_EST_MEDIAN)
        lev = med;
    else if (estimator == SF_BKG_EST_MEAN)
        lev = mea;
    else
        lev = fabs((mea - med) / sig) < SF_BKG_MODE_SKEW
                  ? SF_BKG_DMUL(SF_BKG_MODE_KMED, med) - SF_BKG_DMUL(SF_BKG_MODE_KMEAN, mea)
                  : med;
    *level = (float)((double)q->qzero + SF_BKG_DMUL(lev, (double)q->qscale));
    *rms = (float)SF_BKG_DMUL(sig, (double)q->qscale);
}

/* The sums of hist[j]*j and hist[j]*j*j over bins [*ra, *rb] (*s1, *s2)
 * moved to [a, b] (a <= b): the bins between the old and the new ends added
 * or taken away, or, when the two ranges do not meet, summed anew. */
SF_BKG_HD static inline void sf_bkg_range_sums(const unsigned *hist, int a, int b, int *ra, int *rb,
                                               unsigned long long *s1, unsigned long long *s2)
{
    int l = *ra, r = *rb;
    unsigned long long u = *s1, v = *s2;
#define SF_BKG_BIN_SUMS(op, j)                                                               \
    do {                                                                                     \
        const unsigned long long hj_ = (unsigned long long)hist[j] * (unsigned long long)(j); \
        u op hj_;                                                                            \
        v op hj_ * (unsigned long long)(j);                                                  \
    } while (0)
    if (r < l || b < l || a > r) {
        u = v = 0;
        for (int j = a; j <= b; j++)
            SF_BKG_BIN_SUMS(+=, j);
    } else {
        for (; l < a; l++)
            SF_BKG_BIN_SUMS(-=, l);
        while (l > a) {
            l--;
            SF_BKG_BIN_SUMS(+=, l);
        }
        for (; r > b; r--)
            SF_BKG_BIN_SUMS(-=, r);
        while (r < b) {
            r++;
            SF_BKG_BIN_SUMS(+=, r);
        }
    }
#undef SF_BKG_BIN_SUMS
    *ra = a;
    *rb = b;
    *s1 = u;
    *s2 = v;
}

/* backguess: iterative kappa-sigma clipping on the histogram. Each pass
 * over bins [lcut, hcut] finds the median by SExtractor's two-pointer walk
 * (interpolated within its bin), the mean and sigma (in bins); then
 * lcut = round(med - kappa sig) (0 if negative), hcut = round(med + kappa sig)
 * (nlevels-1 if above). It stops after maxiter passes or when sig < 0.1 bin
 * or sig changes by less than 1e-4 relative. The level: sextractor
 * 2.5 med - 1.5 mean when |mean - med| / sig < 0.3, else med (the first
 * branch of SExtractor's expression, `fabs(...) < 0.0`, is never taken);
 * median: med; mean: mean; any estimator uses the mean when sig is 0. The rms
 * is sig * qscale. Returns the passes run; *converged says whether it
 * stopped before maxiter. hist has nlevels counts; pre is scratch for
 * nlevels + 1 integers (host code: the GPU has its own, mesh_guess).
 *
 * Every pass works on integer sums of the histogram: the prefix counts
 * C0[i] = sum of hist[0..i), built once, and the sums of hist[j]*j and
 * hist[j]*j*j over [lcut, hcut], carried from pass to pass by adding and
 * taking away the bins by which the cuts moved (the first pass's are the
 * totals, summed beside C0). They equal the per-bin integer sums (exact)
 * and so SExtractor's double sums (exact while below 2^53: meshes of fewer
 * than 2^29 pixels). (Prefix arrays of the two, as before 2026-12-02, cost
 * two more stores a bin, and there are about as many bins as pixels: a
 * third of the stage's mesh statistics on one thread.) The walk, which
 * takes the next bin on the side with the smaller sum (the high side on
 * ties) until the sides meet, ends with low side [lcut, m), high side
 * [m, hcut], where m is the smallest m in [lcut, hcut] with
 * L(m) + L(m+1) >= T (L(m) = C0[m] - C0[lcut], T = the total; the last bin
 * the low side took had L(m-1) < R(m), the last one the high side took had
 * R(m+1) <= L(m), and only one m satisfies both), found by bisection. */
SF_BKG_HD static inline int sf_bkg_backguess(const unsigned *hist, const sf_bkg_quant *q,
                                             double kappa, int maxiter, int estimator,
                                             float *level, float *rms, int *converged,
                                             unsigned long long *pre)
{
    const int nlm1 = q->nlevels - 1;
    unsigned long long *C0 = pre, t1 = 0, t2 = 0; /* t1, t2: the sums over [ra, rb] */
    int lcut = 0, hcut = nlm1, it = 0, ra = 0, rb = nlm1;
    /* SExtractor starts mea = med = the mean in data units, which only
     * matters when no pass runs (one bin: a mesh of one valid pixel) and
     * then gives qzero + mean*qscale = 2*mean; we start from the mean in
     * bins, so such a mesh gets its mean. */
    double sig = SF_BKG_GUESS_START * nlm1, sig1 = 1.0,
           mea = ((double)q->mean - (double)q->qzero) / (double)q->qscale, med = mea;
    {
        unsigned long long c0 = 0;
        C0[0] = 0;
        for (int i = 0; i <= nlm1; i++) {
            unsigned long long h = hist[i], hi_ = h * (unsigned long long)i;
            c0 += h;
            t1 += hi_;
            t2 += hi_ * (unsigned long long)i;
            C0[i + 1] = c0;
        }
    }
    while (it < maxiter && sig >= SF_BKG_GUESS_MINSIG && fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS) {
        unsigned long long lowsum = 0, highsum = 0, sum = 0, s1 = 0, s2 = 0;
        int lo = lcut, hi = hcut; /* next bin each side of the walk */
        it++;
        sig1 = sig;
        if (hcut >= lcut) {
            const unsigned long long base = C0[lcut], tot = C0[hcut + 1] - base;
            int a = lcut, b = hcut; /* m in [a, b]: the predicate holds at hcut */
            while (a < b) {
                int c = a + (b - a) / 2;
                if ((C0[c] - base) + (C0[c + 1] - base) >= tot)
                    b = c;
                else
                    a = c + 1;
            }
            lo = a;
            hi = a - 1;
            lowsum = C0[a] - base;
            highsum = tot - lowsum;
            sum = tot;
            sf_bkg_range_sums(hist, lcut, hcut, &ra, &rb, &t1, &t2);
            s1 = t1;
            s2 = t2;
        }
        /* the walk ends with hi = lo - 1: the median lies between them */
        sf_bkg_guess_pass(sum, s1, s2, lowsum, highsum, hi, lo <= nlm1 ? hist[lo] : 0u,
                          hi >= 0 ? hist[hi] : 0u, nlm1, kappa, &med, &mea, &sig, &lcut, &hcut);
    }
    *converged = !(it >= maxiter && sig >= SF_BKG_GUESS_MINSIG &&
                   fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS);
    sf_bkg_guess_level(q, estimator, med, mea, sig, level, rms);
    return it;
}

/* filterback, fill step: a bad mesh (NaN in bkg) takes the average of the
 * valid meshes nearest to it (squared distance in meshes, float, ties
 * averaged, summed in raster order in float as SExtractor). Returns 0 when no
 * mesh is valid. Reads only valid meshes, so it can run on every bad mesh at
 * once. */
SF_BKG_HD static inline int sf_bkg_fill_one(const float *bkg, const float *rms, int nbx, int nby,
                                            int px, int py, float *b, float *s)
{
    float d2min = 1e30f, val = 0.0f, sval = 0.0f;
    int nmin = 0;
    for (int y = 0, j = 0; y < nby; y++)
        for (int x = 0; x < nbx; x++, j++) {
            float d2;
            if (isnan(bkg[j]))
                continue;
            d2 = (float)((x - px) * (x - px) + (y - py) * (y - py));
            if (d2 < d2min) {
                val = bkg[j];
                sval = rms[j];
                nmin = 1;
                d2min = d2;
            } else if (d2 == d2min) {
                val += bkg[j];
                sval += rms[j];
                nmin++;
            }
        }
    if (!nmin)
        return 0;
    *b = val / nmin;
    *s = sval / nmin;
    return 1;
}

/* Median of n floats (reorders v): insertion sort, the middle value, or
 * the two middle values' float sum halved (SExtractor's fqmedian). */
SF_BKG_HD static inline float sf_bkg_median(float *v, int n)
{
    for (int i = 1; i < n; i++) {
        float t = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > t) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = t;
    }
    if (n < 2)
        return v[0];
    return (n & 1) ? v[n / 2] : (float)((double)(v[n / 2 - 1] + v[n / 2]) / 2.0);
}

/* filterback, median step: the median of the filter x filter meshes around
 * (px, py), the window shrunk symmetrically at the grid edges (half-width
 * min(filter/2, px, nbx-1-px), same in y: a corner mesh keeps its own value).
 * SExtractor's BACK_FILTERTHRESH is 0, so the median always replaces the
 * value. work holds filter*filter floats. */
SF_BKG_HD static inline float sf_bkg_filter_one(const float *v, int nbx, int nby, int px, int py,
                                                int filter, float *work)
{
    int hx = filter / 2, hy = filter / 2, n = 0;
    if (hx > px)
        hx = px;
    if (hx > nbx - 1 - px)
        hx = nbx - 1 - px;
    if (hy > py)
        hy = py;
    if (hy > nby - 1 - py)
        hy = nby - 1 - py;
    for (int y = py - hy; y <= py + hy; y++)
        for (int x = px - hx; x <= px + hx; x++)
            work[n++] = v[(size_t)y * nbx + x];
    return sf_bkg_median(work, n);
}

/* makebackspline / subbackline: SExtractor's "natural" cubic spline
 * through n nodes at unit spacing, values v[i*step], into d[i*step] (what
 * SExtractor stores and the interpolation uses; the end values are 0).
 * This is SExtractor's recurrence as it is: its back-substitution
 * d[i] = (d[i]*d[i+1] + u[i]) / 6 divides the carried term by 6 as well, so
 * for n >= 4 the inner values differ from a textbook natural spline; we
 * keep it so that maps match SExtractor's and SEP's. u: n floats of scratch.
 * n == 1: d = 0. */
SF_BKG_HD static inline void sf_bkg_spline_d2(const float *v, size_t step, int n, float *d,
                                              float *u)
{
    if (n < 2) {
        if (n == 1)
            d[0] = 0.0f;
        return;
    }
    d[0] = 0.0f;
    u[0] = 0.0f;
    for (int i = 1; i < n - 1; i++) {
        float t = -1.0f / (d[(size_t)(i - 1) * step] + 4.0f);
        float s2 = v[(size_t)(i + 1) * step] + v[(size_t)(i - 1) * step] -
                   SF_BKG_FMUL(2.0f, v[(size_t)i * step]);
        d[(size_t)i * step] = t;
        u[i] = SF_BKG_FMUL(t, u[i - 1] - SF_BKG_FMUL(6.0f, s2));
    }
    d[(size_t)(n - 1) * step] = 0.0f;
    for (int i = n - 2; i >= 1; i--)
        d[(size_t)i * step] =
            (SF_BKG_FMUL(d[(size_t)i * step], d[(size_t)(i + 1) * step]) + u[i]) / 6.0f;
}

/* Position of pixel p along an axis of nb nodes of spacing box, as
 * subbackline: x (xaxis = 1): u = (p + 0.5)/box - 0.5, node k at the centre
 * of mesh k; y (xaxis = 0): u = p/box - 0.5, node j half a pixel above the
 * centre of mesh j (SExtractor's own asymmetry, kept). k = floor(u) clamped
 * to [0, nb-2] (0 when nb < 2), so beyond the outermost nodes the end
 * segment's cubic is extrapolated; d = u - k, exact in double then rounded. */
SF_BKG_HD static inline void sf_bkg_axis_pos(int p, int box, int nb, int xaxis, int *k, float *d)
{
    long long num = 2LL * p + (xaxis ? 1 : 0) - box, den = 2LL * box, kk;
    kk = num < 0 ? 0 : num / den;
    if (kk > nb - 2)
        kk = nb < 2 ? 0 : nb - 2;
    *k = (int)kk;
    *d = (float)((double)(num - kk * den) / (double)den);
}

/* Cubic-spline value between nodes lo and hi with stored derivatives dlo,
 * dhi at fraction t (subbackline): c (lo + (c^2-1) dlo) + t (hi + (t^2-1) dhi),
 * c = 1 - t. With dlo = dhi = 0 this is linear interpolation. */
/* The cubic with its terms given: c = 1 - t, cc = c*c - 1, tt = t*t - 1
 * (sf_bkg_cubic_terms), for callers that reuse them along a row or column. */
SF_BKG_HD static inline float sf_bkg_cubic_k(float lo, float hi, float dlo, float dhi, float c,
                                             float cc, float t, float tt)
{
    return SF_BKG_FMUL(c, lo + SF_BKG_FMUL(cc, dlo)) + SF_BKG_FMUL(t, hi + SF_BKG_FMUL(tt, dhi));
}

SF_BKG_HD static inline void sf_bkg_cubic_terms(float t, float *c, float *cc, float *tt)
{
    *c = 1.0f - t;
    *cc = SF_BKG_FMUL(*c, *c) - 1.0f;
    *tt = SF_BKG_FMUL(t, t) - 1.0f;
}

SF_BKG_HD static inline float sf_bkg_cubic(float lo, float hi, float dlo, float dhi, float t)
{
    float c, cc, tt;
    sf_bkg_cubic_terms(t, &c, &cc, &tt);
    return sf_bkg_cubic_k(lo, hi, dlo, dhi, c, cc, t, tt);
}

/* The bicubic surface (subbackline). SExtractor interpolates each mesh
 * column to the image row (cubic along y with makebackspline's derivatives
 * My), runs the spline recurrence along that row of nodes for their
 * derivatives along x, and interpolates along x. The recurrence is linear
 * and the same on every row, so the row's x-derivatives are the y-
 * interpolation of the x-derivatives of the mesh rows: with G = the spline
 * along each mesh row of M (zero when nbx or nby is 1, or bilinear) and Gy =
 * the spline along each mesh column of G, node k of an image row (mesh rows
 * lo = ky*nbx + k, hi = lo + nbx, fraction dy) has value cubic(M, My) and
 * derivative cubic(G, Gy). The same surface without a spline solve per image
 * row; the twin and the GPU both build it this way. */
SF_BKG_HD static inline void sf_bkg_node(const float *m, const float *my, const float *g,
                                         const float *gy, size_t lo, size_t hi, float dy,
                                         float *v, float *d)
{
    *v = sf_bkg_cubic(m[lo], m[hi], my[lo], my[hi], dy);
    *d = sf_bkg_cubic(g[lo], g[hi], gy[lo], gy[hi], dy);
}

#ifdef __cplusplus
extern "C" {
#endif

/* The whole method=mesh CPU twin: validates, sf_bkg_mesh_cpu, then
 * sf_bkg_interp_cpu into bkg and rms; st as documented in the .c file. */
sf_status sf_background_mesh_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                                 sf_image *bkg, sf_image *rms);
/* Parameter checks of method=mesh (called by sf_bkg_check_params). */
sf_status sf_bkg_mesh_check_params(const sf_bkg_params *p);
/* The maps' interpolation on the CPU as a reusable set-up (the derivative
 * grids and each column's place): made from a mesh grid, then the maps
 * a row at a time (sf_bkg_mesh_interp_rows: into bkg and rms, or, both
 * NULL, into each thread's scratch rows for row_fn alone, with level_only
 * the levels alone and r NULL; as sf_bkg_view_rows) or one pixel (sf_bkg_mesh_interp_at, r 0 the level, 1
 * the rms: the bits the rows hold there, before NaN pixels of the image
 * are set NaN). sf_background_mesh_interp_cpu: the stage but for its maps
 * (st as sf_background_cpu's). */
typedef struct sf_bkg_mesh_interp sf_bkg_mesh_interp;
sf_status sf_bkg_mesh_interp_make(const sf_bkg_mesh *mesh, const sf_bkg_params *p, int nx, int ny,
                                  sf_bkg_mesh_interp **out);
sf_status sf_bkg_mesh_interp_rows(const sf_bkg_mesh_interp *ip, const sf_image *img, sf_image *bkg,
                                  sf_image *rms, int level_only, sf_bkg_row_fn row_fn, void *ctx);
float sf_bkg_mesh_interp_at(const sf_bkg_mesh_interp *ip, int r, int x, int y);
void sf_bkg_mesh_interp_free(sf_bkg_mesh_interp *ip);
sf_status sf_background_mesh_interp_cpu(const sf_image *img, const sf_bkg_params *p,
                                        sf_bkg_stats *st, sf_bkg_mesh_interp **ip);

#ifdef __cplusplus
}
#endif
#endif
