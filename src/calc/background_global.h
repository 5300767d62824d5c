/* method=global (the lesson's kappa-sigma clipping to convergence): the plan
 * both twins follow, cpu/background.c and gpu/background.cu.
 *
 * Iteration t keeps the finite values v with lo < v < hi (the bounds only
 * shrink) and needs their count, the sums of v - shift and (v - shift)^2
 * (doubles), and the values at the two middle ranks. Neither twin sorts the
 * image. A FULL pass streams the image once: the count and sums over the
 * bounds, and it collects, per chunk of the image (a GPU block), two kinds
 * of values into the chunk's region:
 *   - the median window: the values within SF_BKG_WINDOW sigma of the last
 *     median; the next median is selected among them (the GPU by a radix
 *     selection, the CPU from the window sorted once per FULL pass), with
 *     `below` (the kept values under the window) fixing its ranks;
 *   - the edges: the kept values within e of either bound, (lo, lo + e] and
 *     [hi - e, hi), where e is SF_BKG_EDGE_MOVES times the bounds' last move
 *     (at most SF_BKG_EDGE_MAX sigma).
 * The first pass has no bounds yet: its window is the values between the
 * middle ranks m/2 -+ 3 sqrt(m) of m pixels sampled at a fixed step (the
 * median's rank among them is within 6 of its standard deviations of m/2),
 * and its edges the values beyond the second iteration's bounds as the
 * sample predicts them (sf_bkg_first_edges), so that an image whose
 * clipping converges smoothly is read once. (The GPU samples only images
 * of 2^23 pixels or more: on smaller ones the sort's launches cost more than
 * the passes they save, and the first median is selected over the image.)
 * An EDGE iteration, whose bounds stay inside the edges of the last FULL
 * pass, reads only the regions: the count and sums are the FULL pass's less
 * the edge values now clipped, `below` less those clipped from below, and
 * the median comes from the same window. It falls back to a FULL pass when
 * the bounds leave the edges, a region overflows, or no edge value is left
 * on one side (the set could then be constant), and to selecting over the
 * whole image when the median leaves the window. Every decision is a
 * function of the data and the parameters only, and the sums are added in
 * fixed chunks in a fixed order, so the result does not depend on the
 * number of threads. The two twins chunk differently, so their double sums
 * may differ in the last bits; sigma is rounded to float, as numpy's is.
 *
 * SKYFIND_BKG_WINDOW (the window's half-width in sigma; 0 makes every
 * median miss it), SKYFIND_BKG_EDGES=0 (no EDGE iteration) and, on the GPU,
 * SKYFIND_BKG_SAMPLE_MIN are for the tests, which check that every path
 * gives the same statistics.
 *
 * In this file, in order: the constants and knobs; the edge width and the
 * first pass's edges; numpy-rounded float steps; the plan's state
 * (sf_bkg_plan) and its steps (init, edge, ranges, full, edge_sums,
 * in_window, next); the first shift. */
#ifndef SKYFIND_BACKGROUND_GLOBAL_H
#define SKYFIND_BACKGROUND_GLOBAL_H

#include <math.h>
#include <stdlib.h>

#define SF_BKG_WINDOW 0.05f   /* the window's half-width, in sigma */
#define SF_BKG_EDGE_MAX 0.5f  /* the widest edge band, in sigma */
#define SF_BKG_EDGE_MOVES 4.0f /* the edge band: this many times the last move */
#define SF_BKG_EDGE_FIRST 1.0f /* the first pass's edge bands, in sampled sigma */
#define SF_BKG_SAMPLES 65536   /* the first pass samples every n / this pixel */

/* The window's half-width in sigma (SKYFIND_BKG_WINDOW overrides it). */
static inline float sf_bkg_window_factor(void)
{
    const char *e = getenv("SKYFIND_BKG_WINDOW");
    return e ? (float)atof(e) : SF_BKG_WINDOW;
}

/* Whether EDGE iterations are allowed (SKYFIND_BKG_EDGES=0: never). */
static inline int sf_bkg_edges_on(void)
{
    const char *e = getenv("SKYFIND_BKG_EDGES");
    return !(e && atoi(e) == 0);
}

/* The width e of the edge bands for the next FULL pass, from the bounds'
 * last move (infinite after the first iteration) and the new sigma. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline float sf_bkg_edge_width(float move, float sigma)
{
    float e = SF_BKG_EDGE_MOVES * move, cap = SF_BKG_EDGE_MAX * sigma;
    return e < cap ? e : cap; /* an infinite move gives the cap */
}

/* The first FULL pass's edges, from the finite pixels sampled every
 * n / SF_BKG_SAMPLES-th (from half that): their median ms and standard
 * deviation ss predict the second iteration's bounds ms -+ kappa ss, and the
 * edges reach SF_BKG_EDGE_FIRST ss inside them, so that the second and later
 * iterations can run over the edges alone. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline void sf_bkg_first_edges(float ms, float ss, float kappa, float *elo, float *ehi)
{
    const float k = kappa * ss, e = SF_BKG_EDGE_FIRST * ss;
    *elo = (ms - k) + e;
    *ehi = (ms + k) - e;
}

/* The first window from m >= 256 sorted samples (both twins): the sample
 * step over n pixels, the window's ranks m/2 -+ 3 sqrt(m) (six standard
 * deviations of the median's rank; kb clamped to m - 1), and the samples'
 * standard deviation from the sums q, q2 of their differences from their
 * median. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline size_t sf_bkg_sample_step(size_t n)
{
    return n / SF_BKG_SAMPLES > 1 ? n / SF_BKG_SAMPLES : 1;
}

#ifdef __CUDACC__
__host__ __device__
#endif
static inline void sf_bkg_first_ranks(size_t m, size_t *ka, size_t *kb)
{
    const size_t half = (size_t)(3.0 * sqrt((double)m));
    *ka = m / 2 - half;
    *kb = m / 2 + half < m ? m / 2 + half : m - 1;
}

#ifdef __CUDACC__
__host__ __device__
#endif
static inline float sf_bkg_first_sigma(double q, double q2, size_t m)
{
    const double dm = q / (double)m, var = q2 / (double)m - dm * dm;
    return (float)sqrt(var > 0 ? var : 0);
}

/* Float arithmetic rounded at every step, as numpy's float32 (no fused
 * multiply-add on either backend). */
#ifdef __CUDA_ARCH__
#define SF_GLB_FMUL(a, b) __fmul_rn(a, b)
#define SF_GLB_FADD(a, b) __fadd_rn(a, b)
#define SF_GLB_FSUB(a, b) __fsub_rn(a, b)
#else
static inline float sf_glb_fmul(float a, float b)
{
    volatile float r = a * b;
    return r;
}
#define SF_GLB_FMUL(a, b) sf_glb_fmul(a, b)
#define SF_GLB_FADD(a, b) ((float)((a) + (b)))
#define SF_GLB_FSUB(a, b) ((float)((a) - (b)))
#endif

#ifdef __CUDACC__
#define SF_GLB_FN __host__ __device__ static inline
#else
#define SF_GLB_FN static inline
#endif

/* The plan's state between iterations, the same on both backends. */
typedef struct {
    float lo, hi;             /* this iteration's bounds */
    float med, sig, move;     /* the last median and sigma, the bounds' last move */
    /* the last FULL pass: its sums (of v - bshift), the kept values below
     * its window, the window's size, its edges */
    unsigned long long bn, bbelow, wtotal;
    double bs, bs2;
    float bshift, elo, ehi;
    int base_ok, win_ok;      /* its edges and its window still serve */
    int nfull;                /* FULL passes so far */
} sf_bkg_plan;

SF_GLB_FN void sf_bkg_plan_init(sf_bkg_plan *p)
{
    p->lo = -INFINITY;
    p->hi = INFINITY;
    p->med = p->sig = 0.0f;
    p->move = INFINITY;
    p->bn = p->bbelow = p->wtotal = 0;
    p->bs = p->bs2 = 0.0;
    p->bshift = 0.0f;
    p->elo = -INFINITY;
    p->ehi = INFINITY;
    p->base_ok = p->win_ok = 0;
    p->nfull = 0;
}

/* Whether this iteration runs over the edges of the last FULL pass alone. */
SF_GLB_FN int sf_bkg_plan_edge(const sf_bkg_plan *p)
{
    return p->base_ok && p->lo < p->elo && p->hi > p->ehi;
}

/* A FULL pass's window [*wlo, *whi] and edges (v <= *elo, v >= *ehi):
 * first (the sampled window and edges, or NULL: none) in the first
 * iteration, then around the last median and inside the bounds; returns
 * whether the edges serve (else they are -inf and inf: none). */
SF_GLB_FN int sf_bkg_plan_ranges(const sf_bkg_plan *p, int it, const float *first, float wfac,
                                 int edges_on, float *wlo, float *whi, float *elo, float *ehi)
{
    int edges;
    *wlo = INFINITY;
    *whi = -INFINITY;
    *elo = -INFINITY;
    *ehi = INFINITY;
    if (it == 1) {
        if (first) {
            *wlo = first[0];
            *whi = first[1];
            *elo = first[2];
            *ehi = first[3];
        }
        edges = edges_on && isfinite(*elo) && isfinite(*ehi) && *elo < *wlo && *ehi > *whi;
    } else {
        const float ww = SF_GLB_FMUL(wfac, p->sig);
        const float e = edges_on ? sf_bkg_edge_width(p->move, p->sig) : 0.0f;
        *wlo = SF_GLB_FSUB(p->med, ww);
        *whi = SF_GLB_FADD(p->med, ww);
        *elo = SF_GLB_FADD(p->lo, e);
        *ehi = SF_GLB_FSUB(p->hi, e);
        edges = e > 0.0f && *elo < *wlo && *ehi > *whi;
    }
    if (!edges) {
        *elo = -INFINITY;
        *ehi = INFINITY;
    }
    return edges;
}

/* A FULL pass done (its window's size wwin, whether a region overflowed). */
SF_GLB_FN void sf_bkg_plan_full(sf_bkg_plan *p, unsigned long long n, unsigned long long below,
                                double s, double s2, float shift, unsigned long long wwin, int over,
                                int edges, float elo, float ehi)
{
    p->bn = n;
    p->bbelow = below;
    p->bs = s;
    p->bs2 = s2;
    p->bshift = shift;
    p->elo = elo;
    p->ehi = ehi;
    p->wtotal = wwin;
    p->win_ok = !over;
    p->base_ok = edges && !over;
    p->nfull++;
}

/* An EDGE pass done: this iteration's count, count below the window and
 * sums, from the FULL pass's less what the edges clipped (cl below, ch
 * above, their sums q and q2). */
SF_GLB_FN void sf_bkg_plan_edge_sums(const sf_bkg_plan *p, unsigned long long cl,
                                     unsigned long long ch, double q, double q2,
                                     unsigned long long *n, unsigned long long *below, double *s,
                                     double *s2)
{
    *n = p->bn - cl - ch;
    *below = p->bbelow - cl;
    *s = p->bs - q;
    *s2 = p->bs2 - q2;
}

/* Whether ranks r0 <= r1 of this iteration's set lie in the window. */
SF_GLB_FN int sf_bkg_plan_in_window(const sf_bkg_plan *p, unsigned long long below,
                                    unsigned long long r0, unsigned long long r1)
{
    return p->win_ok && r0 >= below && r1 - below < p->wtotal;
}

/* The median and sigma of iteration it are known: the next bounds, med -+
 * kappa sig inside the current ones (numpy's float32 arithmetic), and their
 * move. window: whether the median came from the window (if not, it is
 * stale and the next iteration reads the image). */
SF_GLB_FN void sf_bkg_plan_next(sf_bkg_plan *p, int it, float med, float sig, float kappa,
                                int window)
{
    const float ks = SF_GLB_FMUL(kappa, sig);
    float nlo = SF_GLB_FSUB(med, ks), nhi = SF_GLB_FADD(med, ks);
    nlo = nlo > p->lo ? nlo : p->lo;
    nhi = nhi < p->hi ? nhi : p->hi;
    if (it == 1) {
        p->move = INFINITY;
    } else {
        const float dl = SF_GLB_FSUB(nlo, p->lo), dh = SF_GLB_FSUB(p->hi, nhi);
        p->move = dl > dh ? dl : dh;
    }
    p->lo = nlo;
    p->hi = nhi;
    p->med = med;
    p->sig = sig;
    if (!window)
        p->base_ok = p->win_ok = 0;
}

/* The first iteration's shift of the sums: the image's middle pixel when it
 * is finite, so that the sums of offset data (an optical sky of 3700 +- 20)
 * do not cancel; later iterations shift by the last median. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline float sf_bkg_first_shift(float mid)
{
    return isfinite(mid) ? mid : 0.0f;
}

#endif
