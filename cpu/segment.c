/* Stage `segment`, CPU twin: connected-component labelling of a mask by a
 * two-pass union-find in raster order, giving canonical labels 1..N in the
 * raster order of each island's first pixel (scipy.ndimage.label's order).
 * Islands of a two-level mask that hold no seed pixel (value 1) are dropped.
 *
 * In parallel: the rows are cut into strips, one a thread (OpenMP). Each
 * strip is labelled alone (pass 1 and a local numbering, with each local
 * island's area and whether it holds a seed); one thread then joins the
 * islands that touch across the strips' edges (a union-find over the local
 * labels, the smaller - earlier - one the root) and numbers the whole
 * islands in order; each strip finally rewrites its labels. The result does
 * not depend on the number of strips: a local label's number orders it
 * by its first pixel, strip by strip, so the root of a joined island is its
 * first pixel's part, as in the one-strip labelling. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "skyfind/segment.h"
#include "unionfind.h"

void sf_seg_params_default(sf_seg_params *p)
{
    p->connectivity = 8;
    p->min_area = 1;
}

/* During the first pass the labels buffer L is the union-find forest:
 *   L[i] == 0   background,
 *   L[i] <  0   a root whose island has -L[i] pixels so far,
 *   L[i] >  0   a pixel whose parent is L[i] - 1 (always < i).
 * Unions link the larger root under the smaller, so each root is the first
 * pixel (lowest linear index) of its island. */
static int32_t uf_find(int32_t *L, int32_t x)
{
    for (;;) { /* path halving */
        int32_t v = L[x], p, w;
        if (v <= 0)
            return x;
        p = v - 1;
        w = L[p];
        if (w <= 0)
            return p;
        L[x] = w;
        x = w - 1;
    }
}

static int32_t uf_unite(int32_t *L, int32_t a, int32_t b) /* a, b roots */
{
    int32_t lo, hi;
    if (a == b)
        return a;
    lo = a < b ? a : b;
    hi = a < b ? b : a;
    L[lo] += L[hi]; /* sum of (negative) areas */
    L[hi] = lo + 1;
    return lo;
}

static sf_status check_args(const sf_mask *mask, const sf_seg_params *p,
                            const sf_labels *labels, sf_loc want, const char *fn)
{
    if (!mask || !labels || !mask->data || !labels->data)
        return sf_fail(SF_ERR_PARAM, "%s: mask or labels buffer missing", fn);
    if (p && p->connectivity != 4 && p->connectivity != 8)
        return sf_fail(SF_ERR_PARAM, "%s: connectivity %d must be 4 or 8", fn,
                       p->connectivity);
    if (p && p->min_area < 1)
        return sf_fail(SF_ERR_PARAM, "%s: min_area %d must be >= 1", fn, p->min_area);
    if (mask->nx < 1 || mask->ny < 1)
        return sf_fail(SF_ERR_PARAM, "%s: mask size %dx%d is not positive", fn, mask->nx,
                       mask->ny);
    if (labels->nx != mask->nx || labels->ny != mask->ny)
        return sf_fail(SF_ERR_PARAM, "%s: labels are %dx%d but the mask is %dx%d", fn,
                       labels->nx, labels->ny, mask->nx, mask->ny);
    if (mask->stride != (size_t)mask->nx || labels->stride != (size_t)labels->nx)
        return sf_fail(SF_ERR_PARAM, "%s: mask stride %zu / labels stride %zu must equal nx %d",
                       fn, mask->stride, labels->stride, mask->nx);
    if (sf_npix(mask->nx, mask->ny) >= (size_t)INT32_MAX)
        return sf_fail(SF_ERR_PARAM, "%s: %dx%d pixels exceed the int32 label range", fn,
                       mask->nx, mask->ny);
    if (mask->loc != want || labels->loc != want)
        return sf_fail(SF_ERR_PARAM, "%s: mask and labels must be %s buffers", fn,
                       want == SF_HOST ? "host" : "device");
    return SF_OK;
}

/* The first x in [x, nx) with row[x] != 0, or nx: eight mask bytes at a
 * time (sky masks are mostly background). */
static int32_t next_set(const uint8_t *row, int32_t x, int32_t nx)
{
    while (x < nx && ((uintptr_t)(row + x) & 7u))
        if (row[x])
            return x;
        else
            x++;
    for (; x + 8 <= nx; x += 8) {
        uint64_t w;
        memcpy(&w, row + x, 8);
        if (w)
            break;
    }
    while (x < nx && !row[x])
        x++;
    return x;
}

/* Pass 1 and the local numbering of rows [y0, y1): L holds the local
 * labels 1..n of the strip afterwards (the strip's own raster order of first
 * pixels), area[k-1] each one's pixel count, seed[k-1] whether it holds a
 * pixel of value 1. *nout: n. area/seed are allocated here (freed by the
 * caller). Returns 0, or -1 without memory. */
static int strip_label(const uint8_t *m, int32_t *L, int32_t nx, int32_t y0, int32_t y1, int conn,
                       int32_t *nout, int32_t **areaout, uint8_t **seedout)
{
    int32_t nroots = 0, n = 0;
    int32_t *area;
    uint8_t *seed;
    *nout = 0;
    *areaout = NULL;
    *seedout = NULL;
    /* pass 1: link each pixel to its already visited neighbours. After a
     * pixel is done it is joined to all its upper neighbours, so for the
     * next pixel the left root `prev` already covers those it shares. */
    for (int32_t y = y0; y < y1; y++) {
        const uint8_t *row = m + (size_t)y * nx, *up = y > y0 ? row - nx : row;
        int32_t i0 = y * nx, prev = -1; /* root of the left pixel, -1 if background */
        for (int32_t x = 0; x < nx; x++) {
            int32_t r = prev, i = i0 + x;
            int u, ul;
            if (!row[x]) { /* a run of background: zero labels, no neighbour */
                const int32_t e = next_set(row, x, nx);
                memset(L + i, 0, (size_t)(e - x) * sizeof *L);
                prev = -1;
                x = e - 1;
                continue;
            }
            u = y > y0 && up[x];
            ul = y > y0 && x > 0 && up[x - 1];
            if (conn == 8) {
                int ur = y > y0 && x + 1 < nx && up[x + 1];
                if (r < 0 && u) /* up-left and up-right touch up */
                    r = uf_find(L, i - nx);
                else if (r < 0 && ul)
                    r = uf_find(L, i - nx - 1);
                if (!u && ur) {
                    int32_t rn = uf_find(L, i - nx + 1);
                    nroots -= r >= 0 && rn != r;
                    r = r < 0 ? rn : uf_unite(L, r, rn);
                }
            } else if (u && !(r >= 0 && ul)) { /* left, up-left, up joined already */
                int32_t rn = uf_find(L, i - nx);
                nroots -= r >= 0 && rn != r;
                r = r < 0 ? rn : uf_unite(L, r, rn);
            }
            if (r < 0) {
                L[i] = -1; /* a new root of area 1 */
                r = i;
                nroots++;
            } else {
                L[r] -= 1;
                L[i] = r + 1;
            }
            prev = r;
        }
    }
    area = malloc(((size_t)nroots + 1) * sizeof *area);
    seed = calloc((size_t)nroots + 1, 1);
    if (!area || !seed) {
        free(area);
        free(seed);
        return -1;
    }
    /* pass 2, in raster order: every parent lies before its child, so when
     * pixel i is reached its parent already holds its local label. Roots
     * are numbered as they come. */
    for (int32_t y = y0; y < y1; y++) {
        const uint8_t *row = m + (size_t)y * nx;
        for (int32_t x = next_set(row, 0, nx); x < nx; x = next_set(row, x + 1, nx)) {
            const size_t i = (size_t)y * nx + (size_t)x;
            int32_t v = L[i];
            if (v < 0) {
                area[n] = -v;
                L[i] = ++n;
            } else if (v > 0) {
                L[i] = L[v - 1];
            }
            if (row[x] == 1)
                seed[L[i] - 1] = 1;
        }
    }
    *nout = n;
    *areaout = area;
    *seedout = seed;
    return 0;
}

sf_status sf_segment_cpu(const sf_mask *mask, const sf_seg_params *p, sf_labels *labels,
                         int *nlabels)
{
    sf_seg_params def;
    sf_status st = check_args(mask, p, labels, SF_HOST, "segment_cpu");
    const uint8_t *m;
    int32_t *L, nx, ny, nstrip = 1, *y0s = NULL, *cnt = NULL, *off = NULL, *P = NULL, *map = NULL;
    int32_t **area = NULL, ntot = 0, n = 0;
    uint8_t **seed = NULL;
    int bad = 0;
    if (st != SF_OK)
        return st;
    if (!p) {
        sf_seg_params_default(&def);
        p = &def;
    }
    m = mask->data;
    L = labels->data;
    nx = mask->nx;
    ny = mask->ny;
#ifdef _OPENMP
    nstrip = omp_get_max_threads();
#endif
    /* strips of at least 64 rows and 2^16 pixels: fewer for small images */
    while (nstrip > 1 && ((ny / nstrip) < 64 || (size_t)(ny / nstrip) * nx < 65536))
        nstrip--;
    y0s = malloc(((size_t)nstrip + 1) * sizeof *y0s);
    cnt = calloc((size_t)nstrip, sizeof *cnt);
    off = calloc((size_t)nstrip + 1, sizeof *off);
    area = calloc((size_t)nstrip, sizeof *area);
    seed = calloc((size_t)nstrip, sizeof *seed);
    if (!y0s || !cnt || !off || !area || !seed) {
        st = sf_fail(SF_ERR_NOMEM, "segment_cpu: strip tables");
        goto out;
    }
    for (int32_t s = 0; s <= nstrip; s++)
        y0s[s] = (int32_t)((int64_t)ny * s / nstrip);
#pragma omp parallel for schedule(static, 1) num_threads(nstrip) reduction(| : bad)
    for (int32_t s = 0; s < nstrip; s++)
        bad |= strip_label(m, L, nx, y0s[s], y0s[s + 1], p->connectivity, &cnt[s], &area[s], &seed[s]);
    if (bad) {
        st = sf_fail(SF_ERR_NOMEM, "segment_cpu: island tables");
        goto out;
    }
    for (int32_t s = 0; s < nstrip; s++)
        off[s + 1] = off[s] + cnt[s];
    ntot = off[nstrip];
    P = malloc(((size_t)ntot + 1) * sizeof *P);
    map = malloc(((size_t)ntot + 1) * sizeof *map);
    if (!P || !map) {
        st = sf_fail(SF_ERR_NOMEM, "segment_cpu: labels of %d island parts", ntot);
        goto out;
    }
    for (int32_t k = 0; k < ntot; k++)
        P[k] = k;
    /* join across each strip's top edge: row y0 with the row above it */
    for (int32_t s = 1; s < nstrip; s++) {
        const int32_t *row = L + (size_t)y0s[s] * nx, *up = row - nx;
        for (int32_t x = 0; x < nx; x++) {
            if (!row[x])
                continue;
            for (int32_t dx = p->connectivity == 8 ? -1 : 0; dx <= (p->connectivity == 8 ? 1 : 0); dx++)
                if (x + dx >= 0 && x + dx < nx && up[x + dx])
                    sf_uf_join(P, off[s] + row[x] - 1, off[s - 1] + up[x + dx] - 1);
        }
    }
    /* whole islands: area and seed summed at the root, then numbered in the
     * order of their roots (their first pixels); map[g]: part g's label */
    {
        /* root totals: area in a 64-bit table (an island may span strips) */
        int64_t *tot = calloc((size_t)ntot + 1, sizeof *tot);
        uint8_t *sd = calloc((size_t)ntot + 1, 1);
        if (!tot || !sd) {
            free(tot);
            free(sd);
            st = sf_fail(SF_ERR_NOMEM, "segment_cpu: areas of %d island parts", ntot);
            goto out;
        }
        for (int32_t s = 0, g = 0; s < nstrip; s++)
            for (int32_t k = 0; k < cnt[s]; k++, g++) {
                int32_t r = sf_uf_root(P, g);
                tot[r] += area[s][k];
                sd[r] |= seed[s][k];
            }
        for (int32_t g = 0; g < ntot; g++) {
            int32_t r = sf_uf_root(P, g);
            if (r == g)
                map[g] = tot[g] >= p->min_area && sd[g] ? ++n : 0;
            else
                map[g] = map[r]; /* r < g: numbered already */
        }
        free(tot);
        free(sd);
    }
#pragma omp parallel for schedule(static, 1) num_threads(nstrip)
    for (int32_t s = 0; s < nstrip; s++) {
        const int32_t *mp = map + off[s] - 1; /* local label l -> mp[l] */
        for (int32_t y = y0s[s]; y < y0s[s + 1]; y++) {
            const uint8_t *row = m + (size_t)y * nx;
            int32_t *lr = L + (size_t)y * nx;
            for (int32_t x = next_set(row, 0, nx); x < nx; x = next_set(row, x + 1, nx))
                lr[x] = mp[lr[x]];
        }
    }
    if (nlabels)
        *nlabels = n;
out:
    for (int32_t s = 0; area && seed && s < nstrip; s++) {
        free(area[s]);
        free(seed[s]);
    }
    free(y0s);
    free(cnt);
    free(off);
    free(area);
    free(seed);
    free(P);
    free(map);
    return st;
}
