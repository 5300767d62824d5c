/* Stage `deblend`, CPU twin: SExtractor's multi-threshold deblending, one
 * island at a time (islands in parallel under OpenMP; each island's result
 * depends on that island alone, so the order of work does not matter). The
 * rule is in include/skyfind/deblend.h, the arithmetic in src/calc/deblend_calc.h.
 *
 * Per island: its pixels in raster order (a counting sort of the label
 * map), d and sigma of each, the peak in sigma and the levels; top[p] = the
 * highest level k with pixel p above t_k. For each level k >= 1 the pixels
 * with top >= k are joined to their earlier neighbours (union-find whose
 * root is the component's first pixel), and each component of at least
 * minarea pixels becomes a node whose parent is the node holding its first
 * pixel at level k - 1 (deep[p], the deepest node holding p). Then the
 * branches are cut from the top down, and the pixels left over are gathered
 * up by the objects' Gaussians. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "skyfind/deblend.h"
#include "deblend_calc.h"
#include "unionfind.h"
#include "labels_scan.h"

void sf_deblend_params_default(sf_deblend_params *p)
{
    p->nthresh = 32;
    p->mincont = 0.005;
    p->minarea = 0;
    p->connectivity = 8;
}

typedef struct {
    int level, first, parent; /* first: local index of the first pixel */
    long long npix;
    sf_fix128 excess;         /* sum (d - t sigma) over its pixels (scale 2^e) */
    int ok, nsplit;           /* SExtractor's ok[]; children above the contrast */
    int contrast;             /* its flux above its level passes mincont */
    int out;                  /* the object (branch) this node's pixels go to, -1 */
} db_node;

/* A labelled pixel of the counting sort's lists: linear index, label. */
typedef struct {
    size_t q;
    int32_t l;
} db_lpix;

/* Scratch of one thread, grown as islands need. */
typedef struct {
    int *map;         /* bounding box -> local index, -1 outside */
    size_t nmap;
    int *uf, *top, *deep, *obj, *list, *comp;
    float *d, *sig;
    size_t npix;
    db_node *node;
    int nnode, cnode;
    float *lev;
    int nlev;
    sf_fix128 *mom;   /* 6 sums per object */
    sf_db_gauss *g;
    float *opeak, *olev;
    long long *onpix;
    int *ofirst, *onode;
    int cobj;
} db_work;

static void work_free(db_work *w)
{
    free(w->map);
    free(w->uf);
    free(w->top);
    free(w->deep);
    free(w->obj);
    free(w->list);
    free(w->comp);
    free(w->d);
    free(w->sig);
    free(w->node);
    free(w->lev);
    free(w->mom);
    free(w->g);
    free(w->opeak);
    free(w->olev);
    free(w->onpix);
    free(w->ofirst);
    free(w->onode);
    memset(w, 0, sizeof *w);
}

#define GROW(ptr, n) ((ptr) = realloc((ptr), (n) * sizeof *(ptr)))

static int work_pixels(db_work *w, size_t n, size_t nmap, int nlev)
{
    if (n > w->npix) {
        if (!GROW(w->uf, n) || !GROW(w->top, n) || !GROW(w->deep, n) || !GROW(w->obj, n) ||
            !GROW(w->list, n) || !GROW(w->comp, n) || !GROW(w->d, n) || !GROW(w->sig, n))
            return 0;
        w->npix = n;
    }
    if (nmap > w->nmap) {
        if (!GROW(w->map, nmap))
            return 0;
        w->nmap = nmap;
    }
    if (nlev > w->nlev) {
        if (!GROW(w->lev, (size_t)nlev))
            return 0;
        w->nlev = nlev;
    }
    return 1;
}

static int add_node(db_work *w, int level, int first, int parent)
{
    db_node *n;
    if (w->nnode == w->cnode) {
        int c = w->cnode ? 2 * w->cnode : 64;
        if (!GROW(w->node, (size_t)c))
            return -1;
        w->cnode = c;
    }
    n = &w->node[w->nnode];
    memset(n, 0, sizeof *n);
    n->level = level;
    n->first = first;
    n->parent = parent;
    n->ok = 1;
    n->out = -1;
    n->excess = sf_fix_zero();
    return w->nnode++;
}

/* x * 2^e, the fixed-point sums' scaling: a multiply by p2e = 2^e where a
 * double holds it (exactly ldexp(x, e): the one rounding of the same
 * product, without a libm call a pixel and level), else ldexp (p2e 0). */
static inline double db_scale(double x, double p2e, int e)
{
    return p2e > 0 ? x * p2e : ldexp(x, e);
}

/* Deblend one island of n pixels (global raster indices pix[0..n-1], in
 * raster order). Writes each pixel's object (0-based, in the order of the
 * objects' first pixels) to objout and returns the number of objects
 * (>= 1), or -1 when out of memory. */
static int deblend_island(db_work *w, const sf_image *det, const sf_deblend_in *in,
                          const sf_deblend_params *p, int minarea, const size_t *pix,
                          long long n, int *objout)
{
    const int nx = det->nx, N = p->nthresh;
    int x0 = nx, x1 = -1, y0 = -1, y1 = -1, bw, bh, nobj, e;
    float P = -INFINITY, M = 0;
    int bad = 0; /* a pixel whose d or sigma cannot be used (see sf_db_usable) */
    sf_fix128 tot = sf_fix_zero();
    double value0;
    if (N < 2 || !(in->t0 > 0) || n < 2LL * minarea) {
        for (long long i = 0; i < n; i++)
            objout[i] = 0;
        return 1;
    }
    for (long long i = 0; i < n; i++) {
        int x = (int)(pix[i] % (size_t)nx);
        x0 = x < x0 ? x : x0;
        x1 = x > x1 ? x : x1;
    }
    y0 = (int)(pix[0] / (size_t)nx);
    y1 = (int)(pix[n - 1] / (size_t)nx);
    bw = x1 - x0 + 1;
    bh = y1 - y0 + 1;
    if (!work_pixels(w, (size_t)n, (size_t)bw * (size_t)bh, N))
        return -1;
    for (size_t k = 0; k < (size_t)bw * (size_t)bh; k++)
        w->map[k] = -1;
    for (long long i = 0; i < n; i++) {
        size_t q = pix[i];
        int x = (int)(q % (size_t)nx), y = (int)(q / (size_t)nx);
        float v = det->data[(size_t)y * det->stride + (size_t)x], lev, sg;
        if (in->view) { /* the maps' pixels from the view: the same bits */
            lev = in->subtract ? SF_THR_FMUL(sf_bkg_view_at(in->view, 0, x, y), in->level_scale) : 0.0f;
            sg = in->view_rms ? SF_THR_FMUL(sf_bkg_view_at(in->view, 1, x, y), in->noise_scale)
                              : in->sigma;
        } else if (in->bkg) {
            lev = in->subtract ? SF_THR_FMUL(in->bkg->data[(size_t)y * in->bkg->stride + x], in->level_scale) : 0.0f;
            sg = in->rms ? SF_THR_FMUL(in->rms->data[(size_t)y * in->rms->stride + x], in->noise_scale)
                         : in->sigma;
        } else {
            lev = in->level;
            sg = in->sigma;
        }
        w->d[i] = sf_db_fsub(v, lev);
        w->sig[i] = sg;
        bad |= !sf_db_usable(w->d[i], sg);
        w->map[(size_t)(y - y0) * bw + (x - x0)] = (int)i;
        {
            float s = sf_db_fdiv(w->d[i], sg);
            P = s > P ? s : P;
        }
        M = w->d[i] > M ? w->d[i] : M;
    }
    if (bad || !(P > in->t0) || !isfinite(P) || !isfinite(M)) {
        for (long long i = 0; i < n; i++)
            objout[i] = 0;
        return 1;
    }
    sf_db_levels(in->t0, P, N, w->lev);
    for (long long i = 0; i < n; i++) /* the top level's cut must not overflow */
        bad |= !isfinite(SF_THR_FMUL(w->lev[N - 2], w->sig[i]));
    if (bad) {
        for (long long i = 0; i < n; i++)
            objout[i] = 0;
        return 1;
    }
    e = sf_fix_exponent((double)M) - ms_scale_shift(bw, bh);
    const double p2e = e >= -1022 && e <= 1023 ? ldexp(1.0, e) : 0.0; /* db_scale */
    /* top[p]: the highest level (0 .. N-1) the pixel is above */
    for (long long i = 0; i < n; i++) {
        int k = 0;
        while (k < N - 1 && sf_db_above(w->d[i], w->sig[i], w->lev[k]))
            k++;
        w->top[i] = k;
        w->deep[i] = 0;
        sf_fix_add(&tot, sf_fix_from_double(db_scale((double)w->d[i], p2e, e)));
    }
    value0 = ms_mul(p->mincont, sf_fix_to_double(tot, e));
    /* the tree: node 0 is the island */
    w->nnode = 0;
    if (add_node(w, 0, 0, -1) < 0)
        return -1;
    w->node[0].npix = n;
    {
        int nl = 0; /* pixels above the level: the previous list, filtered */
        for (long long i = 0; i < n; i++)
            w->list[nl++] = (int)i;
        for (int k = 1; k < N; k++) {
            const float t = w->lev[k - 1];
            int m = 0, first_node = w->nnode;
            for (int j = 0; j < nl; j++)
                if (w->top[w->list[j]] >= k)
                    w->list[m++] = w->list[j];
            nl = m;
            if (nl < minarea)
                break;
            for (int j = 0; j < nl; j++)
                w->uf[w->list[j]] = w->list[j];
            for (int j = 0; j < nl; j++) {
                const int a = w->list[j];
                const size_t q = pix[a];
                const int x = (int)(q % (size_t)nx) - x0, y = (int)(q / (size_t)nx) - y0;
                /* the earlier neighbours above the level: left (W), and
                 * the row above (NW, N, NE) */
                const int *up = y > 0 ? w->map + (size_t)(y - 1) * bw + x : NULL;
                const int *row = w->map + (size_t)y * bw + x;
#define DB_FG(b) ((b) >= 0 && w->top[(b)] >= k)
                const int bw_ = x > 0 ? row[-1] : -1, bn = up ? up[0] : -1;
                int ra = a; /* a's root: a until it is joined (later pixels
                             * have not touched it yet) */
                if (p->connectivity == 4) {
                    if (DB_FG(bw_))
                        ra = sf_uf_join_root(w->uf, ra, bw_);
                    if (DB_FG(bn))
                        ra = sf_uf_join_root(w->uf, ra, bn);
                } else if (DB_FG(bn)) {
                    /* NW, W and NE, where above the level, are N's
                     * neighbours of this level's earlier pixels, so in its
                     * set already */
                    ra = sf_uf_join_root(w->uf, ra, bn);
                } else {
                    const int bnw = up && x > 0 ? up[-1] : -1, bne = up && x + 1 < bw ? up[1] : -1;
                    if (DB_FG(bw_)) /* NW, where above the level, is W's */
                        ra = sf_uf_join_root(w->uf, ra, bw_);
                    else if (DB_FG(bnw))
                        ra = sf_uf_join_root(w->uf, ra, bnw);
                    if (DB_FG(bne))
                        ra = sf_uf_join_root(w->uf, ra, bne);
                }
#undef DB_FG
            }
            /* component sizes at their roots (comp[] counts) */
            for (int j = 0; j < nl; j++)
                w->comp[w->list[j]] = 0;
            for (int j = 0; j < nl; j++)
                w->comp[sf_uf_root(w->uf, w->list[j])]++;
            /* nodes for components of at least minarea pixels, in raster
             * order of their first pixels; comp[root] becomes -(node + 1) */
            for (int j = 0; j < nl; j++) {
                const int a = w->list[j];
                if (w->uf[a] == a && w->comp[a] >= minarea) {
                    int id = add_node(w, k, a, w->deep[a]);
                    if (id < 0)
                        return -1;
                    w->node[id].npix = w->comp[a];
                    w->comp[a] = -(id + 1);
                }
            }
            if (w->nnode == first_node)
                break;
            for (int j = 0; j < nl; j++) {
                const int a = w->list[j], r = sf_uf_root(w->uf, a);
                if (w->comp[r] < 0) {
                    db_node *nd = &w->node[-w->comp[r] - 1];
                    w->deep[a] = -w->comp[r] - 1;
                    const double x = (double)sf_db_excess(w->d[a], w->sig[a], t);
                    sf_fix_add(&nd->excess, sf_fix_from_double(db_scale(x, p2e, e)));
                }
            }
        }
    }
    /* cut the branches, from the top level down (SExtractor's ok[] walk):
     * children are visited before their parents as nodes are level-ordered */
    for (int i = w->nnode - 1; i > 0; i--) {
        db_node *c = &w->node[i], *par = &w->node[c->parent];
        if (c->nsplit > 1) { /* c splits: its qualifying children were taken */
            c->ok = 0;
        }
        par->ok &= c->ok;
        c->contrast = sf_fix_to_double(c->excess, e) > value0;
        par->nsplit += c->contrast;
    }
    if (w->node[0].nsplit > 1)
        w->node[0].ok = 0;
    if (w->node[0].ok) {
        for (long long i = 0; i < n; i++)
            objout[i] = 0;
        return 1;
    }
    /* the objects: children of a split node that pass the contrast and were
     * not split themselves (ok is final for every node now; such branches
     * are never nested), in raster order of their first pixels */
    nobj = 0;
    for (int i = 1; i < w->nnode; i++) {
        db_node *c = &w->node[i];
        if (w->node[c->parent].nsplit > 1 && c->ok && c->contrast) {
            if (nobj == w->cobj) {
                int cap = w->cobj ? 2 * w->cobj : 16;
                if (!GROW(w->mom, (size_t)cap * 6) || !GROW(w->g, (size_t)cap) ||
                    !GROW(w->opeak, (size_t)cap) || !GROW(w->olev, (size_t)cap) ||
                    !GROW(w->onpix, (size_t)cap) || !GROW(w->ofirst, (size_t)cap) ||
                    !GROW(w->onode, (size_t)cap))
                    return -1;
                w->cobj = cap;
            }
            w->onode[nobj++] = i;
        }
    }
    for (int j = 1; j < nobj; j++) { /* insertion sort by first pixel */
        int v = w->onode[j], m = j;
        while (m > 0 && w->node[w->onode[m - 1]].first > w->node[v].first) {
            w->onode[m] = w->onode[m - 1];
            m--;
        }
        w->onode[m] = v;
    }
    for (int j = 0; j < nobj; j++)
        w->node[w->onode[j]].out = j;
    for (int i = 1; i < w->nnode; i++) /* parents come first: inherit */
        if (w->node[i].out < 0)
            w->node[i].out = w->node[w->node[i].parent].out;
    for (int j = 0; j < nobj; j++) {
        for (int s = 0; s < 6; s++)
            w->mom[6 * j + s] = sf_fix_zero();
        w->opeak[j] = -INFINITY;
        w->olev[j] = w->lev[w->node[w->onode[j]].level - 1];
        w->onpix[j] = 0;
    }
    /* each pixel's branch object; the moments of the branches */
    for (long long i = 0; i < n; i++) {
        const int o = w->node[w->deep[i]].out;
        w->obj[i] = o;
        if (o >= 0) {
            const size_t q = pix[i];
            const double dx = (double)((int)(q % (size_t)nx) - x0), dy = (double)((int)(q / (size_t)nx) - y0);
            const float s = sf_db_fdiv(w->d[i], w->sig[i]);
            ms_add_terms(&w->mom[6 * o], db_scale((double)w->d[i], p2e, e), dx, dy);
            w->opeak[o] = s > w->opeak[o] ? s : w->opeak[o];
            w->onpix[o]++;
        }
    }
    for (int j = 0; j < nobj; j++)
        sf_db_gauss_make(&w->mom[6 * j], e, w->onpix[j], w->olev[j], w->opeak[j], &w->g[j]);
    /* gather up the rest: the largest Gaussian weight, the first object on ties */
    for (long long i = 0; i < n; i++) {
        if (w->obj[i] < 0) {
            const size_t q = pix[i];
            const double dx = (double)((int)(q % (size_t)nx) - x0), dy = (double)((int)(q / (size_t)nx) - y0);
            int best = 0;
            double bw_ = sf_db_gauss_weight(&w->g[0], dx, dy);
            for (int j = 1; j < nobj; j++) {
                const double v = sf_db_gauss_weight(&w->g[j], dx, dy);
                if (v > bw_) {
                    bw_ = v;
                    best = j;
                }
            }
            w->obj[i] = best;
        }
    }
    /* number the objects in raster order of their first pixels */
    for (int j = 0; j < nobj; j++)
        w->ofirst[j] = -1;
    {
        int next = 0;
        for (long long i = 0; i < n; i++) {
            const int o = w->obj[i];
            if (w->ofirst[o] < 0)
                w->ofirst[o] = next++;
            objout[i] = w->ofirst[o];
        }
    }
    return nobj;
}

typedef struct {
    size_t first; /* global raster index of the object's first pixel */
    int island, local;
} db_obj;

static int obj_cmp(const void *a, const void *b)
{
    const db_obj *p = a, *q = b;
    return p->first < q->first ? -1 : p->first > q->first;
}

sf_status sf_deblend_check(const sf_image *det, const sf_deblend_in *in, const sf_deblend_params *p,
                           const sf_labels *labels)
{
    if (p->nthresh < 1 || p->nthresh > 1024)
        return sf_fail(SF_ERR_PARAM, "deblend nthresh=%d must be in [1, 1024]", p->nthresh);
    if (!(p->mincont >= 0 && p->mincont <= 1))
        return sf_fail(SF_ERR_PARAM, "deblend mincont=%g must be in [0, 1]", p->mincont);
    if (p->minarea < 1)
        return sf_fail(SF_ERR_PARAM, "deblend minarea=%d must be at least 1", p->minarea);
    if (p->connectivity != 4 && p->connectivity != 8)
        return sf_fail(SF_ERR_PARAM, "deblend connectivity must be 4 or 8");
    if (labels->nx != det->nx || labels->ny != det->ny)
        return sf_fail(SF_ERR_INTERNAL, "deblend: labels %dx%d for image %dx%d", labels->nx,
                       labels->ny, det->nx, det->ny);
    if (!in->bkg && in->rms)
        return sf_fail(SF_ERR_INTERNAL, "deblend: a noise map needs its background map");
    if (in->view && (in->bkg || in->rms))
        return sf_fail(SF_ERR_INTERNAL, "deblend: a view of the maps is in their place");
    return SF_OK;
}

sf_status sf_deblend_cpu(const sf_image *det, const sf_deblend_in *in,
                         const sf_deblend_params *p, sf_labels *labels, int nislands,
                         int *nobj, int **parent_out, int **nchild_out)
{
    size_t *start = NULL, *pix = NULL, total = 0;
    int *objl = NULL, *count = NULL, *parent = NULL, *nchild = NULL, *base = NULL;
    db_obj *objs = NULL;
    long long nall = 0;
    int fail = 0;
    sf_status st = sf_deblend_check(det, in, p, labels);
    *nobj = 0;
    *parent_out = *nchild_out = NULL;
    if (st)
        return st;
    if (det->loc != SF_HOST || labels->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_deblend_cpu needs host buffers");
    /* the islands' pixels in raster order: a counting sort of the labels,
     * by strips of rows in parallel (each strip's counts of its own, at most
     * 256 MB of them; the strips fill their places in order). The label map
     * is read once: each strip lists its labelled pixels (position and
     * label, in raster order) as it counts them, and the sort places them
     * from those lists (a second walk of the whole map was half of the
     * stage's time on one thread at 2048^2, where islands cover a few
     * percent of the pixels) */
    start = calloc((size_t)nislands + 2, sizeof *start);
    count = calloc((size_t)nislands + 1, sizeof *count);
    nchild = calloc((size_t)nislands + 1, sizeof *nchild);
    if (!start || !count || !nchild)
        goto nomem;
    {
        int nth = 1, nomem_list = 0;
        long long *badpix;
        size_t *cnt, *ln;
        db_lpix **ll; /* each strip's labelled pixels */
#ifdef _OPENMP
        nth = omp_get_max_threads();
#endif
        while (nth > 1 && ((size_t)nth * ((size_t)nislands + 1) * sizeof(size_t) > ((size_t)256 << 20) ||
                           det->ny / nth < 16))
            nth--;
        cnt = calloc((size_t)nth * ((size_t)nislands + 1), sizeof *cnt);
        badpix = malloc((size_t)nth * sizeof *badpix);
        ln = calloc((size_t)nth, sizeof *ln);
        ll = calloc((size_t)nth, sizeof *ll);
        if (!cnt || !badpix || !ln || !ll) {
            free(cnt);
            free(badpix);
            free(ln);
            free(ll);
            goto nomem;
        }
#pragma omp parallel for schedule(static, 1) num_threads(nth) reduction(| : nomem_list)
        for (int t = 0; t < nth; t++) {
            size_t *c = cnt + (size_t)t * ((size_t)nislands + 1), n = 0, cap = 0;
            db_lpix *lp = NULL;
            int y0 = (int)((long long)det->ny * t / nth), y1 = (int)((long long)det->ny * (t + 1) / nth);
            badpix[t] = -1;
            for (int y = y0; y < y1 && badpix[t] < 0 && !nomem_list; y++) {
                const int32_t *row = labels->data + (size_t)y * labels->stride;
                for (int x = 0; x < det->nx; x++) {
                    int32_t l;
                    int skip;
                    if ((skip = sf_labels_sky_run(row, x, det->nx)) != 0) {
                        x += skip - 1;
                        continue;
                    }
                    l = row[x];
                    if (!l)
                        continue;
                    if (l < 0 || l > nislands) {
                        badpix[t] = (long long)y * det->nx + x;
                        break;
                    }
                    if (n == cap) {
                        db_lpix *l2 = realloc(lp, (cap ? 2 * cap : 4096) * sizeof *l2);
                        if (!l2) {
                            nomem_list = 1;
                            break;
                        }
                        lp = l2;
                        cap = cap ? 2 * cap : 4096;
                    }
                    lp[n].q = (size_t)y * (size_t)det->nx + (size_t)x;
                    lp[n++].l = l;
                    c[l]++;
                }
            }
            ll[t] = lp;
            ln[t] = n;
        }
        for (int t = 0; t < nth; t++)
            if (badpix[t] >= 0 || nomem_list) {
                long long b = badpix[t];
                int32_t l = b >= 0 ? labels->data[(size_t)(b / det->nx) * labels->stride + (size_t)(b % det->nx)] : 0;
                for (int u = 0; u < nth; u++)
                    free(ll[u]);
                free(cnt);
                free(badpix);
                free(ln);
                free(ll);
                if (b < 0)
                    goto nomem;
                free(start);
                free(count);
                free(nchild);
                return sf_fail(SF_ERR_INTERNAL, "deblend: label %d outside 0..%d", l, nislands);
            }
        free(badpix);
        /* island l's pixels go to [start[l], start[l+1]); strip t's to its
         * own part of that range, after the strips above it */
        for (int l = 1; l <= nislands; l++) {
            size_t run = 0;
            for (int t = 0; t < nth; t++)
                run += cnt[(size_t)t * ((size_t)nislands + 1) + l];
            start[l + 1] = start[l] + run;
        }
        total = start[nislands + 1];
        pix = malloc((total ? total : 1) * sizeof *pix);
        objl = malloc((total ? total : 1) * sizeof *objl);
        if (pix && objl) {
            for (int l = 1; l <= nislands; l++) {
                size_t run = start[l];
                for (int t = 0; t < nth; t++) {
                    size_t *c = &cnt[(size_t)t * ((size_t)nislands + 1) + l], n = *c;
                    *c = run;
                    run += n;
                }
            }
#pragma omp parallel for schedule(static, 1) num_threads(nth)
            for (int t = 0; t < nth; t++) {
                size_t *c = cnt + (size_t)t * ((size_t)nislands + 1);
                for (size_t i = 0; i < ln[t]; i++)
                    pix[c[ll[t][i].l]++] = ll[t][i].q;
            }
        }
        for (int t = 0; t < nth; t++)
            free(ll[t]);
        free(ll);
        free(ln);
        free(cnt);
        if (!pix || !objl)
            goto nomem;
    }
    {
        const int minarea = p->minarea;
#pragma omp parallel reduction(| : fail)
        {
            db_work w;
            memset(&w, 0, sizeof w);
#pragma omp for schedule(dynamic, 16)
            for (int l = 1; l <= nislands; l++) {
                long long nl = (long long)(start[l + 1] - start[l]);
                int r = nl > 0 ? deblend_island(&w, det, in, p, minarea, pix + start[l], nl,
                                                objl + start[l])
                               : 0;
                if (r < 0)
                    fail = 1;
                count[l] = r < 0 ? 0 : r;
            }
            work_free(&w);
        }
    }
    if (fail)
        goto nomem;
    /* number the objects of the whole image by first pixel */
    base = malloc(((size_t)nislands + 2) * sizeof *base);
    if (!base)
        goto nomem;
    base[1] = 0;
    for (int l = 1; l <= nislands; l++) {
        base[l + 1] = base[l] + count[l];
        nchild[l] = count[l];
    }
    nall = base[nislands + 1];
    if (nall > 2147483646LL) {
        st = sf_fail(SF_ERR_PARAM, "deblend: %lld objects do not fit the label map", nall);
        goto done;
    }
    objs = malloc(((size_t)nall + 1) * sizeof *objs);
    parent = malloc(((size_t)nall + 1) * sizeof *parent);
    if (!objs || !parent)
        goto nomem;
    for (int l = 1; l <= nislands; l++) {
        /* objects are numbered within the island by first pixel, so the
         * first pixel of local object j is the first pixel with objl == j */
        int next = 0;
        for (size_t i = start[l]; i < start[l + 1] && next < count[l]; i++)
            if (objl[i] == next) {
                db_obj *o = &objs[base[l] + next];
                o->first = pix[i];
                o->island = l;
                o->local = next++;
            }
    }
    qsort(objs, (size_t)nall, sizeof *objs, obj_cmp);
    /* new label of (island, local): reuse base[] offsets through a table */
    {
        int *newl = malloc(((size_t)nall + 1) * sizeof *newl);
        if (!newl)
            goto nomem;
        for (long long i = 0; i < nall; i++) {
            newl[base[objs[i].island] + objs[i].local] = (int)(i + 1);
            parent[i + 1] = objs[i].island;
        }
        parent[0] = 0;
#pragma omp parallel for schedule(dynamic, 16)
        for (int l = 1; l <= nislands; l++)
            for (size_t i = start[l]; i < start[l + 1]; i++) {
                size_t q = pix[i];
                labels->data[(q / (size_t)det->nx) * labels->stride + q % (size_t)det->nx] =
                    newl[base[l] + objl[i]];
            }
        free(newl);
    }
    *nobj = (int)nall;
    *parent_out = parent;
    *nchild_out = nchild;
    parent = nchild = NULL;
    goto done;
nomem:
    st = sf_fail(SF_ERR_NOMEM, "deblend: scratch for %zu island pixels", total);
done:
    free(start);
    free(pix);
    free(objl);
    free(count);
    free(parent);
    free(nchild);
    free(base);
    free(objs);
    return st;
}
