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
 *     median; the next median is selected among them (radix selection by
 *     11, 11 and 10 bits of the order-preserving key), with `below` (the
 *     kept values under the window) fixing its ranks;
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
 * median miss it) and SKYFIND_BKG_EDGES=0 (no EDGE iteration) are for the
 * tests, which check that every path gives the same statistics. */
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
