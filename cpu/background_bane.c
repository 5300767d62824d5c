/* Stage `background`, method=bane, CPU twin: BANE's sigma-clipped statistics
 * in a box around every node of a grid, filled, then bilinear maps. The
 * rules, and why the GPU version (gpu/background_bane.cu and
 * gpu/background_bane_grid.cu) gets the same
 * bits, are in src/calc/background_bane.h. Map of this file, in order:
 * - the vector types and extremes (a cell's or a box's min and max);
 * - nodes that read their pixels (the far edge's; every node when the box
 *   is not cell-aligned): bane_sums (a pass's exact sums), middle,
 *   binned_median and bane_median (the exact median: histogram, then only
 *   the middle bins ordered), bane_node; bane_cells, the grid of cell
 *   maxima that sets their sums' scale when there is no cell path;
 * - the cell path, for cell-aligned nodes from sorted cells and their
 *   running sums' records:
 *   - the ring of cell rows: bane_cellset, cell_index, cell_values;
 *   - a cell's sort and records: key_sort, bucket_sort, bane_ring_alloc,
 *     bane_cell_fill (which also sets the cell's maximum and counts its
 *     finite pixels), cell_at, bane_cells_free;
 *   - a node's searches in its cells: lower_near (a gallop from a guess),
 *     near_lower (a few values counted around a guess), window_lower2 (two
 *     bounds counted in 16 values around a guess), pass_upper and
 *     pass_lower (a clipping pass's new ends);
 *   - its median from a window placed by its left neighbour's level:
 *     middle_small, median_near; bane_node_cells, the node;
 * - the stage: bane_per, sf_bane_no_node, grid_median and
 *   sf_bane_grid_stats (the run summary), map_row (a row of both maps);
 *   bane_nodes (node rows a group at a time, the group's cells first; the
 *   fill), sf_background_bane_grid_cpu (the nodes as a grid with each
 *   column's and row's place: what the CPU runner keeps, sf_bkg_view in
 *   cpu/background.c), sf_bane_maps_cpu (the maps from a grid a node span
 *   at a time, into the maps or each thread's scratch rows for a row
 *   function: the threshold's pass), sf_background_bane_cpu (both).
 * Nodes run in parallel (OpenMP); each is computed alone, so the maps do not
 * depend on the thread count. bane_node, bane_cell_fill, bane_node_cells
 * and map_row have an AVX2 and a baseline build (src/calc/simd.h: the same
 * bits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/background.h"
#include "simd.h"
#include "background_bane.h"
#include "select.h"
#include "fixsum.h" /* sf_fkey: order-preserving float keys */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#include "wallclock.h"
#endif

/* Eight floats or ints (GCC's vector extension): one AVX2 register in the
 * AVX2 build, two SSE ones in the baseline build; lane by lane compares
 * and selects, so the same results in both. */
typedef float bane_v8f __attribute__((vector_size(32)));
typedef int32_t bane_v8i __attribute__((vector_size(32)));

/* The extremes of v[0..n) (n >= 1, no NaN) into *lo and *hi, eight lanes
 * at a time: a chain of scalar compares costs a compare's latency a value.
 * Which zero an extreme holds (-0 or +0) may depend on the lanes; the
 * callers use the extremes only to scale bins, where it does not matter. */
SF_SIMD_BODY void extremes_body(const float *v, size_t n, float *lo, float *hi)
{
    float vmin = v[0], vmax = v[0];
    size_t i = 0;
    if (n >= 8) {
        bane_v8f l, h;
        memcpy(&l, v, sizeof l);
        h = l;
        for (i = 8; i + 8 <= n; i += 8) {
            bane_v8f x;
            memcpy(&x, v + i, sizeof x);
            const bane_v8i below = x < l, above = x > h;
            l = (bane_v8f)(((bane_v8i)x & below) | ((bane_v8i)l & ~below));
            h = (bane_v8f)(((bane_v8i)x & above) | ((bane_v8i)h & ~above));
        }
        for (int q = 0; q < 8; q++) {
            vmin = l[q] < vmin ? l[q] : vmin;
            vmax = h[q] > vmax ? h[q] : vmax;
        }
    }
    for (; i < n; i++) {
        vmin = v[i] < vmin ? v[i] : vmin;
        vmax = v[i] > vmax ? v[i] : vmax;
    }
    *lo = vmin;
    *hi = vmax;
}

/* Sums over the pixels of buf[0..n) kept by (lo, hi): four double lanes
 * (GCC's vector extension; the keep test a mask, as a loop with the test
 * did not vectorise), then the rest one by one. Each sum is exact
 * (background_bane.h), so their order does not matter. */
typedef double bane_v4d __attribute__((vector_size(32)));
typedef int64_t bane_v4l __attribute__((vector_size(32)));
typedef float bane_v4f __attribute__((vector_size(16)));
SF_SIMD_BODY sf_bane_sums bane_sums(const float *buf, size_t n, double lo, double hi,
                                    const sf_bane_scale *k)
{
    double c = 0, s1 = 0, s2 = 0;
    const double c1 = k->c1, c2 = k->c2;
    size_t i = 0;
    {
        const bane_v4d C1 = {c1, c1, c1, c1}, C2 = {c2, c2, c2, c2}, L = {lo, lo, lo, lo},
                       H = {hi, hi, hi, hi}, one = {1.0, 1.0, 1.0, 1.0},
                       R = {SF_BANE_RND, SF_BANE_RND, SF_BANE_RND, SF_BANE_RND};
        bane_v4d vc = {0.0, 0.0, 0.0, 0.0}, v1 = vc, v2 = vc;
        for (; i + 4 <= n; i += 4) {
            bane_v4f f;
            memcpy(&f, buf + i, sizeof f);
            const bane_v4d d = __builtin_convertvector(f, bane_v4d);
            const bane_v4l in = (d > L) & (d < H); /* buf holds finite pixels only */
            const bane_v4d t1 = (d * C1 + R) - R, t2 = ((d * d) * C2 + R) - R;
            v1 += (bane_v4d)((bane_v4l)t1 & in);
            v2 += (bane_v4d)((bane_v4l)t2 & in);
            vc += (bane_v4d)((bane_v4l)one & in);
        }
        for (int q = 0; q < 4; q++) {
            c += vc[q];
            s1 += v1[q];
            s2 += v2[q];
        }
    }
    for (; i < n; i++) {
        const double d = (double)buf[i];
        if (d > lo && d < hi) {
            s1 += SF_BANE_RINT(d * c1);
            s2 += SF_BANE_RINT((d * d) * c2);
            c += 1.0;
        }
    }
    {
        sf_bane_sums t = {c, s1, s2};
        return t;
    }
}

/* The median from m candidates v holding the middle rank(s): the one at
 * rank r among them, or with two (an even count) the float32 mean of ranks
 * r-1 and r, as sf_median_f32. */
static float middle(float *v, size_t m, size_t r, int two)
{
    float lo, hi;
    if (!two)
        return sf_select_kth(v, m, r);
    hi = sf_select_kth_prev(v, m, r, &lo);
    return sf_mean2_f32(lo, hi);
}

#define BANE_BINS 4096
/* The exact median (sf_median_f32's value) of the nk values of v[0..n)
 * with l < v < h (v finite; l and h may be infinite), by BANE_BINS bins of
 * equal width from base: a value's bin is (v - base) * scale rounded down
 * (a monotone map, so the bins are in value order; below BANE_BINS for
 * every value kept), a value not kept adds 0 to bin 0, the bins holding
 * the middle ranks are found from the counts, and only the kept values in
 * them are compacted and ordered exactly (the GPU's radix select gives the
 * same value). v is reordered; hist: BANE_BINS counters of scratch. */
SF_SIMD_BODY float binned_median(float *v, size_t n, double l, double h, double base,
                                 double scale, size_t nk, unsigned *hist)
{
    const size_t k = nk / 2, km = nk % 2 ? k : k - 1;
    size_t below, m = 0, c = 0;
    unsigned blo, bhi, b = 0;
    memset(hist, 0, BANE_BINS * sizeof *hist);
    for (size_t i = 0; i < n; i++) {
        const double d = (double)v[i], x = (d - base) * scale;
        const int in = d > l && d < h;
        hist[in ? (unsigned)x : 0] += (unsigned)in;
    }
    /* the bins of ranks km and k */
    while (c + hist[b] <= km)
        c += hist[b++];
    blo = b;
    below = c;
    while (c + hist[b] <= k)
        c += hist[b++];
    bhi = b;
    for (size_t i = 0; i < n; i++) { /* compacted without a branch (half of them are taken) */
        const double d = (double)v[i], x = (d - base) * scale;
        const int in = d > l && d < h;
        const unsigned bi = in ? (unsigned)x : 0;
        v[m] = v[i];
        m += in && bi >= blo && bi <= bhi;
    }
    /* v[0..m) holds ranks below .. below+m-1, km and k among them */
    return middle(v, m, k - below, km != k);
}

/* sf_median_f32 of v[0..n) (finite; reordered), faster for large n: the
 * bins span the values' extremes. */
SF_SIMD_BODY float bane_median(float *v, size_t n, unsigned *hist)
{
    float vmin, vmax;
    if (n < 64)
        return sf_median_f32(v, n);
    extremes_body(v, n, &vmin, &vmax);
    if (!(vmax > vmin))
        return vmin;
    return binned_median(v, n, -INFINITY, INFINITY, vmin,
                         (BANE_BINS - 1) / ((double)vmax - (double)vmin), n, hist);
}

/* One node: level and rms, NaN when its box has no finite pixel; returns
 * the clipping passes taken. buf holds box*box floats of scratch; cm the
 * grid of cell maxima (ccx columns). */
SF_SIMD_BODY int bane_node_body(const sf_image *img, const sf_bkg_params *p, const float *cm,
                                int ccx, int px, int py, float *buf, unsigned *hist,
                                float *level, float *rms)
{
    int x0, x1, y0, y1, it = 0;
    size_t n = 0, nk, nkept;
    long long area;
    double lo = -INFINITY, hi = INFINITY, mean, sigma;
    sf_bane_scale k;
    sf_bane_sums t = {0, 0, 0};
    sf_bane_box(px, p->box, img->nx, &x0, &x1);
    sf_bane_box(py, p->box, img->ny, &y0, &y1);
    if (x1 <= x0 || y1 <= y0) {
        *level = *rms = NAN;
        return 0;
    }
    area = (long long)(x1 - x0) * (y1 - y0);
    k = sf_bane_scale_for(sf_bane_cells_max(cm, ccx, p->step, x0, x1, y0, y1), area);
    for (int y = y0; y < y1; y++) { /* the finite pixels, compacted without a branch */
        const float *row = img->data + (size_t)y * img->stride;
        for (int x = x0; x < x1; x++) {
            buf[n] = row[x];
            n += isfinite(row[x]) != 0;
        }
    }
    if (!n) {
        *level = *rms = NAN;
        return 0;
    }
    /* their sums are exact (background_bane.h), so bane_sums' lanes give
     * the bits sf_bane_add gives pixel by pixel */
    t = bane_sums(buf, n, -INFINITY, INFINITY, &k);
    nkept = n;
    sf_bane_mean_sigma(t, &k, &mean, &sigma);
    while (it < SF_BANE_PASSES) {
        double l = lo, h = hi, s0 = sigma;
        sf_bane_scale kk;
        sf_bane_sums u;
        sf_bane_bounds(mean, sigma, p->kappa, &l, &h);
        kk = sf_bane_scale_for(sf_bane_bound_max(l, h), area);
        u = bane_sums(buf, n, l, h, &kk);
        if (u.n == 0)
            break;
        it++;
        lo = l;
        hi = h;
        nkept = (size_t)u.n;
        sf_bane_mean_sigma(u, &kk, &mean, &sigma);
        if (sf_bane_settled(s0, sigma))
            break;
    }
    if (isfinite(lo) && isfinite(hi) && hi > lo && nkept >= 64) {
        /* the bins span the last pass's bounds, so the kept values need no
         * compaction and no extremes first (two passes over the box, half
         * of a far-edge node's time) */
        *level = binned_median(buf, n, lo, hi, lo, (BANE_BINS - 1) / (hi - lo), nkept, hist);
    } else {
        /* the kept pixels, compacted, for their exact median */
        nk = 0;
        for (size_t i = 0; i < n; i++) { /* compacted without a branch */
            const float f = buf[i];
            buf[nk] = f;
            nk += sf_bane_kept(f, lo, hi);
        }
        *level = bane_median(buf, nk, hist);
    }
    *rms = (float)sigma;
    return it;
}

SF_SIMD_KERNEL(int, bane_node,
               (const sf_image *img, const sf_bkg_params *p, const float *cm, int ccx, int px,
                int py, float *buf, unsigned *hist, float *level, float *rms),
               (img, p, cm, ccx, px, py, buf, hist, level, rms))

/* The grid of cell maxima: the largest finite |v| of each step x step cell
 * (aligned at 0), -1 for a cell without a finite pixel. Returns the image's
 * finite pixels (the run summary's count). */
static long long bane_cells(const sf_image *img, int step, float *cm, int ccx, int ccy)
{
    long long nfinite = 0;
#pragma omp parallel for schedule(static) reduction(+ : nfinite)
    for (int cy = 0; cy < ccy; cy++) {
        float *c = cm + (size_t)cy * ccx;
        for (int cx = 0; cx < ccx; cx++)
            c[cx] = -1.0f;
        for (int y = cy * step; y < (cy + 1) * step && y < img->ny; y++) {
            const float *row = img->data + (size_t)y * img->stride;
            for (int cx = 0, x0 = 0; cx < ccx; cx++, x0 += step) {
                const int x1 = x0 + step < img->nx ? x0 + step : img->nx;
                float m = c[cx];
                int nf = 0;
                for (int x = x0; x < x1; x++) {
                    const float a = fabsf(row[x]);
                    const int fin = isfinite(a);
                    nf += fin;
                    m = fin && a > m ? a : m;
                }
                c[cx] = m;
                nfinite += nf;
            }
        }
    }
    return nfinite;
}

/* ---- the cell path (background_bane.h) ---------------------------------- */
/* The cells are kept for a band of cell rows only: a ring of w rows (the
 * box's span in cells, at most the image's), cell row cy in ring row cy % w,
 * each cell in a slot of step^2 values; with a group of K node rows done at
 * once (sf_background_bane_cpu: 1 on one thread, else 8) the ring has w + K
 * - 1 rows. The nodes are done a group at a time, every thread on the same
 * group, and the ring takes the group's new cell rows before each
 * (bane_cell_fill): a few MB that stay in cache, instead of
 * the whole image's cells (20 bytes a pixel when the running sums were kept
 * value by value: at 2048^2, 84 MB whose first touch cost more than sorting
 * them on the development VM; about 5 with the records). */
typedef struct {
    float *v;          /* each cell's finite values, sorted */
    sf_bane_pair *rec; /* their running sums' records (sf_bane_entry) */
    int *cnt;          /* each cell's count */
    int *rrow;         /* cell row cy's first cell in the ring, (cy % w) ccx: a
                        * load instead of a division in the nodes' loops */
    float *cm;         /* the grid of cell maxima (bane_cells' rule), set as
                        * each cell is sorted: its extremes' larger |v| */
    int ccx, ccy, w, step, slot, rslot;
} bane_cellset;

/* Cell (cx, cy)'s place in the ring (its slot ci: values at ci slot,
 * record at ci rslot, count at ci). */
static inline size_t cell_index(const bane_cellset *c, int cx, int cy)
{
    return (size_t)c->rrow[cy] + cx;
}

/* Cell (cx, cy)'s sorted values in the ring. */
static inline const float *cell_values(const bane_cellset *c, int cx, int cy)
{
    return c->v + cell_index(c, cx, cy) * c->slot;
}

/* Sort n keys (sf_fkey order): insertion below 48, else an LSD radix sort
 * of four 8-bit digits through tmp (n keys of scratch), skipping a digit
 * that every key shares. h: the four digits' histograms of the keys
 * (h[d][v]: keys whose digit d, from the lowest, is v), counted as the
 * keys were made; destroyed. The sorted keys are the same whichever way. */
SF_SIMD_BODY void key_sort(uint32_t *k, uint32_t *tmp, int n, unsigned h[4][256])
{
    if (n < 48) {
        for (int i = 1; i < n; i++) {
            uint32_t t = k[i];
            int j = i - 1;
            while (j >= 0 && k[j] > t) {
                k[j + 1] = k[j];
                j--;
            }
            k[j + 1] = t;
        }
        return;
    }
    /* the four digits' offsets, their prefix sums interleaved */
    {
        unsigned acc[4] = {0, 0, 0, 0};
        for (unsigned v = 0; v < 256; v++)
            for (int d = 0; d < 4; d++) {
                const unsigned c = h[d][v];
                h[d][v] = acc[d];
                acc[d] += c;
            }
    }
    uint32_t *src = k, *dst = tmp;
    for (int d = 0, shift = 0; d < 4; d++, shift += 8) {
        unsigned *cnt = h[d];
        const unsigned v0 = (src[0] >> shift) & 255u;
        /* one digit value: every key's offset is 0, the next value's n */
        if (cnt[v0] == 0 && (v0 == 255u ? 1 : cnt[v0 + 1] == (unsigned)n))
            continue;
        for (int i = 0; i < n; i++)
            dst[cnt[(src[i] >> shift) & 255u]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != k)
        memcpy(k, src, (size_t)n * sizeof *k);
}

static sf_status bane_ring_alloc(int ccx, int ccy, int step, int span, bane_cellset *c)
{
    c->ccx = ccx;
    c->ccy = ccy;
    c->w = span < ccy ? span : ccy;
    c->step = step;
    c->slot = step * step;
    c->rslot = sf_bane_rec_slot(step);
    {
        const size_t nc = (size_t)c->w * ccx, n = nc * c->slot;
        c->v = malloc((n + 8) * sizeof *c->v); /* 8 past the last slot: median_near's copies */
        c->rec = malloc(nc * c->rslot * sizeof *c->rec);
        c->cnt = malloc(nc * sizeof *c->cnt);
        c->rrow = malloc((size_t)ccy * sizeof *c->rrow);
        if (!c->v || !c->rec || !c->cnt || !c->rrow)
            return sf_fail(SF_ERR_NOMEM, "background bane: %d rows of sorted cells (%.1f MB)",
                           c->w, (n * 4.0 + nc * c->rslot * 16.0) / 1e6);
        for (int cy = 0; cy < ccy; cy++)
            c->rrow[cy] = (cy % c->w) * ccx;
    }
    return SF_OK;
}

/* Sort a cell's n finite values v (extremes vmin < vmax) as keys k (sf_fkey
 * order) when they spread evenly enough: each value's bucket, one of nb of
 * equal width between the extremes (in float: (v - vmin) * scale rounds
 * monotonically, so the buckets are in value order), the keys placed bucket
 * by bucket, one branch-free bubble pass (a bucket of two is then in
 * order), then an insertion sort that only moves a key within its bucket.
 * Noise fills a cell's buckets evenly (a few values each); a bright
 * source's cell piles most values into a few buckets, where the insertion
 * sort would cost up to n^2/4 moves: then (more than 16 moves a value) it
 * returns 0 with k untouched, for key_sort, as it does when the extremes
 * are too far apart for float arithmetic. The sorted keys are the same
 * either way (one order of the keys); at 17 x 17 cells this is about 2x
 * faster than key_sort's four passes, whose counters chain through memory
 * when neighbours share a digit. bk: n bucket numbers of scratch. */
#define BUCKETS_MAX 4096
SF_SIMD_BODY int bucket_sort(const float *v, int n, float vmin, float vmax, uint32_t *k,
                             unsigned short *bk)
{
    unsigned short start[BUCKETS_MAX + 1];
    int nb = 16;
    long pairs = 0; /* pairs of values sharing a bucket */
    while (nb < n && nb < BUCKETS_MAX)
        nb <<= 1;
    {
        const double span = (double)vmax - (double)vmin;
        const float scale = (float)((nb - 1) / span);
        if (!(span < 1e38) || !(scale > 0.0f) || !(scale < 1e38f))
            return 0;
        for (int i = 0; i < n; i++) { /* vectorises */
            const int b = (int)((v[i] - vmin) * scale);
            bk[i] = (unsigned short)(b < nb - 1 ? b : nb - 1);
        }
    }
    memset(start, 0, (size_t)(nb + 1) * sizeof *start);
    for (int i = 0; i < n; i++)
        pairs += start[bk[i] + 1]++;
    if (2 * pairs + n > 16L * n) /* the sum of the buckets' squared counts */
        return 0;
    {
        unsigned acc = 0;
        for (int b = 1; b <= nb; b++) {
            acc += start[b];
            start[b] = (unsigned short)acc;
        }
    }
    for (int i = 0; i < n; i++)
        k[start[bk[i]]++] = sf_fkey(v[i]);
    {
        uint32_t carry = k[0];
        for (int i = 1; i < n; i++) {
            const uint32_t t = k[i];
            k[i - 1] = carry < t ? carry : t;
            carry = carry < t ? t : carry;
        }
        k[n - 1] = carry;
    }
    for (int i = 1; i < n; i++) {
        const uint32_t t = k[i];
        int j = i - 1;
        if (k[j] <= t)
            continue;
        while (j >= 0 && k[j] > t) {
            k[j + 1] = k[j];
            j--;
        }
        k[j + 1] = t;
    }
    return 1;
}

/* Cell (cx, cy) into its ring row: its finite values sorted (by sf_fkey
 * order: bucket_sort, else key_sort), then their running sums, and its
 * maximum |v| into the grid of cell maxima. Returns its finite pixels.
 * Both builds (simd.h), the sorts inlined into each. */
SF_SIMD_BODY int bane_cell_fill_body(const sf_image *img, bane_cellset *c, int cx, int cy)
{
    const int step = c->step, nx = img->nx, ny = img->ny;
    const size_t ci = cell_index(c, cx, cy), o = ci * c->slot;
    uint32_t tmp[SF_BANE_CELL_STEP_MAX * SF_BANE_CELL_STEP_MAX];
    unsigned short bk[SF_BANE_CELL_STEP_MAX * SF_BANE_CELL_STEP_MAX];
    float *v = c->v + o, vmin = INFINITY, vmax = -INFINITY;
    uint32_t *k = (uint32_t *)v;
    int n = 0;
    /* the finite values, without a branch (each is written, and kept by
     * advancing n), then their extremes eight lanes at a time: a chain of
     * scalar compares was a fifth of the cell's time (the extremes only set
     * the buckets' scale, so which zero they hold does not matter) */
    for (int y = cy * step; y < (cy + 1) * step && y < ny; y++) {
        const float *row = img->data + (size_t)y * img->stride;
        const int xe = (cx + 1) * step < nx ? (cx + 1) * step : nx;
        for (int x = cx * step; x < xe; x++) {
            const float f = row[x];
            v[n] = f;
            n += isfinite(f);
        }
    }
    if (n)
        extremes_body(v, (size_t)n, &vmin, &vmax);
    if (n >= 48 && vmax > vmin && bucket_sort(v, n, vmin, vmax, tmp, bk)) {
        for (int i = 0; i < n; i++)
            v[i] = sf_fkey_value(tmp[i]);
    } else {
        unsigned h[4][256];
        memset(h, 0, sizeof h);
        for (int i = 0; i < n; i++) {
            const uint32_t u = sf_fkey(v[i]);
            k[i] = u;
            h[0][u & 255u]++;
            h[1][(u >> 8) & 255u]++;
            h[2][(u >> 16) & 255u]++;
            h[3][u >> 24]++;
        }
        key_sort(k, tmp, n, h);
        for (int i = 0; i < n; i++)
            v[i] = sf_fkey_value(k[i]);
    }
    sf_bane_records(v, n, c->rec + ci * c->rslot);
    c->cnt[ci] = n;
    c->cm[(size_t)cy * c->ccx + cx] = n ? fmaxf(fabsf(v[0]), fabsf(v[n - 1])) : -1.0f;
    return n;
}
SF_SIMD_KERNEL(int, bane_cell_fill, (const sf_image *img, bane_cellset *c, int cx, int cy),
               (img, c, cx, cy))

/* Cell (cx, cy), in the ring: its sorted values at *v, their running sums'
 * record at *r; returns its count. */
static inline int cell_at(const bane_cellset *c, int cx, int cy, const float **v,
                          const sf_bane_pair **r)
{
    const size_t ci = cell_index(c, cx, cy);
    *v = c->v + ci * c->slot;
    *r = c->rec + ci * c->rslot;
    return c->cnt[ci];
}

static void bane_cells_free(bane_cellset *c)
{
    free(c->v);
    free(c->rec);
    free(c->cnt);
    free(c->rrow);
}

/* a + sf_bane_lower_f(s + a, b - a, h), the first index of the sorted
 * s[a..b) with s >= h (b if none; h a float bound, sf_bane_f_ge), found by
 * galloping from a guess g and bisecting the last gap: a guess a few
 * values off costs 4 or 5 reads instead of the 8 or 9 of a bisection of
 * the whole range (the median window's searches were a third of the
 * node's time). The index does not depend on the guess. */
static inline int lower_near(const float *s, int a, int b, float h, int g)
{
    int lo, hi, d = 1;
    if (a >= b)
        return a;
    g = g < a ? a : (g < b ? g : b - 1);
    if (s[g] >= h) /* at g or before: downwards, as from a range's end */
        return sf_bane_lower_from_f(s, a, g, h);
    lo = g + 1; /* past g: s[lo - 1] < h */
    for (;;) {
        const int p = g + d;
        if (p >= b) {
            hi = b;
            break;
        }
        if (s[p] >= h) {
            hi = p;
            break;
        }
        lo = p + 1;
        d <<= 1;
    }
    return lo + sf_bane_lower_f(s + lo, hi - lo, h);
}

/* The first index of the sorted s[a..b) with s >= h (b if none), near a
 * guess g (a neighbour's index, a value or two off): the values s[g-2],
 * ..., s[g+1] below h are counted without a branch (out of the range:
 * below at its start, above at its end), which is the index when s[g-3] <
 * h <= s[g+2]; else the search (lower_near) finds it. The branches of a
 * search or a walk, one misprediction a value, were most of the median's
 * time. The index does not depend on g. */
static inline int near_lower(const float *s, int a, int b, float h, int g)
{
    int cnt = 0;
    if (a >= b)
        return a;
    g = g < a ? a : (g > b ? b : g);
    for (int d = -3; d <= 2; d++) {
        const int j = g + d, jj = j < a ? a : (j >= b ? b - 1 : j);
        const float x = j < a ? -INFINITY : (j >= b ? INFINITY : s[jj]);
        if (d == -3 || d == 2) { /* the guards */
            if (d == -3 ? !(x < h) : !(x >= h))
                return lower_near(s, a, b, h, g);
        } else {
            cnt += x < h;
        }
    }
    return g - 2 + cnt;
}

/* Two first indices of the sorted s[a..b), with s >= h1 (*i1) and with s >=
 * h2 (*i2; h1 <= h2), from the 16 values s[g-8 .. g+8) around a guess g:
 * when they lie in [a, b), s[g-8] < h1 and s[g+7] >= h2, the indices are
 * in the window and each is g - 8 plus the window's values below its bound,
 * counted by two vector compares (eight lanes; two SSE halves in the
 * baseline build). Returns 0, with nothing set, when the window does not
 * decide (then near_lower does). One load of the window replaced the six
 * guarded reads of each of median_near's three searches a cell, 36% of a
 * node's time on one thread. The indices do not depend on g. */
SF_SIMD_BODY int window_lower2(const float *s, int a, int b, int g, float h1, float h2, int *i1,
                               int *i2)
{
    const float *w = s + g - 8;
    bane_v8f x0, x1;
    bane_v8i c1, c2;
    int n1 = 0, n2 = 0;
    if (g - 8 < a || g + 8 > b || !(w[0] < h1) || !(w[15] >= h2))
        return 0;
    memcpy(&x0, w, sizeof x0);
    memcpy(&x1, w + 8, sizeof x1);
    {
        const bane_v8f v1 = {h1, h1, h1, h1, h1, h1, h1, h1}, v2 = {h2, h2, h2, h2, h2, h2, h2, h2};
        c1 = (x0 < v1) + (x1 < v1); /* -1 a value below */
        c2 = (x0 < v2) + (x1 < v2);
    }
    for (int q = 0; q < 8; q++) {
        n1 -= c1[q];
        n2 -= c2[q];
    }
    *i1 = g - 8 + n1;
    *i2 = g - 8 + n2;
    return 1;
}

/* A clipping pass's new kept range inside the last one [a, b): the first
 * index with s > l (upper) and the first with s >= h (lower), as
 * sf_bane_upper_from_f and sf_bane_lower_from_f find them. A pass clips a
 * value or two at a cell's ends, so the four values at the end are counted
 * without a branch, and the gallop runs only when all four are clipped. */
static inline int pass_upper(const float *s, int a, int b, float l)
{
    int cnt = 0;
    if (a >= b)
        return a;
    for (int d = 0; d < 4; d++) {
        const int j = a + d, jj = j < b ? j : b - 1;
        cnt += j < b && s[jj] <= l;
    }
    return cnt < 4 ? a + cnt : sf_bane_upper_from_f(s, a + 4, b, l);
}

static inline int pass_lower(const float *s, int a, int b, float h)
{
    int cnt = 0;
    if (a >= b)
        return a;
    for (int d = 1; d <= 4; d++) {
        const int j = b - d, jj = j >= a ? j : a;
        cnt += j >= a && s[jj] >= h;
    }
    return cnt < 4 ? b - cnt : sf_bane_lower_from_f(s, a, b - 4, h);
}

/* The k-th smallest (0-based) of the m values v (m <= 64) by their keys
 * (sf_fkey: -0 before +0, as the GPU's selections), and with two the
 * float32 mean of ranks k-1 and k (middle's rule), for the few candidates
 * of median_near: the value at rank k is the key x with fewer than k + 1
 * keys below it and more than k at or below it, each count taken against
 * every key eight at a time (vector compares, the keys padded to a multiple
 * of eight with INT32_MAX, above every finite value's key), where an
 * insertion sort mispredicted a branch a value. */
SF_SIMD_BODY float middle_small(const float *v, int m, int k, int two)
{
    bane_v8i key[8]; /* sf_fkey with its top bit flipped: signed order */
    int32_t *kk = (int32_t *)key;
    int32_t hi = 0, lo = 0;
    const int nv = (m + 7) / 8;
    for (int i = 0; i < m; i++)
        kk[i] = (int32_t)(sf_fkey(v[i]) ^ 0x80000000u);
    for (int i = m; i < nv * 8; i++)
        kk[i] = INT32_MAX;
    for (int i = 0; i < m; i++) {
        const int32_t x = kk[i];
        const bane_v8i xv = {x, x, x, x, x, x, x, x};
        bane_v8i clt = {0, 0, 0, 0, 0, 0, 0, 0}, cle = clt;
        int lt = 0, le = 0;
        for (int j = 0; j < nv; j++) {
            clt += key[j] < xv; /* -1 where below */
            cle += key[j] <= xv;
        }
        for (int q = 0; q < 8; q++) {
            lt -= clt[q];
            le -= cle[q];
        }
        hi = lt <= k && k < le ? x : hi;
        lo = lt <= k - 1 && k - 1 < le ? x : lo;
    }
    {
        const float fh = sf_fkey_value((uint32_t)hi ^ 0x80000000u),
                    fl = sf_fkey_value((uint32_t)lo ^ 0x80000000u);
        return two ? sf_mean2_f32(fl, fh) : fh;
    }
}

/* The median of a node's kept values (cells cx0..cx1 x cy0..cy1, kept
 * ranges ab, nk values, ranks km and k) from a window placed by a guess,
 * the way a neighbour's median would place it: the kept values below the
 * guess p are counted (C, each cell's index found by galloping from where
 * this thread last searched that cell, hint), and the window holds the
 * ranks km - 16 .. k + 16 if the values near p have the density rho (values
 * a unit of value; a Gaussian's at its peak). When the window holds ranks
 * km and k, its values are the candidates: about 34 instead of the 260 of
 * the general window (bane_node_cells), found in three short searches a
 * cell instead of four longer ones. Returns 0 when it does not hold them,
 * and the general window runs. The median is an exact order statistic, so
 * the guess and the hints change the time, not the value. wk: 3 ints a
 * cell of scratch. */
SF_SIMD_BODY int median_near(const bane_cellset *c, int cx0, int cx1, int cy0, int cy1,
                             const int *ab, int *hint, float p, double rho, size_t km, size_t k,
                             int *wk, float *buf, float *level)
{
    const int ncl = (cx1 - cx0 + 1) * (cy1 - cy0 + 1);
    size_t C = 0, B = 0, M = 0, m = 0;
    int i = 0;
    if (!isfinite(p) || !(rho > 0.0) || !isfinite(rho))
        return 0;
    for (int cy = cy0; cy <= cy1; cy++)
        for (int cx = cx0; cx <= cx1; cx++, i++) {
            const size_t ci = cell_index(c, cx, cy);
            const float *v = c->v + ci * c->slot;
            const int a = ab[2 * i], b = ab[2 * i + 1];
            int l, l2;
            if (!window_lower2(v, a, b, hint[ci], p, p, &l, &l2))
                l = near_lower(v, a, b, p, hint[ci]);
            hint[ci] = l;
            wk[i] = l;
            C += (size_t)(l - a);
        }
    {
        const double vlo = (double)p + ((double)km - (double)C - 16.0) / rho,
                     vhi = (double)p + ((double)k - (double)C + 17.0) / rho;
        const float flo = (float)vlo, fhi = (float)vhi;
        if (!(flo <= fhi))
            return 0;
        i = 0;
        for (int cy = cy0; cy <= cy1; cy++)
            for (int cx = cx0; cx <= cx1; cx++, i++) {
                const float *v = cell_values(c, cx, cy);
                const int a = ab[2 * i], b = ab[2 * i + 1], l = wk[i];
                /* below l every value is < p, from l on >= p */
                int la, ub;
                if (!window_lower2(v, a, b, l, flo, fhi, &la, &ub)) {
                    la = near_lower(v, a, b, flo, l);
                    ub = near_lower(v, la, b, fhi, la > l ? la : l);
                }
                wk[ncl + 2 * i] = la;
                wk[ncl + 2 * i + 1] = ub;
                B += (size_t)(la - a);
                M += (size_t)(ub - la);
            }
    }
    if (!(B <= km && k < B + M))
        return 0;
    i = 0;
    for (int cy = cy0; cy <= cy1; cy++)
        for (int cx = cx0; cx <= cx1; cx++, i++) {
            const float *v = cell_values(c, cx, cy);
            const int la = wk[ncl + 2 * i], nv = wk[ncl + 2 * i + 1] - la;
            /* a cell holds a value or two of the window: four copied at
             * once (buf and the ring have room), the count decides */
            memcpy(buf + m, v + la, 4 * sizeof *buf);
            for (int j = 4; j < nv; j++)
                buf[m + j] = v[la + j];
            m += (size_t)nv;
        }
    *level = m <= 64 ? middle_small(buf, (int)m, (int)(k - B), km != k)
                     : middle(buf, m, k - B, km != k);
    return 1;
}

/* One cell-aligned node (see bane_node for the rule); ab: 8 ints a cell and
 * 4 more of scratch (two ranges a cell, then each cell's range sums), buf:
 * candidates for the median; guess: a neighbour's level (NaN: none), hint:
 * the thread's last index searched in each ring cell (median_near). */
SF_SIMD_BODY int bane_node_cells_body(const bane_cellset *c, const sf_bkg_params *p, int x0,
                                     int x1, int y0, int y1, int *ab, float *buf, float guess,
                                     int *hint, float *level, float *rms)
{
    const int step = p->step, cx0 = x0 / step, cx1 = (x1 - 1) / step, cy0 = y0 / step,
              cy1 = (y1 - 1) / step, ncl = (cx1 - cx0 + 1) * (cy1 - cy0 + 1);
    double n = 0, lo = -INFINITY, hi = INFINITY, mean, sigma;
    double t1[SF_BANE_LANES], t2[SF_BANE_LANES]; /* sf_bane_lanes_total's lanes */
    double *xs = (double *)(ab + 4 * ncl + 4); /* each cell's range sums, as ab's ranges */
    int it = 0, i;
    size_t nk, k, km, below, m;
    /* pass 1: every finite pixel */
    i = 0;
    for (int q = 0; q < SF_BANE_LANES; q++)
        t1[q] = t2[q] = 0.0;
    for (int cy = cy0; cy <= cy1; cy++)
        for (int cx = cx0; cx <= cx1; cx++, i++) {
            const float *v;
            const sf_bane_pair *r;
            const int cnt = cell_at(c, cx, cy, &v, &r);
            ab[2 * i] = 0;
            ab[2 * i + 1] = cnt;
            n += cnt;
            sf_bane_range2(v, cnt, r, 0, cnt, &xs[2 * i], &xs[2 * i + 1]);
            t1[i % SF_BANE_LANES] += xs[2 * i];
            t2[i % SF_BANE_LANES] += xs[2 * i + 1];
        }
    if (n == 0) {
        *level = *rms = NAN;
        return 0;
    }
    sf_bane_mean_sigma_d(n, sf_bane_lanes_total(t1), sf_bane_lanes_total(t2), &mean, &sigma);
    while (it < SF_BANE_PASSES) {
        double l = lo, h = hi, s0 = sigma, un = 0;
        sf_bane_bounds(mean, sigma, p->kappa, &l, &h);
        const float fl = sf_bane_f_le(l), fh = sf_bane_f_ge(h); /* the same decisions */
        for (int q = 0; q < SF_BANE_LANES; q++)
            t1[q] = t2[q] = 0.0;
        i = 0;
        for (int cy = cy0; cy <= cy1; cy++)
            for (int cx = cx0; cx <= cx1; cx++, i++) {
                const float *v;
                const sf_bane_pair *r;
                const int cnt = cell_at(c, cx, cy, &v, &r);
                int a = pass_upper(v, ab[2 * i], ab[2 * i + 1], fl),
                    b = pass_lower(v, ab[2 * i], ab[2 * i + 1], fh);
                if (b < a)
                    b = a;
                /* a range the pass left as it was keeps its sums */
                if (a != ab[2 * i] || b != ab[2 * i + 1])
                    sf_bane_range2(v, cnt, r, a, b, &xs[2 * i], &xs[2 * i + 1]);
                ab[2 * (ncl + i)] = a;
                ab[2 * (ncl + i) + 1] = b;
                un += b - a;
                t1[i % SF_BANE_LANES] += xs[2 * i];
                t2[i % SF_BANE_LANES] += xs[2 * i + 1];
            }
        if (un == 0)
            break;
        it++;
        lo = l;
        hi = h;
        n = un;
        memcpy(ab, ab + 2 * ncl, (size_t)ncl * 2 * sizeof *ab);
        sf_bane_mean_sigma_d(un, sf_bane_lanes_total(t1), sf_bane_lanes_total(t2), &mean, &sigma);
        if (sf_bane_settled(s0, sigma))
            break;
    }
    /* the median of the kept values (ranges ab): the values in a window
     * around the mean that holds ranks km and k, ordered exactly; the window
     * widens until it does (at last: everything) */
    nk = (size_t)n;
    k = nk / 2;
    km = nk & 1 ? k : k - 1;
    if (median_near(c, cx0, cx1, cy0, cy1, ab, hint, isnan(guess) ? (float)mean : guess,
                    0.3989422804014327 * (double)nk / sigma, km, k, (int *)xs, buf, level)) {
        *rms = (float)sigma;
        return it;
    }
    for (int tries = 0;; tries++) {
        double w = tries < 5 ? sigma / 32.0 * (double)(1 << (3 * tries)) : INFINITY;
        double vlo = tries < 5 ? mean - w : -INFINITY, vhi = tries < 5 ? mean + w : INFINITY;
        const float fvlo = sf_bane_f_ge(vlo), fvhi = sf_bane_f_le(vhi);
        size_t nb_ = 0, nu = 0;
        if (tries < 5 && !(w > 0))
            continue;
        /* where vlo falls in a kept range if its values were spread evenly
         * between the clipping bounds (they are nearly so near the mean):
         * the search's first guess */
        const double gf = isfinite(lo) && isfinite(hi) && hi > lo && tries < 5
                              ? (vlo - lo) / (hi - lo) : 0.5;
        const double gfrac = gf > 0.0 ? (gf < 1.0 ? gf : 1.0) : 0.0;
        i = 0;
        for (int cy = cy0; cy <= cy1; cy++)
            for (int cx = cx0; cx <= cx1; cx++, i++) {
                const float *v;
                const sf_bane_pair *r;
                (void)cell_at(c, cx, cy, &v, &r);
                const int a = ab[2 * i], b = ab[2 * i + 1];
                /* within the kept range: the whole cell's indices clamped to it */
                const int la = lower_near(v, a, b, fvlo, a + (int)(gfrac * (b - a))),
                          ub = sf_bane_upper_from_f(v, la, b, fvhi); /* a few values past la */
                nb_ += (size_t)(la - a);
                nu += (size_t)(ub - a);
                ab[2 * (ncl + i)] = la;
                ab[2 * (ncl + i) + 1] = ub;
            }
        if (!(nb_ <= km && k < nu))
            continue;
        below = nb_;
        if (tries < 5 && nu - nb_ > 64) {
            /* A narrower window where ranks km..k fall if the window's values
             * were spread evenly (they nearly are, some hundredths of sigma
             * around the mean), 24 ranks wider each side, searched inside
             * this one (the kept ranges in ab are not needed any more): about
             * 50 values to select from instead of about 260 (the GPU does
             * the same) */
            const double span = vhi - vlo, mw = (double)(nu - nb_);
            const double nlo = vlo + span * (((double)(km - nb_) - 24.0) / mw),
                         nhi = vlo + span * (((double)(k - nb_) + 25.0) / mw);
            const float fnlo = sf_bane_f_ge(nlo), fnhi = sf_bane_f_le(nhi);
            size_t b2 = nb_, u2 = nb_;
            for (i = 0; i < ncl; i++) {
                const float *v;
                const sf_bane_pair *r;
                const int la = ab[2 * (ncl + i)], ub = ab[2 * (ncl + i) + 1];
                (void)cell_at(c, cx0 + i % (cx1 - cx0 + 1), cy0 + i / (cx1 - cx0 + 1), &v, &r);
                ab[2 * i] = la + sf_bane_lower_f(v + la, ub - la, fnlo);
                ab[2 * i + 1] = sf_bane_upper_from_f(v, ab[2 * i], ub, fnhi);
                b2 += (size_t)(ab[2 * i] - la);
                u2 += (size_t)(ab[2 * i + 1] - la);
            }
            if (b2 <= km && k < u2) { /* it holds them: its ranges replace the window's */
                below = b2;
                memcpy(ab + 2 * ncl, ab, (size_t)ncl * 2 * sizeof *ab);
            }
        }
        m = 0;
        i = 0;
        for (int cy = cy0; cy <= cy1; cy++)
            for (int cx = cx0; cx <= cx1; cx++, i++) {
                const float *v;
                const sf_bane_pair *r;
                (void)cell_at(c, cx, cy, &v, &r);
                for (int j = ab[2 * (ncl + i)]; j < ab[2 * (ncl + i) + 1]; j++)
                    buf[m++] = v[j];
            }
        break;
    }
    *level = middle(buf, m, k - below, km != k);
    *rms = (float)sigma;
    return it;
}
SF_SIMD_KERNEL(int, bane_node_cells,
               (const bane_cellset *c, const sf_bkg_params *p, int x0, int x1, int y0, int y1,
                int *ab, float *buf, float guess, int *hint, float *level, float *rms),
               (c, p, x0, x1, y0, y1, ab, buf, guess, hint, level, rms))

/* Pixels of the largest box. */
static size_t bane_per(const sf_bkg_params *p, int nx, int ny)
{
    return (size_t)(p->box < nx ? p->box : nx) * (size_t)(p->box < ny ? p->box : ny);
}

sf_status sf_bane_no_node(const sf_bkg_params *p, int nx, int ny)
{
    return sf_fail(SF_ERR_EMPTY,
                   "background bane: no %dx%d box around the nodes (step %d) of the %dx%d image "
                   "holds a finite pixel",
                   p->box, p->box, p->step, nx, ny);
}

/* sf_bkg_median of v[0..n) (the mesh method's: the middle value, or the
 * float sum of the two middle values halved in double) by radix selection,
 * not a sort: an 8192^2 image has 233,000 nodes. */
static float grid_median(const float *v, int n)
{
    float lo, hi;
    if (n & 1)
        return sf_select_radix(v, (size_t)n, (size_t)n / 2, NULL);
    hi = sf_select_radix(v, (size_t)n, (size_t)n / 2, &lo);
    return (float)((double)(lo + hi) / 2.0);
}

void sf_bane_grid_stats(const float *fb, const float *fs, int nb, long long nfinite, int niter,
                        sf_bkg_stats *st)
{
    memset(st, 0, sizeof *st);
    st->mean = sf_bane_grid_mean(fb, nb);
    st->median = grid_median(fb, nb);
    st->sigma = grid_median(fs, nb);
    st->nvalid = st->nused = nfinite;
    st->niter = niter;
    st->converged = 1;
}

/* A row of both maps from its column lerps (tb, then bb, ts, bs, nx
 * apart: along the row's two node rows, of each map) and its fraction ty
 * between them (both builds, simd.h); NaN where the image row in is NaN
 * (in NULL: an image without NaN); os NULL: the levels alone. */
SF_SIMD_BODY void map_row_body(float *restrict ob, float *restrict os, const float *restrict in,
                              const double *restrict tb, double ty, int nx)
{
    const double *restrict bb = tb + nx, *restrict ts = bb + nx, *restrict bs = ts + nx;
    if (!os) { /* the levels alone */
        for (int x = 0; x < nx; x++) {
            const float vb = (float)sf_bane_lerp(tb[x], bb[x], ty);
            ob[x] = in && isnan(in[x]) ? NAN : vb;
        }
        return;
    }
    if (!in) { /* the image has no NaN */
        for (int x = 0; x < nx; x++) {
            ob[x] = (float)sf_bane_lerp(tb[x], bb[x], ty);
            os[x] = (float)sf_bane_lerp(ts[x], bs[x], ty);
        }
        return;
    }
    for (int x = 0; x < nx; x++) {
        const float vb = (float)sf_bane_lerp(tb[x], bb[x], ty);
        const float vs = (float)sf_bane_lerp(ts[x], bs[x], ty);
        const int nan = isnan(in[x]);
        ob[x] = nan ? NAN : vb;
        os[x] = nan ? NAN : vs;
    }
}
SF_SIMD_KERNEL_VOID(map_row,
               (float *restrict ob, float *restrict os, const float *restrict in,
                const double *restrict tb, double ty, int nx),
               (ob, os, in, tb, ty, nx))

/* The filled node grids of img (*pfb, *pfs: ncx x ncy floats each, the
 * caller frees them), the run summary st and the image's finite pixels
 * *pfinite: the stage but for its maps. */
static sf_status bane_nodes(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                            float **pfb, float **pfs, long long *pfinite)
{
    sf_status s = sf_bkg_check_params(p);
    const int nx = img->nx, ny = img->ny, step = p->step;
    int ncx, ncy, nb, nvalid = 0, niter = 0;
    float *nb_b = NULL, *nb_s = NULL, *fb = NULL, *fs = NULL, *buf = NULL, *cm = NULL;
    int *iters = NULL; /* passes per node */
    int ccx, ccy;
    long long nfinite = 0;
    int nt = 1;
    /* SKYFIND_BANE_PROFILE=1 (a developer knob): the stage's phases' wall
     * times on stderr (cell maxima, cells and nodes, fill; the maps in
     * bane_maps) */
    const int prof = getenv("SKYFIND_BANE_PROFILE") != NULL;
    double tp[4] = {0, 0, 0, 0};
    *pfb = *pfs = NULL;
    if (s)
        return s;
    tp[0] = prof ? sf_wall_ms() : 0;
    if (img->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs a host image");
    ncx = sf_bane_nnodes(nx, step);
    ncy = sf_bane_nnodes(ny, step);
    if ((s = sf_bane_check_work(nx, ny, step, p->box)) != SF_OK)
        return s;
    nb = ncx * ncy;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    nb_b = malloc((size_t)nb * sizeof(float));
    nb_s = malloc((size_t)nb * sizeof(float));
    fb = malloc((size_t)nb * sizeof(float));
    fs = malloc((size_t)nb * sizeof(float));
    iters = malloc((size_t)nb * sizeof *iters);
    /* a thread's candidates: a box's pixels and 4 more for median_near's copies */
    const size_t per = bane_per(p, nx, ny) + 4;
    buf = malloc((size_t)nt * per * sizeof(float));
    ccx = (nx + step - 1) / step;
    ccy = (ny + step - 1) / step;
    cm = malloc((size_t)ccx * ccy * sizeof(float));
    if (!nb_b || !nb_s || !fb || !fs || !iters || !buf || !cm) {
        s = sf_fail(SF_ERR_NOMEM, "background bane: work space for %d nodes", nb);
        goto fail;
    }
    {
        unsigned *hist = malloc((size_t)nt * BANE_BINS * sizeof *hist);
        if (!hist) {
            s = sf_fail(SF_ERR_NOMEM, "background bane: histograms");
            goto fail;
        }
        const int use_cells = sf_bane_use_cells(step, p->box);
        const int per_ab = 8 * (p->box / step) * (p->box / step) + 4;
        bane_cellset cl = {NULL, NULL, NULL, NULL, NULL, 0, 0, 1, 1, 1, 0};
        /* node rows a group (below): one at a time on one thread (the
         * ring stays smallest), else 8; SKYFIND_BANE_ROWS=K (a developer
         * knob, for A/B timings) sets it */
        const char *rows_env = getenv("SKYFIND_BANE_ROWS");
        const int group_asked = rows_env && atoi(rows_env) > 0 ? atoi(rows_env) : (nt > 1 ? 8 : 1);
        const int group = group_asked < ncy ? group_asked : ncy; /* the ring's rows stay an int */
        int *abuf = malloc((size_t)nt * per_ab * sizeof *abuf);
        if (!abuf || (use_cells && (s = bane_ring_alloc(ccx, ccy, step, p->box / step + group - 1, &cl)) != SF_OK)) {
            if (!abuf)
                s = sf_fail(SF_ERR_NOMEM, "background bane: cell ranges");
            free(abuf);
            free(hist);
            bane_cells_free(&cl);
            goto fail;
        }
        /* each thread's search hints in the ring's cells (median_near) */
        const size_t nhint = use_cells ? (size_t)cl.w * ccx : 0;
        int *hints = calloc(nt * nhint + 1, sizeof *hints);
        if (!hints) {
            s = sf_fail(SF_ERR_NOMEM, "background bane: search hints");
            free(abuf);
            free(hist);
            bane_cells_free(&cl);
            goto fail;
        }
        /* the cell path sets the cell maxima (which only the nodes that
         * read pixels use) and counts the finite pixels as it sorts each
         * cell once: a pass over the image less */
        if (!use_cells)
            nfinite = bane_cells(img, step, cm, ccx, ccy);
        cl.cm = cm;
        long long filled = 0, nfill = 0; /* cells sorted, their finite pixels */
        tp[1] = prof ? sf_wall_ms() : 0;
        /* node rows a group at a time, every thread on the group: the ring
         * first takes the cell rows the group's boxes reach (it holds them
         * all: rows it drops are above every box of this group and the
         * next), then the group's nodes are shared out. A group of K rows
         * has two barriers where K single rows had 2K (at 4096^2 and 16
         * threads a row is 241 nodes, 15 a thread, and each barrier waits
         * for the row's slowest node). */
#pragma omp parallel
        {
            int tid = 0, built = -1; /* the last cell row in the ring (the same in every thread) */
            int last = -1; /* the node this thread did last */
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            for (int iy0 = 0, iy1; iy0 < ncy; iy0 = iy1) {
                int lo = -1, need = -1; /* the group's cell rows */
                for (iy1 = iy0; iy1 < ncy && iy1 - iy0 < group; iy1++) {
                    const int py = sf_bane_node_pos(iy1, ncy, ny, step);
                    if (use_cells && py % step == 0) {
                        int y0, y1;
                        sf_bane_box(py, p->box, ny, &y0, &y1);
                        if (y1 > y0) {
                            const int a = y0 / step, b = (y1 - 1) / step;
                            if (lo >= 0 && b - lo + 1 > cl.w)
                                break; /* the ring would drop a row the group reads */
                            lo = lo < 0 ? a : lo;
                            need = b > need ? b : need;
                        }
                    }
                }
                if (need > built) {
                    const int r0 = built + 1, nr = need - built;
#pragma omp for schedule(static) reduction(+ : filled, nfill)
                    for (int t = 0; t < nr * ccx; t++) {
                        nfill += bane_cell_fill(img, &cl, t % ccx, r0 + t / ccx);
                        filled++;
                    }
                    built = need;
                }
#pragma omp for schedule(dynamic, 4)
                for (int t = 0; t < (iy1 - iy0) * ncx; t++) {
                    const int iy = iy0 + t / ncx, ix = t % ncx, i = iy * ncx + ix;
                    const int py = sf_bane_node_pos(iy, ncy, ny, step),
                              px = sf_bane_node_pos(ix, ncx, nx, step);
                    if (use_cells && sf_bane_aligned(px, py, step, p->box)) {
                        int x0, x1, y0, y1;
                        sf_bane_box(px, p->box, nx, &x0, &x1);
                        sf_bane_box(py, p->box, ny, &y0, &y1);
                        /* the left neighbour's level, when this thread did it */
                        const float guess = ix > 0 && last == i - 1 ? nb_b[i - 1] : NAN;
                        iters[i] = bane_node_cells(&cl, p, x0, x1, y0, y1,
                                                   abuf + (size_t)tid * per_ab,
                                                   buf + (size_t)tid * per, guess,
                                                   hints + (size_t)tid * nhint, &nb_b[i], &nb_s[i]);
                    } else {
                        iters[i] = bane_node(img, p, cm, ccx, px, py, buf + (size_t)tid * per,
                                             hist + (size_t)tid * BANE_BINS, &nb_b[i], &nb_s[i]);
                    }
                    last = i;
                }
            }
        }
        free(abuf);
        free(hints);
        bane_cells_free(&cl);
        if (use_cells)
            nfinite = nfill;
        if (use_cells && filled != (long long)ccx * ccy) { /* every cell row is in a box */
            s = sf_fail(SF_ERR_INTERNAL, "background bane: %lld of %lld cells sorted", filled,
                        (long long)ccx * ccy);
            free(hist);
            goto fail;
        }
        for (int i = 0; i < nb; i++) {
            if (iters[i] > niter)
                niter = iters[i];
            nvalid += !isnan(nb_b[i]);
        }
        free(hist);
    }
    tp[2] = prof ? sf_wall_ms() : 0;
    if (!nvalid) {
        s = nfinite ? sf_bane_no_node(p, nx, ny)
                    : sf_fail(SF_ERR_EMPTY, "background: the image has no finite pixels");
        goto fail;
    }
#pragma omp parallel for schedule(dynamic, 16)
    for (int i = 0; i < nb; i++) {
        fb[i] = nb_b[i];
        fs[i] = nb_s[i];
        if (isnan(nb_b[i]))
            sf_bkg_fill_one(nb_b, nb_s, ncx, ncy, i % ncx, i / ncx, &fb[i], &fs[i]);
    }
    tp[3] = prof ? sf_wall_ms() : 0;
    sf_bane_grid_stats(fb, fs, nb, nfinite, niter, st);
    if (prof)
        fprintf(stderr, "bane profile: %d threads, %dx%d, %d nodes: set-up and cell maxima %.2f ms, "
                "cells and nodes %.2f ms, fill %.2f ms\n", nt, nx, ny, nb, tp[1] - tp[0],
                tp[2] - tp[1], tp[3] - tp[2]);
    *pfb = fb;
    *pfs = fs;
    *pfinite = nfinite;
    fb = fs = NULL;
fail:
    free(nb_b);
    free(nb_s);
    free(fb);
    free(fs);
    free(buf);
    free(iters);
    free(cm);
    return s;
}

/* The grid's memory on the host: one block, level first. */
void sf_bane_grid_free_cpu(sf_bane_grid *grid)
{
    free((void *)grid->level);
    memset(grid, 0, sizeof *grid);
}

sf_status sf_background_bane_grid_cpu(const sf_image *img, const sf_bkg_params *p,
                                      sf_bkg_stats *st, sf_bane_grid *grid)
{
    float *fb, *fs;
    long long nfinite;
    sf_status s;
    memset(grid, 0, sizeof *grid);
    if ((s = bane_nodes(img, p, st, &fb, &fs, &nfinite)) != SF_OK)
        return s;
    {
        const int nx = img->nx, ny = img->ny, step = p->step, ncx = sf_bane_nnodes(nx, step),
                  ncy = sf_bane_nnodes(ny, step);
        const size_t nb = (size_t)ncx * ncy;
        /* level, rms (nb doubles each), then the columns' and the rows' places */
        double *blk = malloc(2 * nb * sizeof(double) + ((size_t)nx + ny) * sizeof(sf_bane_at));
        if (!blk) {
            free(fb);
            free(fs);
            return sf_fail(SF_ERR_NOMEM, "background bane: the node grids (%zu nodes)", nb);
        }
        sf_bane_at *ax = (sf_bane_at *)(blk + 2 * nb), *ay = ax + nx;
        for (size_t i = 0; i < nb; i++) {
            blk[i] = fb[i];
            blk[nb + i] = fs[i];
        }
        for (int x = 0; x < nx; x++)
            sf_bane_axis(x, nx, step, ncx, &ax[x].k, &ax[x].t);
        for (int y = 0; y < ny; y++)
            sf_bane_axis(y, ny, step, ncy, &ay[y].k, &ay[y].t);
        grid->level = blk;
        grid->rms = blk + nb;
        grid->ax = ax;
        grid->ay = ay;
        grid->nx = nx;
        grid->ny = ny;
        grid->step = step;
        grid->ncx = ncx;
        grid->ncy = ncy;
        grid->nan = nfinite < (long long)sf_npix(nx, ny);
    }
    free(fb);
    free(fs);
    return SF_OK;
}

sf_status sf_bane_maps_cpu(const sf_image *img, const sf_bane_grid *grid, sf_image *bkg,
                           sf_image *rms, int level_only, sf_bkg_row_fn row_fn, void *ctx)
{
    const int nx = grid->nx, ny = grid->ny, step = grid->step, ncx = grid->ncx;
    const double *fb = grid->level, *fs = grid->rms;
    const sf_bane_at *ax = grid->ax, *ay = grid->ay;
    const int prof = getenv("SKYFIND_BANE_PROFILE") != NULL;
    const double t0 = prof ? sf_wall_ms() : 0;
    int nt = 1;
    double *lr; /* the threads' lerps along node rows */
    float *rows = NULL; /* without maps: each thread's row of both */
    if (!bkg != !rms || (!bkg && !row_fn))
        return sf_fail(SF_ERR_PARAM, "background method=bane needs both bkg and rms maps");
    if (img->loc != SF_HOST || (bkg && (bkg->loc != SF_HOST || rms->loc != SF_HOST)))
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs host image and maps");
    if (img->nx != nx || img->ny != ny ||
        (bkg && (bkg->nx != nx || bkg->ny != ny || rms->nx != nx || rms->ny != ny)))
        return sf_fail(SF_ERR_INTERNAL, "background bane: a %dx%d grid for a %dx%d image", nx, ny,
                       img->nx, img->ny);
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    /* a row at a time, by the maps' bilinear rule (sf_bane_lerp): a column's
     * lerps along the row's two node rows, of both maps, are kept in the
     * thread's arrays (lr) while its rows lie between the same two node
     * rows (a step is several rows; a thread's rows are consecutive), so a
     * pixel takes one lerp a map; the loops vectorise. The image is read
     * for its NaN only when it has non-finite pixels (grid->nan). */
    lr = malloc((size_t)nt * 4 * nx * sizeof *lr);
    if (!bkg)
        rows = malloc((size_t)nt * 2 * nx * sizeof *rows);
    if (!lr || (!bkg && !rows)) {
        free(lr);
        return sf_fail(SF_ERR_NOMEM, "background bane: %d threads' rows of %d columns", nt, nx);
    }
#pragma omp parallel num_threads(nt)
    {
        int tid = 0, pky = -1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        double *tb = lr + (size_t)tid * 4 * nx, *bb = tb + nx, *ts = bb + nx, *bs = ts + nx;
#pragma omp for schedule(static)
        for (int y = 0; y < ny; y++) {
            const float *in = grid->nan ? img->data + (size_t)y * img->stride : NULL;
            float *ob = bkg ? bkg->data + (size_t)y * bkg->stride : rows + (size_t)tid * 2 * nx,
                  *os = bkg ? rms->data + (size_t)y * rms->stride : level_only ? NULL : ob + nx;
            const int ky = ay[y].k;
            const double ty = ay[y].t;
            if (ky != pky) {
                pky = ky;
                for (int kx = 0; kx < ncx - 1; kx++) {
                    const int xa = kx * step, xb = xa + step < nx ? xa + step : nx;
                    const size_t i = (size_t)ky * ncx + kx;
                    const double b00 = fb[i], b01 = fb[i + 1], b10 = fb[i + ncx], b11 = fb[i + ncx + 1];
                    const double s00 = fs[i], s01 = fs[i + 1], s10 = fs[i + ncx], s11 = fs[i + ncx + 1];
                    for (int x = xa; x < xb; x++) {
                        tb[x] = sf_bane_lerp(b00, b01, ax[x].t);
                        bb[x] = sf_bane_lerp(b10, b11, ax[x].t);
                        ts[x] = sf_bane_lerp(s00, s01, ax[x].t);
                        bs[x] = sf_bane_lerp(s10, s11, ax[x].t);
                    }
                }
            }
            map_row(ob, os, in, tb, ty, nx);
            if (row_fn) /* the row's maps are in this core's cache */
                row_fn(ctx, y, ob, os);
        }
    }
    free(lr);
    free(rows);
    if (prof)
        fprintf(stderr, "bane profile: %d threads, %dx%d: maps%s%s %.2f ms\n", nt, nx, ny,
                bkg ? "" : " (rows, not kept)", row_fn ? " and their rows' epilogue" : "",
                sf_wall_ms() - t0);
    return SF_OK;
}

sf_status sf_background_bane_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                                 sf_image *bkg, sf_image *rms)
{
    sf_bane_grid grid;
    sf_status s;
    if (!bkg || !rms)
        return sf_fail(SF_ERR_PARAM, "background method=bane needs both bkg and rms maps");
    if (img->loc != SF_HOST || bkg->loc != SF_HOST || rms->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_background_cpu needs host image and maps");
    if ((s = sf_background_bane_grid_cpu(img, p, st, &grid)) != SF_OK)
        return s;
    s = sf_bane_maps_cpu(img, &grid, bkg, rms, 0, NULL, NULL);
    sf_bane_grid_free_cpu(&grid);
    return s;
}
