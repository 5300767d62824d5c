/* Stage `background`, method=bane: the grid, the per-node clipping rule and
 * the bilinear maps, shared by the CPU twin (cpu/background_bane.c) and the
 * GPU version (gpu/background_bane.cu, the nodes; gpu/background_bane_grid.cu,
 * the maps and the run summary). Plain C usable from C11 and CUDA
 * (__host__ __device__), so both backends compute the same nodes from the
 * same operations.
 *
 * The estimator is BANE's (AegeanTools) as BANE 1.x ran it when Aegean's
 * reference catalogue of Parkes 1904-66 was made (the catalogue's local_rms
 * agrees with it to 1-2%; BANE 2's clip-to-convergence gives 0.87 of it):
 * - grid nodes every `step` pixels along each axis, at 0, step, 2 step, ...
 *   and one more at the image's far edge (x = nx, one past the last pixel);
 * - each node's box is box x box pixels centred on it, [p - box/2,
 *   p - box/2 + box), clipped to the image (BANE also leaves out the image's
 *   last row and column; we do not);
 * - over the box's finite pixels: mean and standard deviation (ddof 0), then
 *   at most SF_BANE_PASSES passes keeping mean - kappa sigma < v < mean +
 *   kappa sigma of the pixels kept so far, with mean and sigma recomputed
 *   after each; a pass that would keep nothing is not taken; the loop stops
 *   when sigma changed by less than SF_BANE_TOL relative (2 |s0 - s| / (s0 +
 *   s)); the node's level is the median of the kept pixels (numpy's, the
 *   float32 mean of the two middle values for an even count) and its rms
 *   their standard deviation;
 * - a node with no finite pixel takes the average of its nearest valid
 *   nodes (sf_bkg_fill_one, as the mesh method fills bad meshes; BANE's
 *   Delaunay interpolation skips such nodes);
 * - the maps are the bilinear interpolation of the nodes (BANE's
 *   RegularGridInterpolator), NaN where the image is NaN.
 *
 * Both backends agree bit for bit: the sums of v and v*v are integers (see
 * "Exact sums" below), so their order does not matter; the median is an
 * exact order statistic; and products are not contracted into FMAs
 * (SF_BKG_DMUL).
 *
 * In this file, in order: the grid (nodes, boxes); "Exact sums" of a node
 * that reads its pixels (sf_bane_scale_for, sf_bane_add) and the clipping
 * rule (bounds, stopping); the bilinear maps; "the cell path": when it
 * applies, the float bounds (sf_bane_f_le, sf_bane_f_ge) and the sorted
 * cells' searches, the running sums' association (sf_bane_scan) and their
 * compact record (sf_bane_entry, sf_bane_range2, sf_bane_records); the run
 * summary's mean, the node's lane order (sf_bane_lanes_total); the work
 * check and the GPU's scratch size. */
#ifndef SKYFIND_CALC_BACKGROUND_BANE_H
#define SKYFIND_CALC_BACKGROUND_BANE_H

#include <math.h>
#include "background_mesh.h"

#define SF_BANE_PASSES 3    /* BANE 1.x sigmaclip(reps=3) */
#define SF_BANE_TOL 0.2     /* ... stopping when sigma changes by less than 20% */
/* step=auto and box=auto (sf_bkg_resolve_auto): BANE's get_step_size, 4
 * beam widths (sqrt(BMAJ BMIN) in pixels) rounded up, or 16 without a beam;
 * the box 6 steps ("so we have ~30 beams"). */
#define SF_BANE_STEP_BEAMS 4.0
#define SF_BANE_STEP_NOBEAM 16
#define SF_BANE_BOX_STEPS 6

/* Nodes along an axis of n pixels: 0, step, ..., and n. */
SF_BKG_HD static inline int sf_bane_nnodes(int n, int step)
{
    return (n - 1) / step + 2;
}

SF_BKG_HD static inline int sf_bane_node_pos(int i, int nn, int n, int step)
{
    return i < nn - 1 ? i * step : n;
}

/* The box of a node at p along an axis of n pixels: [*a, *b). */
SF_BKG_HD static inline void sf_bane_box(int p, int box, int n, int *a, int *b)
{
    long long lo = (long long)p - box / 2, hi = lo + box;
    *a = lo < 0 ? 0 : (int)lo;
    *b = hi > n ? n : (int)hi;
}

/* Exact sums. Each pass sums the kept pixels' v and v*v as integers held in
 * doubles, on a power-of-two scale set by the largest |v| the pass can meet,
 * M, and by the box's pixel count: with frexp(M) = f 2^E and 2^b > the box's
 * pixels, a term v 2^e1 or v^2 2^e2 (e1 = 52 - b - E, e2 = 52 - b - 2E) is
 * below 2^(52-b), is rounded to an integer ((t + 1.5 2^52) - 1.5 2^52:
 * round to nearest even, the same on both backends and in SIMD lanes), and
 * any sum of 2^b of them is an integer below 2^52, exact in a double: the
 * same bits in any order. The products are exact too (a float times a
 * power of two; a float squared in double). A term's rounding is at most
 * M 2^-(53-b) (v) and M^2 2^-(53-b) (v*v): relative 4e-12 of M for a box of
 * 10^4 pixels. M is the largest |v| of the grid cells (step x step, aligned
 * at 0) that the box touches for the first pass, then max(|lo|, |hi|) of the
 * pass's bounds. */
#define SF_BANE_RND 6755399441055744.0 /* 1.5 * 2^52 */
#ifdef __CUDA_ARCH__
#define SF_BANE_RINT(x) __dsub_rn(__dadd_rn((x), SF_BANE_RND), SF_BANE_RND)
#else
#define SF_BANE_RINT(x) (((x) + SF_BANE_RND) - SF_BANE_RND)
#endif

typedef struct {
    double n, s1, s2;
} sf_bane_sums;

typedef struct {
    double c1, c2; /* 2^e1, 2^e2 */
    int e1, e2;
} sf_bane_scale;

SF_BKG_HD static inline sf_bane_scale sf_bane_scale_for(double M, long long area)
{
    sf_bane_scale k;
    int E = 0, b = 1;
    while (b < 40 && (1LL << b) <= area)
        b++;
    if (M > 0 && isfinite(M))
        (void)frexp(M, &E);
    k.e1 = M > 0 ? 52 - b - E : 0;
    k.e2 = M > 0 ? 52 - b - 2 * E : 0;
    k.c1 = ldexp(1.0, k.e1);
    k.c2 = ldexp(1.0, k.e2);
    return k;
}

SF_BKG_HD static inline void sf_bane_add(sf_bane_sums *t, float v, const sf_bane_scale *k)
{
    double d = (double)v;
    t->s1 += SF_BANE_RINT(SF_BKG_DMUL(d, k->c1));
    t->s2 += SF_BANE_RINT(SF_BKG_DMUL(SF_BKG_DMUL(d, d), k->c2));
    t->n += 1.0;
}

/* Mean and sigma (ddof 0) of the pixels from their sums. */
SF_BKG_HD static inline void sf_bane_mean_sigma(sf_bane_sums t, const sf_bane_scale *k,
                                                double *mean, double *sigma)
{
    double m = ldexp(t.s1, -k->e1) / t.n;
    double var = ldexp(t.s2, -k->e2) / t.n - SF_BKG_DMUL(m, m);
    *mean = m;
    *sigma = var > 0.0 ? sqrt(var) : 0.0;
}

/* The largest |v| of the cells a box [x0, x1) x [y0, y1) touches, from the
 * grid of cell maxima cm (ccx columns; -1: no finite pixel). */
SF_BKG_HD static inline float sf_bane_cells_max(const float *cm, int ccx, int step, int x0, int x1,
                                                int y0, int y1)
{
    float m = -1.0f;
    for (int cy = y0 / step; cy <= (y1 - 1) / step; cy++)
        for (int cx = x0 / step; cx <= (x1 - 1) / step; cx++) {
            float c = cm[(size_t)cy * ccx + cx];
            m = c > m ? c : m;
        }
    return m;
}

/* The scale of a clipping pass: its bounds bound |v|. */
SF_BKG_HD static inline double sf_bane_bound_max(double lo, double hi)
{
    double a = fabs(lo), b = fabs(hi);
    return a > b ? a : b;
}

/* The next pass's bounds, intersected with those of the pixels kept so far
 * (BANE clips the clipped array again). */
SF_BKG_HD static inline void sf_bane_bounds(double mean, double sigma, double kappa, double *lo,
                                            double *hi)
{
    double l = mean - SF_BKG_DMUL(kappa, sigma), h = mean + SF_BKG_DMUL(kappa, sigma);
    if (l > *lo)
        *lo = l;
    if (h < *hi)
        *hi = h;
}

SF_BKG_HD static inline int sf_bane_kept(float v, double lo, double hi)
{
    return isfinite(v) && (double)v > lo && (double)v < hi;
}

/* BANE's stopping rule after a pass took sigma from s0 to s. */
SF_BKG_HD static inline int sf_bane_settled(double s0, double s)
{
    return s0 + s > 0.0 && 2.0 * fabs(s0 - s) / (s0 + s) < SF_BANE_TOL;
}

/* Bilinear position of pixel p between nodes: node k and k+1 (k <= nn-2)
 * and the fraction t in [0, 1). */
SF_BKG_HD static inline void sf_bane_axis(int p, int n, int step, int nn, int *k, double *t)
{
    int kk = p / step, a, b;
    if (kk > nn - 2)
        kk = nn - 2;
    a = sf_bane_node_pos(kk, nn, n, step);
    b = sf_bane_node_pos(kk + 1, nn, n, step);
    *k = kk;
    *t = (double)(p - a) / (double)(b - a);
}

/* The maps' bilinear rule, the same operations on both backends: the map
 * value at a pixel (kx, tx; ky, ty from sf_bane_axis) of node values v
 * (ncx a row, widened to double) is
 *   (float)sf_bane_lerp(sf_bane_lerp(v[i], v[i + 1], tx),
 *                       sf_bane_lerp(v[i + ncx], v[i + ncx + 1], tx), ty)
 * with i = ky ncx + kx, NaN where the image is NaN. The two inner lerps,
 * along the node rows above and below, depend on the column alone while
 * rows lie between the same node rows, so both backends keep them for a
 * column (cpu/background_bane.c in each thread's arrays, bane_maps in
 * registers) and a pixel takes the outer lerp only. */
SF_BKG_HD static inline double sf_bane_lerp(double a, double b, double t)
{
    return a + SF_BKG_DMUL(b - a, t);
}

/* One pixel of a map of a host grid (sf_background_bane_grid_cpu; v its
 * level or rms), the rule above: the bits sf_bane_maps_cpu writes there
 * where the image is not NaN (the caller sets NaN: sf_bkg_view_at). */
SF_BKG_HD static inline float sf_bane_grid_at(const sf_bane_grid *g, const double *v, int x, int y)
{
    const int ncx = g->ncx;
    const size_t i = (size_t)g->ay[y].k * ncx + g->ax[x].k;
    const double tx = g->ax[x].t;
    return (float)sf_bane_lerp(sf_bane_lerp(v[i], v[i + 1], tx),
                               sf_bane_lerp(v[i + ncx], v[i + ncx + 1], tx), g->ay[y].t);
}

/* ---- the cell path --------------------------------------------------------
 * When box is a multiple of 2 step, the box of a node at a multiple of step
 * is a union of whole grid cells (step x step pixels aligned at 0; the far
 * cells narrower). Such nodes do not read pixels: each cell's finite values
 * are sorted once (by sf_fkey order) with running sums outward from the
 * cell's middle index m = c/2 (a1[i] = s[m] + ... + s[i] for i >= m, a1[i]
 * = s[i] + ... + s[m-1] for i < m, in sf_bane_scan's association; a2 the
 * same of s*s; kept as a compact record, sf_bane_entry), so the kept values
 * of a cell (lo < v < hi) are an index range [a, b) found by two binary
 * searches, and their sums come from at most two running sums that never
 * reach past the range's far end (an outlier at a cell's end does not
 * enter the sums of ranges without it). A node adds its cells' range sums
 * in the lane order of sf_bane_lanes_total; both backends run these same
 * double operations in that order, so their bits agree. Nodes whose box is not cell-aligned (the far-edge nodes
 * when the image side is not a multiple of step; every node when box is
 * not a multiple of 2 step) read their pixels as above. The two ways sum
 * in different orders: they differ in the last bits, not in what they
 * compute. Steps above SF_BANE_CELL_STEP_MAX, and boxes of more than
 * SF_BANE_CELL_SPAN_MAX steps, read pixels everywhere. */
#define SF_BANE_CELL_STEP_MAX 90 /* cells of up to 8100 pixels (the GPU sorts one in shared memory) */
#define SF_BANE_CELL_SPAN_MAX 32 /* box / step: at most 32 x 32 cells a node (the GPU's shared arrays) */
SF_BKG_HD static inline int sf_bane_use_cells(int step, int box)
{
    return step <= SF_BANE_CELL_STEP_MAX && box % (2 * step) == 0 &&
           box / step <= SF_BANE_CELL_SPAN_MAX;
}

SF_BKG_HD static inline int sf_bane_aligned(int px, int py, int step, int box)
{
    return sf_bane_use_cells(step, box) && px % step == 0 && py % step == 0;
}

/* A double bound as a float one for the sorted cells' searches: (double)v
 * <= l exactly when v <= sf_bane_f_le(l) (the largest float at or below l),
 * and (double)v < h exactly when v < sf_bane_f_ge(h) (the smallest float at
 * or above h), for every float v. The GPU's node kernel, bound by the
 * instructions it issues, converts a pass's bounds once and compares floats
 * in its searches instead of widening every value read. */
#ifndef __CUDA_ARCH__
/* The float nearest x on its side dir (< 0: at or below x, else at or
 * above): x rounded to a float, then one step by its bits when that went
 * past x (nextafterf is a call into libm in the CPU's inner loops). */
static inline float sf_bane_f_side(double x, int dir)
{
    union {
        float f;
        unsigned u;
    } r;
    r.f = (float)x;
    if (dir < 0 ? !((double)r.f > x) : !((double)r.f < x))
        return r.f;
    if (r.f == 0.0f)
        return dir < 0 ? -1.40129846e-45f : 1.40129846e-45f;
    r.u = (r.f > 0.0f) == (dir > 0) ? r.u + 1u : r.u - 1u;
    return r.f;
}
#endif

SF_BKG_HD static inline float sf_bane_f_le(double l)
{
#ifdef __CUDA_ARCH__
    return __double2float_rd(l);
#else
    return sf_bane_f_side(l, -1);
#endif
}

SF_BKG_HD static inline float sf_bane_f_ge(double h)
{
#ifdef __CUDA_ARCH__
    return __double2float_ru(h);
#else
    return sf_bane_f_side(h, 1);
#endif
}

/* First index of s[0..c) with s > l (l: sf_bane_f_le of the bound), and
 * first with s >= h (h: sf_bane_f_ge of it). Branch-free bisection (the
 * range halves by a select, the last value decides), so an unpredictable
 * comparison costs no mispredicted branch: the median window's searches
 * were about a third of the CPU's BANE. */
SF_BKG_HD static inline int sf_bane_upper_f(const float *s, int c, float l)
{
    const float *b = s;
    if (c <= 0)
        return 0;
    while (c > 1) { /* the answer is in [b - s, b - s + c] */
        const int half = c / 2;
        b = b[half] <= l ? b + half : b;
        c -= half;
    }
    return (int)(b - s) + (*b <= l);
}

SF_BKG_HD static inline int sf_bane_lower_f(const float *s, int c, float h)
{
    const float *b = s;
    if (c <= 0)
        return 0;
    while (c > 1) {
        const int half = c / 2;
        b = b[half] < h ? b + half : b;
        c -= half;
    }
    return (int)(b - s) + (*b < h);
}

/* The same with double bounds. */
SF_BKG_HD static inline int sf_bane_upper(const float *s, int c, double l)
{
    return sf_bane_upper_f(s, c, sf_bane_f_le(l));
}

SF_BKG_HD static inline int sf_bane_lower(const float *s, int c, double h)
{
    return sf_bane_lower_f(s, c, sf_bane_f_ge(h));
}

/* The same two searches within a cell's kept range [a, b) of the previous
 * pass, galloping in from its ends: a clipping pass moves the bounds in by
 * a few values a cell, so this reads O(log d) values for d values clipped
 * instead of O(log c). They need only that every value before a is <= l
 * (upper) and every value from b on is >= h (lower); then the index found
 * is the one sf_bane_upper / sf_bane_lower find in the whole cell, clamped
 * to [a, b]. Bounds only tighten from pass to pass (l >= the previous low
 * bound, h <= the previous high one), so the passes meet that; so does the
 * median's window, whose upper end is searched from its lower end's index. */
SF_BKG_HD static inline int sf_bane_upper_from_f(const float *s, int a, int b, float l)
{
    int lo = a, hi, g = 1;
    for (;;) { /* s[a..lo) <= l */
        const int p = lo + g - 1;
        if (p >= b) {
            hi = b;
            break;
        }
        if (s[p] > l) {
            hi = p;
            break;
        }
        lo = p + 1;
        g <<= 1;
    }
    return lo + sf_bane_upper_f(s + lo, hi - lo, l); /* the answer is in [lo, hi] */
}

SF_BKG_HD static inline int sf_bane_lower_from_f(const float *s, int a, int b, float h)
{
    int lo, hi = b, g = 1;
    for (;;) { /* s[hi..b) >= h */
        const int p = hi - g;
        if (p < a) {
            lo = a;
            break;
        }
        if (s[p] < h) {
            lo = p + 1;
            break;
        }
        hi = p;
        g <<= 1;
    }
    return lo + sf_bane_lower_f(s + lo, hi - lo, h);
}

/* A cell's running sums (s sorted, c values). Each half (upward from m =
 * c/2, and downward from m-1) is cut into 32 chunks of ceil(len/32) values
 * (SF_BANE_CHUNKS; the last ones short or empty); inside a chunk the sums
 * run from its start (u = u + d); the chunks' totals t_q get their offsets
 * P_q by a scan in the association of a warp's shuffle scan (sf_bane_scan:
 * x_q = t_q, then for o = 1, 2, 4, 8, 16 every x_q with q >= o becomes
 * x_(q-o) + x_q at once; P_0 = 0, P_q = x_(q-1)), and an entry is P + u. So
 * a1[i] is a sum of s[m..i] (or s[i..m-1]) in a fixed association that a
 * warp computes with one chunk a lane and five shuffle steps (the GPU's
 * bane_records_warp: the same operations, so the same bits; a chain of 32
 * dependent additions there cost a third of its cell sort). The record
 * keeps P_q and checkpoints (below). */
#define SF_BANE_CHUNKS 32
SF_BKG_HD static inline void sf_bane_scan(double x[SF_BANE_CHUNKS])
{
    for (int o = 1; o < SF_BANE_CHUNKS; o <<= 1)
        for (int q = SF_BANE_CHUNKS - 1; q >= o; q--) /* downwards: x[q - o] is still the old one */
            x[q] = x[q - o] + x[q];
}

/* A cell's running sums are not stored value by value (16 bytes a value,
 * more than the sorted values themselves, written by the cell sort and
 * faulted in by the CPU's ring): each half keeps its chunks' offsets P_q
 * and, inside a chunk, the running sum u after every SF_BANE_CK-th value
 * (checkpoints); an entry a1[i] = P_q + u_i is recomputed from the nearest
 * checkpoint by the same additions u = u + d that made it, so it has the
 * same bits, reading at most SF_BANE_CK - 1 sorted values next to the one a
 * search just found. A half of len values has chunks of cl = ceil(len /
 * 32) values, nq = min(len, 32) chunk slots (past 32 values the last few
 * chunks may be empty: their slots are not read) and nck = cl / SF_BANE_CK
 * checkpoints a chunk; its record is nq pairs (P_q: the sums of s and of
 * s*s), then nq nck pairs (chunk q's checkpoint t at q nck + t: u after
 * value q cl + t CK + CK - 1). Every size is a shift or a select, no
 * division, so an entry finds its half at once. A cell's record is one
 * pair, the whole cell's sums (which every node's first pass asks of every
 * cell: sf_bane_entries of [0, c), kept), then the upper half's record
 * (from m = c/2 up), then the lower one's. At 17 x 17 cells that is 1 + 32
 * + 32 pairs for 289 values. */
#define SF_BANE_CK 8
typedef struct {
    double s1, s2; /* a sum of s and of s*s */
} sf_bane_pair;

SF_BKG_HD static inline int sf_bane_half_pairs(int len, int *cl, int *nq, int *nck)
{
    const int l = (len + SF_BANE_CHUNKS - 1) / SF_BANE_CHUNKS;
    *cl = l;
    *nq = len < SF_BANE_CHUNKS ? len : SF_BANE_CHUNKS;
    *nck = l / SF_BANE_CK;
    return *nq * (1 + *nck);
}

/* Pairs in the record of a cell of c values. */
SF_BKG_HD static inline int sf_bane_rec_pairs(int c)
{
    int cl, nq, nck;
    return 1 + sf_bane_half_pairs(c - c / 2, &cl, &nq, &nck) +
           sf_bane_half_pairs(c / 2, &cl, &nq, &nck);
}

/* Room for the record of any cell of a step x step grid (the pairs grow
 * with the count). */
static inline int sf_bane_rec_slot(int step)
{
    return sf_bane_rec_pairs(step * step);
}

/* Entry i of a cell's running sums (a1[i] and a2[i] above) from its sorted
 * values s (c of them) and its record. */
SF_BKG_HD static inline void sf_bane_entry(const float *s, int c, const sf_bane_pair *rec, int i,
                                           double *r1, double *r2)
{
    const int m = c / 2, up = i >= m;
    int cl, nq, nck, j;
    rec++; /* past the whole cell's sums */
    if (up) {
        (void)sf_bane_half_pairs(c - m, &cl, &nq, &nck);
        j = i - m;
    } else {
        int clu, nqu, ncku;
        rec += sf_bane_half_pairs(c - m, &clu, &nqu, &ncku);
        (void)sf_bane_half_pairs(m, &cl, &nq, &nck);
        j = m - 1 - i;
    }
    {
        const int q = j / cl, r = j - q * cl, t = (r + 1) / SF_BANE_CK;
        double u1 = 0.0, u2 = 0.0;
        if (t) {
            const sf_bane_pair k = rec[nq + q * nck + t - 1];
            u1 = k.s1;
            u2 = k.s2;
        }
        /* r - t CK + 1 values, at most CK - 1 (cl <= 7 when nck is 0): a
         * fixed loop, so that the GPU issues their loads at once */
        const int jj0 = q * cl + t * SF_BANE_CK, nv = r - t * SF_BANE_CK + 1;
        const float *sv = up ? s + m + jj0 : s + m - 1 - jj0;
        const int dv = up ? 1 : -1;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int k = 0; k < SF_BANE_CK - 1; k++)
            if (k < nv) {
                const double d = (double)sv[k * dv];
                u1 = u1 + d;
                u2 = u2 + SF_BKG_DMUL(d, d);
            }
        *r1 = rec[q].s1 + u1;
        *r2 = rec[q].s2 + u2;
    }
}

/* The sums of s[a..b) and of their squares (a cell of c values, its
 * record) from at most two entries, so that a range never reaches past its
 * own ends (an outlier at a cell's end does not enter the sums of ranges
 * without it). */
SF_BKG_HD static inline void sf_bane_entries(const float *s, int c, const sf_bane_pair *rec, int a,
                                             int b, double *x1, double *x2)
{
    const int m = c / 2;
    double p1, p2, q1, q2;
    if (a >= b) {
        *x1 = *x2 = 0.0;
        return;
    }
    if (a >= m) {
        sf_bane_entry(s, c, rec, b - 1, &p1, &p2);
        if (a > m) {
            sf_bane_entry(s, c, rec, a - 1, &q1, &q2);
            p1 = p1 - q1;
            p2 = p2 - q2;
        }
    } else if (b <= m) {
        sf_bane_entry(s, c, rec, a, &p1, &p2);
        if (b < m) {
            sf_bane_entry(s, c, rec, b, &q1, &q2);
            p1 = p1 - q1;
            p2 = p2 - q2;
        }
    } else {
        sf_bane_entry(s, c, rec, a, &p1, &p2);
        sf_bane_entry(s, c, rec, b - 1, &q1, &q2);
        p1 = p1 + q1;
        p2 = p2 + q2;
    }
    *x1 = p1;
    *x2 = p2;
}

/* The same, the whole cell's from its record's first pair (which
 * sf_bane_records computed by sf_bane_entries). */
SF_BKG_HD static inline void sf_bane_range2(const float *s, int c, const sf_bane_pair *rec, int a,
                                            int b, double *x1, double *x2)
{
    if (a == 0 && b == c && c > 0) {
        *x1 = rec[0].s1;
        *x2 = rec[0].s2;
        return;
    }
    sf_bane_entries(s, c, rec, a, b, x1, x2);
}

/* One half's record (see sf_bane_entry): len values from m, upward (dir >
 * 0) or downward. Returns the pairs written. */
SF_BKG_HD static inline int sf_bane_half_rec(const float *s, int m, int len, int dir,
                                             sf_bane_pair *rec)
{
    int cl, nq, nck;
    const int np = sf_bane_half_pairs(len, &cl, &nq, &nck);
    double x1[SF_BANE_CHUNKS], x2[SF_BANE_CHUNKS];
    for (int q = 0; q < SF_BANE_CHUNKS; q++) {
        double u1 = 0.0, u2 = 0.0;
        for (int j = q * cl; j < (q + 1) * cl && j < len; j++) {
            const double d = (double)s[dir > 0 ? m + j : m - 1 - j];
            u1 = u1 + d;
            u2 = u2 + SF_BKG_DMUL(d, d);
        }
        x1[q] = u1;
        x2[q] = u2;
    }
    sf_bane_scan(x1);
    sf_bane_scan(x2);
    for (int q = 0; q < nq; q++) {
        double u1 = 0.0, u2 = 0.0;
        rec[q].s1 = q ? x1[q - 1] : 0.0;
        rec[q].s2 = q ? x2[q - 1] : 0.0;
        for (int r = 0; r < nck * SF_BANE_CK && q * cl + r < len; r++) {
            const int j = q * cl + r;
            const double d = (double)s[dir > 0 ? m + j : m - 1 - j];
            u1 = u1 + d;
            u2 = u2 + SF_BKG_DMUL(d, d);
            if (r % SF_BANE_CK == SF_BANE_CK - 1) {
                rec[nq + q * nck + r / SF_BANE_CK].s1 = u1;
                rec[nq + q * nck + r / SF_BANE_CK].s2 = u2;
            }
        }
    }
    return np;
}

/* A cell's record (sf_bane_entry) from its c sorted values. */
SF_BKG_HD static inline void sf_bane_records(const float *s, int c, sf_bane_pair *rec)
{
    const int m = c / 2;
    sf_bane_pair *h = rec + 1;
    h += sf_bane_half_rec(s, m, c - m, 1, h);
    (void)sf_bane_half_rec(s, m, m, -1, h);
    sf_bane_entries(s, c, rec, 0, c, &rec[0].s1, &rec[0].s2);
}

/* The mean of the nb node levels for the run summary: chunk q of the
 * SF_BANE_GRID_CHUNKS chunks is the values q, q + 1024, q + 2048, ...,
 * summed in that order from 0.0, and the chunks' sums are added in chunk
 * order (a GPU block of 1024 threads, a chunk each, computes the same with
 * its loads side by side; chunks of consecutive values made each of its
 * loads touch 32 lines, 50 us at 8192^2). */
#define SF_BANE_GRID_CHUNKS 1024
SF_BKG_HD static inline double sf_bane_grid_mean(const float *fb, int nb)
{
    double t = 0.0;
    for (int q = 0; q < SF_BANE_GRID_CHUNKS; q++) {
        double u = 0.0;
        for (int i = q; i < nb; i += SF_BANE_GRID_CHUNKS)
            u = u + (double)fb[i];
        t = t + u;
    }
    return t / nb;
}

/* A node's total of its cells' range sums, cell i (raster order) in lane
 * i % 32: each lane adds its cells in raster order from 0.0 (t[i % 32] =
 * t[i % 32] + r_i), then the 32 lanes pairwise, lane i taking lane i + o
 * for o = 16, 8, 4, 2, 1: a warp with a cell or two a lane computes it with
 * five shuffles, where a sum in raster order kept every lane of the GPU's
 * node waiting on a chain of 36 dependent additions each pass. Destroys t. */
#define SF_BANE_LANES 32
SF_BKG_HD static inline double sf_bane_lanes_total(double t[SF_BANE_LANES])
{
    for (int o = SF_BANE_LANES / 2; o; o >>= 1)
        for (int i = 0; i < o; i++)
            t[i] = t[i] + t[i + o];
    return t[0];
}

/* Mean and sigma (ddof 0) from plain double sums (the cell path). */
SF_BKG_HD static inline void sf_bane_mean_sigma_d(double n, double s1, double s2, double *mean,
                                                  double *sigma)
{
    double m = s1 / n, var = s2 / n - SF_BKG_DMUL(m, m);
    *mean = m;
    *sigma = var > 0.0 ? sqrt(var) : 0.0;
}

/* The work a step and box ask of an nx x ny image: 0 when it is sane, else
 * SF_ERR_PARAM with a message naming the file's problem (both backends):
 * at most 2^30 nodes, and at most 2^33 box-pixel reads a pass when the
 * nodes read their boxes (without the cell path: say step 1 and box 10000
 * on a 4096^2 image would read for days). */
static inline sf_status sf_bane_check_work(int nx, int ny, int step, int box)
{
    const long long nodes = (long long)sf_bane_nnodes(nx, step) * sf_bane_nnodes(ny, step);
    const double reads = (double)nodes * (double)(box < nx ? box : nx) * (double)(box < ny ? box : ny);
    if (nodes > (1LL << 30))
        return sf_fail(SF_ERR_PARAM,
                       "background bane: step %d gives %lld nodes on a %dx%d image (at most 2^30)",
                       step, nodes, nx, ny);
    if (!sf_bane_use_cells(step, box) && reads > 8589934592.0 /* 2^33 */)
        return sf_fail(SF_ERR_PARAM,
                       "background bane: step %d and box %d would read %.3g pixels a pass on a "
                       "%dx%d image; use a larger step, or a box that is a multiple of 2 steps "
                       "(at most 32 steps)",
                       step, box, reads, nx, ny);
    return SF_OK;
}

/* Bytes of device scratch the GPU version needs (step 0: auto, counted as
 * 4, the least a beam of a pixel or more gives, with the cell path's arrays;
 * scratch grows on demand): the node grids, cell maxima, the list of nodes
 * the GPU's warp path leaves to its block path, and for the cell path each
 * cell's count, offset and record (sf_bane_rec_slot pairs) and every finite
 * pixel's value. */
#define SF_BANE_ALIGN(b) (((b) + 255) / 256 * 256)
/* the GPU's scan of the cell counts: its temporary storage (cub asks for
 * about 16 bytes a tile of a few thousand counts) */
#define SF_BANE_SCAN_TEMP(nc) SF_BANE_ALIGN((size_t)(nc) + 65536)
/* Room for the cells' sorted values (and each of their running sums) on
 * the GPU: a slot of step^2 values a cell (its warp cell sort; the far
 * cells' slots partly empty), which holds the packed layout too. */
static inline size_t sf_bane_cell_values(int nx, int ny, int step)
{
    return (size_t)((nx + step - 1) / step) * (size_t)((ny + step - 1) / step) * (size_t)step *
           (size_t)step;
}

static inline size_t sf_bane_scratch_bytes(int nx, int ny, int step, int box)
{
    size_t nb, nc, bytes;
    if (nx < 1 || ny < 1)
        return 0;
    if (step < 1) {
        step = 4;
        box = 0;
    }
    nb = (size_t)sf_bane_nnodes(nx, step) * (size_t)sf_bane_nnodes(ny, step);
    nc = (size_t)((nx + step - 1) / step) * (size_t)((ny + step - 1) / step);
    bytes = 4096 + 7 * SF_BANE_ALIGN(nb * 4);
    if (sf_bane_use_cells(step, box)) {
        const size_t ns = sf_bane_cell_values(nx, ny, step);
        bytes += SF_BANE_ALIGN((nc + 1) * 8) + SF_BANE_ALIGN(nc * 4) + SF_BANE_ALIGN(ns * 4) +
                 SF_BANE_ALIGN(nc * (size_t)sf_bane_rec_slot(step) * sizeof(sf_bane_pair)) +
                 SF_BANE_SCAN_TEMP(nc);
    }
    return bytes;
}

#ifdef __cplusplus
extern "C" {
#endif
/* The run summary from the filled node grids (fb, fs: nb values each), as
 * both backends report it: median and mean of the levels, median rms. */
void sf_bane_grid_stats(const float *fb, const float *fs, int nb, long long nfinite, int niter,
                        sf_bkg_stats *st);
/* The error when the image has finite pixels but no node's box holds one. */
sf_status sf_bane_no_node(const sf_bkg_params *p, int nx, int ny);
sf_status sf_background_bane_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                                 sf_image *bkg, sf_image *rms);
#ifdef __cplusplus
}
#endif
#endif
