/* Check suite for the `deblend` stage (CPU twin): blended Gaussians are
 * split where SExtractor's rule says so and not otherwise, every pixel of an
 * island goes to exactly one of its objects, labels stay canonical across
 * islands, parents and child counts are right, and the deterministic log
 * and exp the levels are built from match libm. The GPU cases run the CUDA
 * version on the same labels and require the very same label map, object
 * count, parents and child counts as the CPU twin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sftest.h"
#include "skyfind/deblend.h"
#include "skyfind/gpu.h"
#include "skyfind/segment.h"
#include "skyfind/threshold.h"
#include "deblend_calc.h"

typedef struct {
    double x, y, amp, sigma;
} blob;

/* Noise-free image of Gaussian blobs (plus optional noise of rms `noise`). */
static void blobs(sf_image *im, int nx, int ny, const blob *b, int nb, double noise, uint64_t seed)
{
    sftest_rng r = {seed};
    ck_assert_int_eq(sf_image_alloc(im, nx, ny, SF_HOST, NULL), SF_OK);
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++) {
            double v = noise > 0 ? noise * sftest_normal(&r) : 0;
            for (int k = 0; k < nb; k++) {
                double dx = x - b[k].x, dy = y - b[k].y;
                v += b[k].amp * exp(-(dx * dx + dy * dy) / (2 * b[k].sigma * b[k].sigma));
            }
            im->data[(size_t)y * nx + x] = (float)v;
        }
}

typedef struct {
    sf_labels lab;
    int nisl, nobj, *parent, *nchild;
    int *isl; /* the island label of each pixel, before deblending */
} run_out;

/* The islands of im above t0 sigma (global level 0, sigma 1): the mask m
 * and the labels l (both allocated on the host) and their number *nisl. */
static void islands(const sf_image *im, double t0, const sf_seg_params *sp, sf_mask *m,
                    sf_labels *l, int *nisl)
{
    sf_bkg_stats bs = {.median = 0, .sigma = 1};
    sf_thresh_params tp;
    sf_thresh_params_default(&tp);
    tp.nsigma = t0;
    ck_assert_int_eq(sf_mask_alloc(m, im->nx, im->ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_threshold_cpu(im, &tp, &bs, NULL, NULL, m), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(l, im->nx, im->ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_segment_cpu(m, sp, l, nisl), SF_OK);
}

/* The deblend's input for those islands: level 0 subtracted, sigma 1, the
 * island threshold t0, no maps. */
static sf_deblend_in unit_in(double t0)
{
    sf_deblend_in in;
    memset(&in, 0, sizeof in);
    in.sigma = 1;
    in.level_scale = in.noise_scale = 1;
    in.subtract = 1;
    in.t0 = (float)t0;
    return in;
}

/* threshold (global level 0, sigma 1, nsigma t0) + segment (8, minarea) +
 * deblend with p; keeps the island map for the checks. */
static void run(const sf_image *im, double t0, int minarea, const sf_deblend_params *p, run_out *o)
{
    sf_seg_params sp = {8, minarea};
    sf_mask m;
    sf_deblend_in in = unit_in(t0);
    sf_deblend_params q = *p;
    size_t n = sf_npix(im->nx, im->ny);
    islands(im, t0, &sp, &m, &o->lab, &o->nisl);
    o->isl = malloc(n * sizeof *o->isl);
    for (size_t i = 0; i < n; i++)
        o->isl[i] = o->lab.data[i];
    if (q.minarea == 0)
        q.minarea = minarea;
    ck_assert_int_eq(sf_deblend_cpu(im, &in, &q, &o->lab, o->nisl, &o->nobj, &o->parent, &o->nchild),
                     SF_OK);
    sf_mask_free(&m, NULL);
}

static void run_free(run_out *o)
{
    sf_labels_free(&o->lab, NULL);
    free(o->parent);
    free(o->nchild);
    free(o->isl);
}

/* The invariants of any deblending: the same pixels are labelled, each
 * object lies in its parent island, objects are numbered by first pixel,
 * and each island's child count is its number of objects. */
static void check_invariants(const run_out *o, size_t n)
{
    int next = 1;
    int *count = calloc((size_t)o->nisl + 1, sizeof *count);
    for (size_t i = 0; i < n; i++) {
        int l = o->lab.data[i];
        ck_assert_int_eq(l != 0, o->isl[i] != 0);
        if (!l)
            continue;
        ck_assert_int_ge(l, 1);
        ck_assert_int_le(l, o->nobj);
        ck_assert_int_eq(o->parent[l], o->isl[i]);
        ck_assert_msg(l <= next, "object %d appears before object %d's first pixel", l, next);
        if (l == next) {
            count[o->isl[i]]++;
            next++;
        }
    }
    ck_assert_int_eq(next - 1, o->nobj);
    for (int j = 1; j <= o->nisl; j++)
        ck_assert_int_eq(o->nchild[j], count[j]);
    free(count);
}

START_TEST(test_two_peaks)
{
    /* 100 and 40 at 10 px: one island above 3 sigma, two objects */
    const blob b[] = {{20, 20, 100, 2.5}, {30, 22, 40, 2.5}};
    sf_image im;
    sf_deblend_params p;
    run_out o;
    sf_deblend_params_default(&p);
    blobs(&im, 64, 48, b, 2, 0, 1);
    run(&im, 3, 5, &p, &o);
    ck_assert_int_eq(o.nisl, 1);
    ck_assert_int_eq(o.nobj, 2);
    check_invariants(&o, sf_npix(64, 48));
    ck_assert_int_eq(o.nchild[1], 2);
    ck_assert_int_eq(o.lab.data[20 * 64 + 20], 1);
    ck_assert_int_eq(o.lab.data[22 * 64 + 30], 2);
    /* the saddle lies between: the pixels nearer each peak go to it */
    ck_assert_int_eq(o.lab.data[20 * 64 + 23], 1);
    ck_assert_int_eq(o.lab.data[22 * 64 + 28], 2);
    run_free(&o);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_not_split)
{
    const blob one[] = {{32, 24, 100, 3}};
    const blob two[] = {{20, 20, 100, 2.5}, {30, 22, 40, 2.5}};
    /* a companion on the wing of a broad source: a second maximum in the
     * island, but holding about 0.3% of its flux above the split level */
    const blob faint[] = {{25, 24, 50, 6}, {40, 24, 4, 1.0}};
    sf_image im;
    sf_deblend_params p;
    run_out o;
    sf_deblend_params_default(&p);
    blobs(&im, 64, 48, one, 1, 0, 1);
    run(&im, 3, 5, &p, &o);
    ck_assert_int_eq(o.nobj, 1);
    check_invariants(&o, sf_npix(64, 48));
    run_free(&o);
    sf_image_free(&im, NULL);

    blobs(&im, 64, 48, two, 2, 0, 1);
    p.nthresh = 1; /* no levels */
    run(&im, 3, 5, &p, &o);
    ck_assert_int_eq(o.nobj, 1);
    run_free(&o);
    p.nthresh = 32;
    p.mincont = 1; /* no branch can hold the whole island's flux above its level */
    run(&im, 3, 5, &p, &o);
    ck_assert_int_eq(o.nobj, 1);
    run_free(&o);
    p.mincont = 0.005;
    p.minarea = 400; /* branches too small */
    run(&im, 3, 5, &p, &o);
    ck_assert_int_eq(o.nobj, 1);
    run_free(&o);
    sf_image_free(&im, NULL);

    sf_deblend_params_default(&p);
    blobs(&im, 64, 48, faint, 2, 0, 1);
    run(&im, 3, 1, &p, &o);
    ck_assert_int_eq(o.nisl, 1);
    ck_assert_int_eq(o.nobj, 1);
    run_free(&o);
    p.mincont = 0; /* any branch counts: now it splits */
    run(&im, 3, 1, &p, &o);
    ck_assert_int_eq(o.nobj, 2);
    check_invariants(&o, sf_npix(64, 48));
    run_free(&o);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_canonical_order)
{
    /* island 1: two peaks one above the other; island 2 to the right,
     * starting on a row between them: the lower object of island 1 starts
     * after island 2 and is numbered after it */
    const blob b[] = {{12, 10, 100, 2.5}, {12, 22, 100, 2.5}, {45, 14, 50, 2.0}};
    sf_image im;
    sf_deblend_params p;
    run_out o;
    sf_deblend_params_default(&p);
    blobs(&im, 64, 40, b, 3, 0, 1);
    run(&im, 3, 5, &p, &o);
    ck_assert_int_eq(o.nisl, 2);
    ck_assert_int_eq(o.nobj, 3);
    check_invariants(&o, sf_npix(64, 40));
    ck_assert_int_eq(o.lab.data[10 * 64 + 12], 1);
    ck_assert_int_eq(o.lab.data[14 * 64 + 45], 2);
    ck_assert_int_eq(o.lab.data[22 * 64 + 12], 3);
    ck_assert_int_eq(o.parent[1], 1);
    ck_assert_int_eq(o.parent[2], 2);
    ck_assert_int_eq(o.parent[3], 1);
    ck_assert_int_eq(o.nchild[1], 2);
    ck_assert_int_eq(o.nchild[2], 1);
    run_free(&o);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_three_and_noise)
{
    /* three sources in a row with noise: three objects; then a random
     * crowded field: the invariants hold and some islands split */
    const blob b[] = {{15, 20, 80, 2.2}, {24, 20, 60, 2.2}, {33, 21, 90, 2.2}};
    sf_image im;
    sf_deblend_params p;
    run_out o;
    int split = 0;
    sf_deblend_params_default(&p);
    blobs(&im, 48, 40, b, 3, 1.0, 5);
    run(&im, 3, 5, &p, &o);
    ck_assert_int_ge(o.nobj, 3);
    check_invariants(&o, sf_npix(48, 40));
    ck_assert_int_ne(o.lab.data[20 * 48 + 15], o.lab.data[20 * 48 + 24]);
    ck_assert_int_ne(o.lab.data[20 * 48 + 24], o.lab.data[21 * 48 + 33]);
    run_free(&o);
    sf_image_free(&im, NULL);

    sftest_noise_image(&im, 300, 200, 11, 400, 0.01);
    run(&im, 2.5, 3, &p, &o);
    check_invariants(&o, sf_npix(300, 200));
    for (int j = 1; j <= o.nisl; j++)
        split += o.nchild[j] > 1;
    ck_assert_int_gt(split, 0);
    ck_assert_int_gt(o.nobj, o.nisl);
    run_free(&o);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_math)
{
    double worst = 0;
    for (double x = 1e-300; x < 1e300; x *= 1.37) {
        double r = fabs(sf_db_log(x) - log(x)) / fmax(1.0, fabs(log(x)));
        worst = fmax(worst, r);
    }
    ck_assert_msg(worst < 4e-16, "log: worst relative error %g", worst);
    worst = 0;
    for (double x = -700; x < 700; x += 0.731) {
        double r = fabs(sf_db_exp(x) - exp(x)) / exp(x);
        worst = fmax(worst, r);
    }
    ck_assert_msg(worst < 2e-15, "exp: worst relative error %g", worst);
    ck_assert(sf_db_exp(-800) == 0);
    ck_assert(isinf(sf_db_exp(800)));
    {
        float t[31];
        sf_db_levels(1.5f, 1000.0f, 32, t);
        for (int k = 1; k < 32; k++) {
            double want = 1.5 * pow(1000.0 / 1.5, k / 32.0);
            ck_assert_msg(fabs(t[k - 1] - want) <= 1e-6 * want, "level %d: %g, want %g", k, t[k - 1],
                          want);
            if (k > 1)
                ck_assert(t[k - 1] > t[k - 2]);
        }
    }
}
END_TEST

START_TEST(test_unusable_noise)
{
    /* an rms map gone negative (or infinite) inside an island: its branch
     * sums would not be finite, so the island is left whole (and nothing
     * overflows); a clean map splits the same island */
    const blob two[] = {{20, 20, 100, 2.5}, {30, 22, 40, 2.5}};
    sf_image im, bkg, rms;
    sf_labels l;
    sf_bkg_stats bs = {.median = 0, .sigma = 1};
    sf_thresh_params tp;
    sf_seg_params sp = {8, 5};
    sf_mask m;
    sf_deblend_params p;
    sf_deblend_in in;
    int nisl, nobj, *par, *nch;
    blobs(&im, 64, 48, two, 2, 0, 1);
    sf_thresh_params_default(&tp);
    tp.nsigma = 3;
    ck_assert_int_eq(sf_mask_alloc(&m, 64, 48, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_threshold_cpu(&im, &tp, &bs, NULL, NULL, &m), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&l, 64, 48, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&bkg, 64, 48, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&rms, 64, 48, SF_HOST, NULL), SF_OK);
    for (int i = 0; i < 64 * 48; i++) {
        bkg.data[i] = 0;
        rms.data[i] = 1;
    }
    memset(&in, 0, sizeof in);
    in.bkg = &bkg;
    in.rms = &rms;
    in.level_scale = in.noise_scale = 1;
    in.subtract = 1;
    in.t0 = 3;
    sf_deblend_params_default(&p);
    p.minarea = 5;
    for (int c = 0; c < 3; c++) {
        if (c == 1)
            rms.data[21 * 64 + 25] = -4e34f;
        if (c == 2) {
            rms.data[21 * 64 + 25] = 1;
            rms.data[20 * 64 + 30] = 3e38f; /* sigma times the top level overflows */
        }
        ck_assert_int_eq(sf_segment_cpu(&m, &sp, &l, &nisl), SF_OK);
        ck_assert_int_eq(nisl, 1);
        ck_assert_int_eq(sf_deblend_cpu(&im, &in, &p, &l, nisl, &nobj, &par, &nch), SF_OK);
        ck_assert_msg(nobj == (c == 0 ? 2 : 1), "case %d: %d objects", c, nobj);
        free(par);
        free(nch);
    }
    sf_mask_free(&m, NULL);
    sf_labels_free(&l, NULL);
    sf_image_free(&bkg, NULL);
    sf_image_free(&rms, NULL);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_params)
{
    sf_image im;
    sf_labels l;
    sf_deblend_params p;
    sf_deblend_in in;
    int nobj, *par, *nch;
    memset(&in, 0, sizeof in);
    in.t0 = 3;
    in.sigma = 1;
    in.level_scale = in.noise_scale = 1;
    ck_assert_int_eq(sf_image_alloc(&im, 8, 8, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&l, 8, 8, SF_HOST, NULL), SF_OK);
    memset(l.data, 0, 64 * sizeof *l.data);
    sf_deblend_params_default(&p);
    p.minarea = 1;
    p.nthresh = 0;
    ck_assert_int_eq(sf_deblend_cpu(&im, &in, &p, &l, 0, &nobj, &par, &nch), SF_ERR_PARAM);
    p.nthresh = 32;
    p.mincont = -0.1;
    ck_assert_int_eq(sf_deblend_cpu(&im, &in, &p, &l, 0, &nobj, &par, &nch), SF_ERR_PARAM);
    p.mincont = 0.005;
    l.data[5] = 3; /* a label beyond nislands */
    ck_assert_int_eq(sf_deblend_cpu(&im, &in, &p, &l, 1, &nobj, &par, &nch), SF_ERR_INTERNAL);
    l.data[5] = 0;
    ck_assert_int_eq(sf_deblend_cpu(&im, &in, &p, &l, 0, &nobj, &par, &nch), SF_OK);
    ck_assert_int_eq(nobj, 0);
    free(par);
    free(nch);
    sf_labels_free(&l, NULL);
    sf_image_free(&im, NULL);
}
END_TEST

/* ---- GPU against the CPU twin ---------------------------------------------- */

/* The labelled pixels of a label map (what sf_deblend_in.npix gives). */
static long long labelled(const sf_labels *l)
{
    long long t = 0;
    for (size_t i = 0; i < sf_npix(l->nx, l->ny); i++)
        t += l->data[i] != 0;
    return t;
}

/* Threshold (global level 0, sigma 1, nsigma t0) and segment on the host,
 * then deblend the same island map with both versions; with bkg (and rms)
 * the deblending reads d and sigma from those maps. Everything must be
 * identical. Every other call gives the GPU the labelled pixels' count
 * (sf_deblend_in.npix, as the runner does from the segment stage); the
 * others let it count them. */
static void gpu_check(const sf_image *im, double t0, int minarea, int conn,
                      const sf_deblend_params *p0, const sf_image *bkg, const sf_image *rms,
                      const char *what)
{
    sf_gpu *g = sftest_gpu();
    const int nx = im->nx, ny = im->ny;
    const size_t n = sf_npix(nx, ny);
    sf_seg_params sp = {conn, minarea};
    sf_mask m, dm = {0};
    sf_labels cl, gl, dl;
    sf_image di = {0}, db = {0}, dr = {0};
    const int mask_on = conn == 8; /* the GPU reads labels under the mask, or everywhere */
    sf_deblend_in in = unit_in(t0), gin;
    sf_deblend_params p = *p0;
    int nisl = 0, nc = -1, ng = -1, *pc = NULL, *chc = NULL, *pg = NULL, *chg = NULL;
    char buf[256];
    sf_status st;
    snprintf(buf, sizeof buf, "%s %dx%d t0 %g minarea %d conn %d nthresh %d mincont %g%s", what,
             nx, ny, t0, minarea, conn, p.nthresh, p.mincont,
             bkg ? (rms ? " maps" : " bkg map") : "");
    islands(im, t0, &sp, &m, &cl, &nisl);
    ck_assert_int_eq(sf_labels_alloc(&gl, nx, ny, SF_HOST, NULL), SF_OK);
    memcpy(gl.data, cl.data, n * sizeof *cl.data);
    in.bkg = bkg;
    in.rms = rms;
    if (p.minarea == 0)
        p.minarea = minarea;
    p.connectivity = conn;
    ck_assert_int_eq(sf_deblend_cpu(im, &in, &p, &cl, nisl, &nc, &pc, &chc), SF_OK);

    gin = in;
    {
        static int calls;
        gin.npix = calls++ % 2 ? labelled(&gl) : 0;
        if (gin.npix)
            strncat(buf, " (count given)", sizeof buf - strlen(buf) - 1);
    }
    ck_assert_int_eq(sf_image_alloc(&di, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, im, &di), SF_OK);
    if (bkg) {
        ck_assert_int_eq(sf_image_alloc(&db, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, bkg, &db), SF_OK);
        gin.bkg = &db;
    }
    if (rms) {
        ck_assert_int_eq(sf_image_alloc(&dr, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_image_upload(g, rms, &dr), SF_OK);
        gin.rms = &dr;
    }
    ck_assert_int_eq(sf_labels_alloc(&dl, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_labels_upload(g, &gl, &dl), SF_OK);
    if (mask_on) {
        ck_assert_int_eq(sf_mask_alloc(&dm, nx, ny, SF_DEVICE, g), SF_OK);
        ck_assert_int_eq(sf_mask_upload(g, &m, &dm), SF_OK);
    }
    st = sf_deblend_gpu(g, &di, &gin, &p, mask_on ? &dm : NULL, &dl, nisl, &ng, &pg, &chg);
    ck_assert_msg(st == SF_OK, "%s: %s: %s", buf, sf_strerror(st), sf_errdetail());
    ck_assert_int_eq(sf_labels_download(g, &dl, &gl), SF_OK);
    ck_assert_msg(nc == ng, "%s: %d objects on the CPU, %d on the GPU", buf, nc, ng);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(cl.data[i] == gl.data[i], "%s: pixel (%zu, %zu): CPU label %d, GPU %d", buf,
                      i % (size_t)nx, i / (size_t)nx, cl.data[i], gl.data[i]);
    for (int i = 1; i <= nc; i++)
        ck_assert_msg(pc[i] == pg[i], "%s: parent of %d: CPU %d, GPU %d", buf, i, pc[i], pg[i]);
    for (int j = 1; j <= nisl; j++)
        ck_assert_msg(chc[j] == chg[j], "%s: children of island %d: CPU %d, GPU %d", buf, j,
                      chc[j], chg[j]);
    if (getenv("SKYFIND_TEST_VERBOSE"))
        printf("%s: %d islands, %d objects, identical\n", buf, nisl, nc);
    free(pc);
    free(chc);
    free(pg);
    free(chg);
    sf_labels_free(&dl, g);
    if (mask_on)
        sf_mask_free(&dm, g);
    sf_image_free(&di, g);
    sf_image_free(&db, g);
    sf_image_free(&dr, g);
    sf_labels_free(&cl, NULL);
    sf_labels_free(&gl, NULL);
    sf_mask_free(&m, NULL);
}

/* nthresh, mincont and connectivity over their useful range. */
static void gpu_check_params(const sf_image *im, double t0, int minarea, const char *what)
{
    static const int nth[] = {1, 2, 8, 32, 64};
    static const double mc[] = {0, 0.005, 0.2};
    sf_deblend_params p;
    for (int conn = 4; conn <= 8; conn += 4)
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 3; b++) {
                if (sftest_quick() && (a != 3 || b == 2))
                    continue;
                sf_deblend_params_default(&p);
                p.nthresh = nth[a];
                p.mincont = mc[b];
                gpu_check(im, t0, minarea, conn, &p, NULL, NULL, what);
            }
}

START_TEST(gpu_blobs)
{
    const blob two[] = {{20, 20, 100, 2.5}, {30, 22, 40, 2.5}};
    const blob three[] = {{15, 20, 80, 2.2}, {24, 20, 60, 2.2}, {33, 21, 90, 2.2}};
    const blob order[] = {{12, 10, 100, 2.5}, {12, 22, 100, 2.5}, {45, 14, 50, 2.0}};
    const blob faint[] = {{25, 24, 50, 6}, {40, 24, 4, 1.0}};
    const struct {
        const blob *b;
        int nb, nx, ny, minarea;
        double noise;
        const char *what;
    } c[] = {{two, 2, 64, 48, 5, 0, "two peaks"},
             {three, 3, 48, 40, 5, 1.0, "three with noise"},
             {order, 3, 64, 40, 5, 0, "canonical order"},
             {faint, 2, 64, 48, 1, 0, "faint companion"}};
    for (int k = 0; k < 4; k++) {
        sf_image im;
        blobs(&im, c[k].nx, c[k].ny, c[k].b, c[k].nb, c[k].noise, c[k].noise > 0 ? 5 : 1);
        gpu_check_params(&im, 3, c[k].minarea, c[k].what);
        sf_image_free(&im, NULL);
    }
}
END_TEST

/* A count of labelled pixels (sf_deblend_in.npix) that the labels
 * contradict, too high or too low, is an internal error and leaves the
 * labels as they were (compute-sanitizer's memcheck runs this case: nothing
 * reads or writes past the keys); more pixels than the image holds is a
 * parameter error; the right count deblends as the CPU twin. */
START_TEST(gpu_wrong_count)
{
    const blob two[] = {{20, 20, 100, 2.5}, {30, 22, 40, 2.5}, {50, 30, 60, 2.0}};
    const int nx = 64, ny = 48;
    sf_gpu *g = sftest_gpu();
    sf_image im, di = {0};
    sf_seg_params sp = {8, 5};
    sf_mask m, dm = {0};
    sf_labels l, dl, back;
    sf_deblend_in in = unit_in(3);
    sf_deblend_params p;
    int nisl = 0, nobj = -1, *par = NULL, *nch = NULL;
    long long T;
    blobs(&im, nx, ny, two, 3, 0, 1);
    sf_deblend_params_default(&p);
    p.minarea = 5;
    p.connectivity = 8;
    islands(&im, 3, &sp, &m, &l, &nisl);
    ck_assert_int_eq(sf_labels_alloc(&back, nx, ny, SF_HOST, NULL), SF_OK);
    T = labelled(&l);
    ck_assert(nisl >= 2 && T > 40);
    ck_assert_int_eq(sf_image_alloc(&di, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, &im, &di), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&dl, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_labels_upload(g, &l, &dl), SF_OK);
    ck_assert_int_eq(sf_mask_alloc(&dm, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_mask_upload(g, &m, &dm), SF_OK);
    {
        const long long wrong[] = {T + 7, T - 7, 1};
        for (int k = 0; k < 3; k++) {
            in.npix = wrong[k];
            ck_assert_int_eq(sf_deblend_gpu(g, &di, &in, &p, &dm, &dl, nisl, &nobj, &par, &nch),
                             SF_ERR_INTERNAL);
            ck_assert_msg(strstr(sf_errdetail(), "counted") != NULL, "%s", sf_errdetail());
            ck_assert_ptr_null(par);
            ck_assert_int_eq(sf_labels_download(g, &dl, &back), SF_OK);
            ck_assert(memcmp(back.data, l.data, sf_npix(nx, ny) * sizeof *l.data) == 0);
        }
    }
    in.npix = (long long)sf_npix(nx, ny) + 1;
    ck_assert_int_eq(sf_deblend_gpu(g, &di, &in, &p, &dm, &dl, nisl, &nobj, &par, &nch),
                     SF_ERR_PARAM);
    in.npix = T;
    ck_assert_int_eq(sf_deblend_gpu(g, &di, &in, &p, &dm, &dl, nisl, &nobj, &par, &nch), SF_OK);
    ck_assert_int_ge(nobj, 3); /* the two touching blobs split, the third apart */
    free(par);
    free(nch);
    sf_labels_free(&dl, g);
    sf_mask_free(&dm, g);
    sf_image_free(&di, g);
    sf_labels_free(&l, NULL);
    sf_labels_free(&back, NULL);
    sf_mask_free(&m, NULL);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(gpu_crowded)
{
    /* random crowded fields with noise (and NaN pixels), with and without
     * background and noise maps */
    sf_image im, bkg, rms;
    sf_deblend_params p;
    const int sizes[] = {300, 1024}, nsrc[] = {400, 3000};
    for (int k = 0; k < 2; k++) {
        const int nx = sizes[k], ny = sizes[k] * 2 / 3;
        if (sftest_quick() && k > 0)
            break;
        sftest_noise_image(&im, nx, ny, 11 + k, nsrc[k], k ? 0.001 : 0);
        gpu_check_params(&im, 2.5, 3, "crowded");
        ck_assert_int_eq(sf_image_alloc(&bkg, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_image_alloc(&rms, nx, ny, SF_HOST, NULL), SF_OK);
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                bkg.data[(size_t)y * nx + x] = (float)(0.3 * sin(x / 40.0) + 0.2 * y / ny);
                rms.data[(size_t)y * nx + x] = (float)(0.8 + 0.5 * x / nx);
            }
        sf_deblend_params_default(&p);
        gpu_check(&im, 2.5, 3, 8, &p, &bkg, &rms, "crowded");
        gpu_check(&im, 2.5, 3, 8, &p, &bkg, NULL, "crowded");
        gpu_check(&im, 1.5, 5, 4, &p, &bkg, &rms, "crowded");
        /* an rms map gone negative or huge in places: those islands whole */
        for (int y = ny / 3; y < ny / 3 + 40; y++)
            for (int x = nx / 3; x < nx / 3 + 40; x++)
                rms.data[(size_t)y * nx + x] = (x + y) % 7 ? -1e34f : 3e38f;
        gpu_check(&im, 2.5, 3, 8, &p, &bkg, &rms, "crowded, unusable noise");
        sf_image_free(&bkg, NULL);
        sf_image_free(&rms, NULL);
        sf_image_free(&im, NULL);
    }
}
END_TEST

START_TEST(gpu_large_island)
{
    /* a few hundred thousand pixels in one island: overlapping broad
     * sources above a low threshold, split many times */
    const int n = sftest_quick() ? 200 : 700;
    blob b[40];
    sf_image im;
    sf_deblend_params p;
    sftest_rng r = {77};
    for (int k = 0; k < 40; k++) {
        b[k].x = n * (0.2 + 0.6 * sftest_uniform(&r));
        b[k].y = n * (0.2 + 0.6 * sftest_uniform(&r));
        b[k].amp = 20 + 200 * sftest_uniform(&r);
        b[k].sigma = n / 40.0 * (1 + 2 * sftest_uniform(&r));
    }
    blobs(&im, n, n, b, 40, 1.0, 9);
    sf_deblend_params_default(&p);
    gpu_check(&im, 2, 5, 8, &p, NULL, NULL, "large island");
    gpu_check(&im, 2, 5, 4, &p, NULL, NULL, "large island");
    p.nthresh = 256;
    p.mincont = 0.0005;
    gpu_check(&im, 2, 5, 8, &p, NULL, NULL, "large island");
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(gpu_params)
{
    sf_gpu *g = sftest_gpu();
    sf_image im;
    sf_labels l;
    sf_deblend_params p;
    sf_deblend_in in;
    int nobj = -1, *par = NULL, *nch = NULL;
    memset(&in, 0, sizeof in);
    in.t0 = 3;
    in.sigma = 1;
    in.level_scale = in.noise_scale = 1;
    ck_assert_int_eq(sf_image_alloc(&im, 8, 8, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&l, 8, 8, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_gpu_memset(g, im.data, 0, 64 * sizeof(float)), SF_OK);
    ck_assert_int_eq(sf_gpu_memset(g, l.data, 0, 64 * sizeof(int32_t)), SF_OK);
    sf_deblend_params_default(&p);
    p.minarea = 1;
    p.nthresh = 0;
    ck_assert_int_eq(sf_deblend_gpu(g, &im, &in, &p, NULL, &l, 0, &nobj, &par, &nch), SF_ERR_PARAM);
    p.nthresh = 32;
    {
        int32_t three = 3; /* a label beyond nislands */
        ck_assert_int_eq(sf_gpu_to_device(g, l.data + 5, &three, sizeof three), SF_OK);
        ck_assert_int_eq(sf_deblend_gpu(g, &im, &in, &p, NULL, &l, 1, &nobj, &par, &nch),
                         SF_ERR_INTERNAL);
        ck_assert_ptr_null(par);
        ck_assert_int_eq(sf_gpu_memset(g, l.data, 0, 64 * sizeof(int32_t)), SF_OK);
    }
    ck_assert_int_eq(sf_deblend_gpu(g, &im, &in, &p, NULL, &l, 0, &nobj, &par, &nch), SF_OK);
    ck_assert_int_eq(nobj, 0);
    ck_assert_ptr_nonnull(par);
    free(par);
    free(nch);
    sf_labels_free(&l, g);
    sf_image_free(&im, g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("deblend");
    TCase *cpu = tcase_create("cpu");
    TCase *gpu = tcase_create("gpu");
    tcase_add_test(cpu, test_two_peaks);
    tcase_add_test(cpu, test_not_split);
    tcase_add_test(cpu, test_canonical_order);
    tcase_add_test(cpu, test_three_and_noise);
    tcase_add_test(cpu, test_math);
    tcase_add_test(cpu, test_params);
    tcase_add_test(cpu, test_unusable_noise);
    tcase_set_timeout(cpu, 120);
    suite_add_tcase(s, cpu);
    tcase_add_test(gpu, gpu_blobs);
    tcase_add_test(gpu, gpu_crowded);
    tcase_add_test(gpu, gpu_large_island);
    tcase_add_test(gpu, gpu_params);
    tcase_add_test(gpu, gpu_wrong_count);
    tcase_set_timeout(gpu, 600);
    return sftest_main(s, &gpu, 1);
}
