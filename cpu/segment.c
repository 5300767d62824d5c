/* Stage `segment`, CPU twin: connected-component labelling of a mask by a
 * two-pass union-find in raster order, giving canonical labels 1..N in the
 * raster order of each island's first pixel (scipy.ndimage.label's order).
 * Islands of a two-level mask that hold no seed pixel (value 1) are dropped. */
#include <stdint.h>
#include <stdlib.h>
#include "skyfind/segment.h"

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

/* Root r of the current pixel's island so far (-1 for none) merged with
 * the island of neighbour n. */
static int32_t uf_join(int32_t *L, int32_t r, int32_t n)
{
    int32_t rn = uf_find(L, n);
    return r < 0 ? rn : uf_unite(L, r, rn);
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

sf_status sf_segment_cpu(const sf_mask *mask, const sf_seg_params *p, sf_labels *labels,
                         int *nlabels)
{
    sf_seg_params def;
    sf_status st = check_args(mask, p, labels, SF_HOST, "segment_cpu");
    const uint8_t *m;
    int32_t *L, n = 0, nx, ny, min_area;
    int flood = 0; /* the mask has flood-only pixels (value 2) */
    size_t npix;
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
    min_area = p->min_area;
    npix = sf_npix(nx, ny);

    /* pass 1: link each pixel to its already visited neighbours. After a
     * pixel is done it is joined to all its upper neighbours, so for the
     * next pixel the left root `prev` already covers those it shares. */
    for (int32_t y = 0; y < ny; y++) {
        const uint8_t *row = m + (size_t)y * nx, *up = y > 0 ? row - nx : row;
        int32_t i0 = y * nx, prev = -1; /* root of the left pixel, -1 if background */
        for (int32_t x = 0; x < nx; x++) {
            int32_t r = prev, i = i0 + x;
            int u = y > 0 && up[x], ul = y > 0 && x > 0 && up[x - 1];
            if (!row[x]) {
                L[i] = 0;
                prev = -1;
                continue;
            }
            flood |= row[x] != 1;
            if (p->connectivity == 8) {
                int ur = y > 0 && x + 1 < nx && up[x + 1];
                if (r < 0 && u) /* up-left and up-right touch up */
                    r = uf_find(L, i - nx);
                else if (r < 0 && ul)
                    r = uf_find(L, i - nx - 1);
                if (!u && ur)
                    r = uf_join(L, r, i - nx + 1);
            } else if (u && !(r >= 0 && ul)) { /* left, up-left, up joined already */
                r = uf_join(L, r, i - nx);
            }
            if (r < 0) {
                L[i] = -1; /* a new root of area 1 */
                r = i;
            } else {
                L[r] -= 1;
                L[i] = r + 1;
            }
            prev = r;
        }
    }

    /* pass 2, in raster order: every parent lies before its child, so when
     * pixel i is reached its parent already holds its final label. Roots
     * are numbered as they come, which is the raster order of first pixels. */
    for (size_t i = 0; i < npix; i++) {
        int32_t v = L[i];
        if (v < 0)
            L[i] = -v >= min_area ? ++n : 0;
        else if (v > 0)
            L[i] = L[v - 1];
    }
    if (flood && n > 0) { /* drop islands without a seed, renumbering in order */
        int32_t *keep = calloc((size_t)n + 1, sizeof *keep), k = 0;
        if (!keep)
            return sf_fail(SF_ERR_NOMEM, "segment_cpu: seed flags of %d islands", n);
        for (size_t i = 0; i < npix; i++)
            if (m[i] == 1)
                keep[L[i]] = 1;
        keep[0] = 0;
        for (int32_t l = 1; l <= n; l++)
            keep[l] = keep[l] ? ++k : 0;
        for (size_t i = 0; i < npix; i++)
            L[i] = keep[L[i]];
        free(keep);
        n = k;
    }
    if (nlabels)
        *nlabels = n;
    return SF_OK;
}
