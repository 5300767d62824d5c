/* Check suite of the measure stage: the 128-bit fixed-point sums, the CPU
 * twin against a long-double reference written here, and the GPU version
 * against the CPU twin byte for byte (memcmp of the sf_source arrays). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sftest.h"
#include "skyfind/measure.h"
#include "fixsum.h"

/* ---- inputs ------------------------------------------------------------- */

enum { K_THRESH, K_BLOCKY, K_TIES, K_WHOLE, K_NKINDS };
static const char *kind_name[] = {"thresh", "blocky", "ties", "whole"};

/* Canonical 4-connected labels of finite pixels above thr (raster order of
 * each island's first pixel). */
static int flood_labels(const sf_image *im, float thr, sf_labels *lab)
{
    int nx = im->nx, ny = im->ny, n = 0;
    size_t np = sf_npix(nx, ny), *stack = malloc(np * sizeof *stack);
    ck_assert_ptr_nonnull(stack);
    ck_assert_int_eq(sf_labels_alloc(lab, nx, ny, SF_HOST, NULL), SF_OK);
    memset(lab->data, 0, np * sizeof *lab->data);
    for (size_t i = 0; i < np; i++) {
        size_t top = 0;
        if (lab->data[i] || !(im->data[i] > thr))
            continue;
        lab->data[i] = ++n;
        stack[top++] = i;
        while (top) {
            size_t j = stack[--top];
            int x = (int)(j % nx), y = (int)(j / nx);
            size_t nb[4];
            int k = 0;
            if (x > 0) nb[k++] = j - 1;
            if (x < nx - 1) nb[k++] = j + 1;
            if (y > 0) nb[k++] = j - nx;
            if (y < ny - 1) nb[k++] = j + nx;
            while (k--)
                if (!lab->data[nb[k]] && im->data[nb[k]] > thr) {
                    lab->data[nb[k]] = n;
                    stack[top++] = nb[k];
                }
        }
    }
    free(stack);
    return n;
}

/* Blank some labelled pixels (NaN, +-inf): measure must skip them. */
static void blank_inside(sf_image *im, const sf_labels *lab, uint64_t seed)
{
    sftest_rng r = {seed};
    for (size_t i = 0; i < sf_npix(im->nx, im->ny); i++) {
        double u;
        if (!lab->data[i])
            continue;
        u = sftest_uniform(&r);
        if (u < 0.05)
            im->data[i] = NAN;
        else if (u < 0.06)
            im->data[i] = INFINITY;
        else if (u < 0.07)
            im->data[i] = -INFINITY;
    }
}

/* One input of the given kind. Returns nlabels. */
static int make_case(int kind, int nx, int ny, uint64_t seed, sf_image *im, sf_labels *lab)
{
    size_t np = sf_npix(nx, ny);
    int n = 0;
    sftest_noise_image(im, nx, ny, seed, 1 + (int)(np / 2000), 0.02);
    switch (kind) {
    case K_THRESH: /* islands of noise peaks and sources, NaN/inf inside */
        n = flood_labels(im, 1.0f, lab);
        blank_inside(im, lab, seed + 1);
        break;
    case K_BLOCKY: { /* blocks over noise: negative and near-zero fluxes */
        int bw = 1 + nx / 7, bh = 1 + ny / 5, nbx = (nx + bw - 1) / bw;
        sftest_rng r = {seed + 2};
        ck_assert_int_eq(sf_labels_alloc(lab, nx, ny, SF_HOST, NULL), SF_OK);
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                int b = (y / bh) * nbx + x / bw;
                lab->data[(size_t)y * nx + x] = (b % 3 == 2) ? 0 : b + 1; /* some empty labels */
            }
        n = ((ny + bh - 1) / bh) * nbx;
        for (size_t i = 0; i < np; i++) /* fill the NaN block: blocks are all-NaN or mixed */
            if (isnan(im->data[i]) && sftest_uniform(&r) < 0.5)
                im->data[i] = (float)sftest_normal(&r);
        /* a label of exactly zero flux: +1.5 and -1.5 */
        if (np >= 2) {
            n++;
            lab->data[0] = n;
            lab->data[np - 1] = n;
            im->data[0] = 1.5f;
            im->data[np - 1] = -1.5f;
        }
        break;
    }
    case K_TIES: /* integer values: many equal peaks; -0 and +0 */
        for (size_t i = 0; i < np; i++)
            if (isfinite(im->data[i]))
                im->data[i] = rintf(im->data[i]);
        n = flood_labels(im, 0.5f, lab);
        if (np >= 4) { /* label of zeros with -0 before +0: peak is +0 at index 3 */
            n++;
            for (size_t i = 0; i < 4; i++)
                lab->data[i] = n;
            im->data[0] = -0.0f;
            im->data[1] = -1.0f;
            im->data[2] = -0.0f;
            im->data[3] = 0.0f;
        }
        break;
    case K_WHOLE: /* a single island covering the whole image */
        ck_assert_int_eq(sf_labels_alloc(lab, nx, ny, SF_HOST, NULL), SF_OK);
        for (size_t i = 0; i < np; i++)
            lab->data[i] = 1;
        n = 1;
        break;
    }
    return n;
}

/* ---- reference ----------------------------------------------------------- */

typedef struct {
    long long npix;
    long double s, sx, sy;     /* sums of v, v*x, v*y */
    long double as, asx, asy;  /* sums of |.|, for the tolerances */
    float peak;
    int px, py;
} ref_src;

static int peak_better(float v, float best)
{
    return v > best || (v == 0 && best == 0 && signbit(best) && !signbit(v));
}

static ref_src *reference(const sf_image *im, const sf_labels *lab, int n, double *M)
{
    ref_src *r = calloc(n ? n : 1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    *M = 0;
    for (int y = 0; y < im->ny; y++)
        for (int x = 0; x < im->nx; x++) {
            int l = lab->data[(size_t)y * lab->stride + x];
            float v = im->data[(size_t)y * im->stride + x];
            ref_src *s;
            if (!l || !isfinite(v))
                continue;
            s = &r[l - 1];
            if (fabs(v) > *M)
                *M = fabs(v);
            if (s->npix == 0 || peak_better(v, s->peak)) {
                s->peak = v;
                s->px = x;
                s->py = y;
            }
            s->npix++;
            s->s += v;
            s->sx += (long double)v * x;
            s->sy += (long double)v * y;
            s->as += fabsl(v);
            s->asx += fabsl((long double)v * x);
            s->asy += fabsl((long double)v * y);
        }
    return r;
}

static int near(double got, long double ref, double tol)
{
    return fabsl((long double)got - ref) <= tol;
}

/* CPU results against the reference; returns the number of bad sources. */
static int check_ref(const char *what, const sf_source *o, const ref_src *r, int n, double M)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const sf_source *g = &o[i];
        const ref_src *q = &r[i];
        /* quantum of the fixed-point sums: 2^-e <= M*2^-65, per term */
        double qa = (double)q->npix * M * 0x1p-65;
        double ts = 1e-12 * fabsl(q->s) + 1e-15 * q->as + qa;
        int ok = g->id == i + 1 && g->npix == q->npix;
        if (ok && q->npix == 0) {
            ok = g->flux_sum == 0 && isnan(g->x) && isnan(g->y) && isnan(g->peak) &&
                 g->peak_x == -1 && g->peak_y == -1;
        } else if (ok) {
            ok = near(g->flux_sum, q->s, ts) && memcmp(&g->peak, &q->peak, sizeof(float)) == 0 &&
                 g->peak_x == q->px && g->peak_y == q->py;
            if (ok && g->flux_sum == 0) {
                ok = isnan(g->x) && isnan(g->y);
            } else if (ok) {
                long double rx = q->sx / q->s, ry = q->sy / q->s;
                double tx = 1e-12 * fabsl(rx) +
                            (1e-15 * q->asx + qa * q->npix + fabsl(rx) * ts) / fabsl(q->s);
                double ty = 1e-12 * fabsl(ry) +
                            (1e-15 * q->asy + qa * q->npix + fabsl(ry) * ts) / fabsl(q->s);
                ok = near(g->x, rx, tx) && near(g->y, ry, ty);
            }
        }
        if (!ok && bad++ < 3)
            fprintf(stderr,
                    "%s: source %d: got id %d npix %lld flux %.17g x %.17g y %.17g peak %.9g "
                    "at (%d,%d); want npix %lld flux %.17Lg x %.17Lg y %.17Lg peak %.9g at "
                    "(%d,%d)\n",
                    what, i + 1, g->id, g->npix, g->flux_sum, g->x, g->y, g->peak, g->peak_x,
                    g->peak_y, q->npix, q->s, q->sx / q->s, q->sy / q->s, q->peak, q->px,
                    q->py);
    }
    return bad;
}

static sf_source *run_cpu(const sf_image *im, const sf_labels *lab, int n)
{
    sf_measure_params p;
    sf_source *o = malloc((n ? n : 1) * sizeof *o);
    ck_assert_ptr_nonnull(o);
    sf_measure_params_default(&p);
    ck_assert_msg(sf_measure_cpu(im, lab, n, &p, o) == SF_OK, "%s", sf_errdetail());
    return o;
}

static void cpu_vs_ref(const char *what, const sf_image *im, const sf_labels *lab, int n)
{
    double M;
    ref_src *r = reference(im, lab, n, &M);
    sf_source *o = run_cpu(im, lab, n);
    int bad = check_ref(what, o, r, n, M);
    ck_assert_msg(bad == 0, "%s: %d of %d sources differ from the reference", what, bad, n);
    free(r);
    free(o);
}

/* ---- fixsum -------------------------------------------------------------- */

static __int128 as_i128(sf_fix128 a) { return (__int128)((unsigned __int128)(uint64_t)a.hi << 64 | a.lo); }

START_TEST(test_fixsum_carry)
{
    sf_fix128 a = {UINT64_MAX, 0}, one = {1, 0}, t;
    sf_fix_add(&a, one); /* carry across the 64-bit boundary */
    ck_assert(a.lo == 0 && a.hi == 1);
    t = sf_fix_from_double(-1.0);
    ck_assert(t.lo == UINT64_MAX && t.hi == -1);
    sf_fix_add(&t, one);
    ck_assert(sf_fix_is_zero(t));
    t = sf_fix_from_double(0x1p64);
    ck_assert(t.lo == 0 && t.hi == 1);
    t = sf_fix_from_double(-0x1p64 - 0x1p12); /* borrow across the boundary */
    ck_assert(as_i128(t) == -((__int128)1 << 64) - 4096);
    t = sf_fix_from_double(0x1p98 + 0x1p50);
    ck_assert(as_i128(t) == ((__int128)1 << 98) + ((__int128)1 << 50));
    t = sf_fix_from_double(2.5); /* rint: ties to even */
    ck_assert(t.lo == 2 && t.hi == 0);
    t = sf_fix_from_double(-0.0);
    ck_assert(sf_fix_is_zero(t));
    /* back to double: exact small negatives (magnitude conversion), scale */
    ck_assert(sf_fix_to_double(sf_fix_from_double(-1.0), 0) == -1.0);
    ck_assert(sf_fix_to_double(sf_fix_from_double(-3.0), 10) == -3.0 / 1024);
    ck_assert(sf_fix_to_double(sf_fix_from_double(-0x1p100), 0) == -0x1p100);
    ck_assert(sf_fix_to_double(sf_fix_from_double(0x1p70 + 0x1p20), 70) == 1.0 + 0x1p-50);
    ck_assert_int_eq(sf_fix_exponent(0.0), 0);
    ck_assert_int_eq(sf_fix_exponent(1.0), 65); /* 1 = 0.5 * 2^1 */
    ck_assert_int_eq(sf_fix_exponent(0.75), 66);
    ck_assert(sf_fkey(-0.0f) < sf_fkey(0.0f) && sf_fkey(-1.0f) < sf_fkey(-0.0f) &&
              sf_fkey(1.0f) < sf_fkey(2.0f) && sf_fkey(-FLT_MAX) >= 0x00800000u);
    ck_assert(sf_fkey_value(sf_fkey(-3.25f)) == -3.25f && sf_fkey_value(sf_fkey(1e-40f)) == 1e-40f);
}
END_TEST

START_TEST(test_fixsum_order)
{
    /* many mixed-sign terms near the top of the range, summed in three
     * orders: identical bits, equal to the __int128 sum */
    enum { N = 100000 };
    sftest_rng r = {42};
    sf_fix128 *t = malloc(N * sizeof *t), a = sf_fix_zero(), b = sf_fix_zero(), c = sf_fix_zero();
    __int128 ref = 0;
    ck_assert_ptr_nonnull(t);
    for (int i = 0; i < N; i++) {
        double v = rint((sftest_uniform(&r) - 0.4) * 0x1p97);
        t[i] = sf_fix_from_double(v);
        ck_assert(as_i128(t[i]) == (__int128)v);
        ref += (__int128)v;
    }
    for (int i = 0; i < N; i++)
        sf_fix_add(&a, t[i]);
    for (int i = N - 1; i >= 0; i--)
        sf_fix_add(&b, t[i]);
    for (int s = 0; s < 7; s++) /* strided, like threads */
        for (int i = s; i < N; i += 7)
            sf_fix_add(&c, t[i]);
    ck_assert(a.lo == b.lo && a.hi == b.hi && a.lo == c.lo && a.hi == c.hi);
    ck_assert(as_i128(a) == ref);
    free(t);
}
END_TEST

/* ---- CPU twin ------------------------------------------------------------- */

START_TEST(test_cpu_sizes)
{
    for (int k = 0; k < K_NKINDS; k++)
        for (int s = 0; sftest_sizes[s][0]; s++) {
            sf_image im = {0};
            sf_labels lab = {0};
            char what[64];
            int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
            int n = make_case(k, nx, ny, 1000 + 17 * s + k, &im, &lab);
            snprintf(what, sizeof what, "cpu %s %dx%d", kind_name[k], nx, ny);
            cpu_vs_ref(what, &im, &lab, n);
            sf_image_free(&im, NULL);
            sf_labels_free(&lab, NULL);
        }
}
END_TEST

/* Exact results: carries in the low word, negative sums, zero flux. */
START_TEST(test_cpu_exact)
{
    sf_image im = {0};
    sf_labels lab = {0};
    sf_source *o;
    const float v[8] = {0.75f, 0.75f, -0.25f, -0.5f, -0.5f, 0.25f, -0.75f, 0.75f};
    const int l[8] = {1, 1, 1, 2, 2, 2, 3, 3};
    ck_assert_int_eq(sf_image_alloc(&im, 8, 1, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 8, 1, SF_HOST, NULL), SF_OK);
    memcpy(im.data, v, sizeof v);
    memcpy(lab.data, l, sizeof l);
    o = run_cpu(&im, &lab, 3);
    /* M = 0.75, e = 66: 0.75 * 2^66 = 3 * 2^64, sums cross 2^64 both ways */
    ck_assert(o[0].flux_sum == 1.25 && o[0].x == (0.0 * 0.75 + 0.75 - 0.5) / 1.25);
    ck_assert(o[0].y == 0.0 && o[0].peak == 0.75f && o[0].peak_x == 0 && o[0].npix == 3);
    ck_assert(o[1].flux_sum == -0.75 && o[1].x == (-1.5 - 2.0 + 1.25) / -0.75);
    ck_assert(o[1].peak == 0.25f && o[1].peak_x == 5);
    ck_assert(o[2].flux_sum == 0.0 && !signbit(o[2].flux_sum) && isnan(o[2].x) && isnan(o[2].y));
    ck_assert(o[2].peak == 0.75f && o[2].peak_x == 7 && o[2].peak_y == 0);
    free(o);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

/* 1e-30 .. 1e30: sums resolve M*2^-66; tiny sources next to a huge one
 * measure flux 0 (centroid NaN) with exact npix and peak; on their own they
 * are measured to full precision. */
START_TEST(test_cpu_range)
{
    sf_image im = {0};
    sf_labels lab = {0};
    sf_source *o;
    ck_assert_int_eq(sf_image_alloc(&im, 6, 2, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 6, 2, SF_HOST, NULL), SF_OK);
    for (int i = 0; i < 12; i++) {
        im.data[i] = (i % 6 < 3) ? 1e30f : 1e-30f * (1 + i);
        lab.data[i] = (i % 6 < 3) ? 1 : 2;
    }
    o = run_cpu(&im, &lab, 2);
    ck_assert(fabs(o[0].flux_sum - 6 * (double)1e30f) <= 1e-15 * 6e30 && fabs(o[0].x - 1) < 1e-15);
    ck_assert(o[1].flux_sum == 0 && isnan(o[1].x) && o[1].npix == 6);
    ck_assert(o[1].peak == 1e-30f * 12 && o[1].peak_x == 5 && o[1].peak_y == 1);
    free(o);
    /* the tiny source alone: full precision */
    for (int i = 0; i < 12; i++)
        if (lab.data[i] == 1)
            lab.data[i] = 0;
    for (int i = 0; i < 12; i++)
        lab.data[i] = lab.data[i] ? 1 : 0;
    cpu_vs_ref("range tiny", &im, &lab, 1);
    o = run_cpu(&im, &lab, 1);
    ck_assert(o[0].npix == 6 && fabs(o[0].flux_sum / (48 * (double)1e-30f) - 1) < 1e-6);
    free(o);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

START_TEST(test_cpu_zero_and_errors)
{
    sf_image im = {0}, im2 = {0};
    sf_labels lab = {0};
    sf_source o[2];
    sftest_noise_image(&im, 5, 4, 7, 0, 0);
    ck_assert_int_eq(sf_labels_alloc(&lab, 5, 4, SF_HOST, NULL), SF_OK);
    memset(lab.data, 0, 20 * sizeof *lab.data);
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 0, NULL, NULL), SF_OK); /* nlabels = 0 */
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, -1, NULL, o), SF_ERR_PARAM);
    lab.data[7] = 3;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, o), SF_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "(2, 1)"));
    lab.data[7] = -1;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, o), SF_ERR_INTERNAL);
    lab.data[7] = 1;
    sftest_noise_image(&im2, 4, 5, 7, 0, 0);
    ck_assert_int_eq(sf_measure_cpu(&im2, &lab, 2, NULL, o), SF_ERR_PARAM);
    im.loc = SF_DEVICE;
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, o), SF_ERR_PARAM);
    im.loc = SF_HOST;
    /* a label with no pixels: npix 0, NaN centroid and peak, position -1 */
    ck_assert_int_eq(sf_measure_cpu(&im, &lab, 2, NULL, o), SF_OK);
    ck_assert(o[0].npix == 1 && o[0].peak_x == 2 && o[0].peak_y == 1);
    ck_assert(o[1].id == 2 && o[1].npix == 0 && isnan(o[1].peak) && o[1].peak_x == -1);
    sf_image_free(&im, NULL);
    sf_image_free(&im2, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

/* ---- GPU against the CPU twin -------------------------------------------- */

static const char *field_at(size_t off)
{
    static const struct { size_t off; const char *name; } f[] = {
        {offsetof(sf_source, id), "id"},         {offsetof(sf_source, npix), "npix"},
        {offsetof(sf_source, flux_sum), "flux_sum"}, {offsetof(sf_source, x), "x"},
        {offsetof(sf_source, y), "y"},           {offsetof(sf_source, peak), "peak"},
        {offsetof(sf_source, peak_x), "peak_x"}, {offsetof(sf_source, peak_y), "peak_y"}};
    const char *name = "padding";
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (off >= f[i].off)
            name = f[i].name;
    return name;
}

/* Upload, poison the output, run, download, memcmp against the CPU twin.
 * Device buffers get row strides istride >= nx, lstride >= nx. */
static void gpu_vs_cpu(const char *what, const sf_image *im, const sf_labels *lab, int n,
                       size_t istride, size_t lstride)
{
    sf_gpu *g = sftest_gpu();
    int nx = im->nx, ny = im->ny;
    sf_image di = {nx, ny, istride, NULL, SF_DEVICE};
    sf_labels dl = {nx, ny, lstride, NULL, SF_DEVICE};
    sf_source *c = run_cpu(im, lab, n), *h = malloc((n ? n : 1) * sizeof *h), *d = NULL;
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(sf_gpu_malloc(g, (void **)&di.data, istride * ny * sizeof(float)), SF_OK);
    ck_assert_int_eq(sf_gpu_malloc(g, (void **)&dl.data, lstride * ny * sizeof(int32_t)), SF_OK);
    ck_assert_int_eq(sf_gpu_malloc(g, (void **)&d, (n ? n : 1) * sizeof *d), SF_OK);
    sftest_poison(g, di.data, istride * ny * sizeof(float));    /* NaN padding */
    sftest_poison(g, dl.data, lstride * ny * sizeof(int32_t)); /* label -1 padding */
    if (istride == (size_t)nx && lstride == (size_t)nx) {
        ck_assert_int_eq(sf_gpu_to_device(g, di.data, im->data, sf_npix(nx, ny) * 4), SF_OK);
        ck_assert_int_eq(sf_gpu_to_device(g, dl.data, lab->data, sf_npix(nx, ny) * 4), SF_OK);
    } else {
        for (int y = 0; y < ny; y++) {
            ck_assert_int_eq(sf_gpu_to_device(g, di.data + (size_t)y * istride,
                                              im->data + (size_t)y * nx, nx * sizeof(float)),
                             SF_OK);
            ck_assert_int_eq(sf_gpu_to_device(g, dl.data + (size_t)y * lstride,
                                              lab->data + (size_t)y * nx, nx * sizeof(int32_t)),
                             SF_OK);
        }
    }
    sftest_poison(g, d, (n ? n : 1) * sizeof *d);
    ck_assert_msg(sf_measure_gpu(g, &di, &dl, n, NULL, d) == SF_OK, "%s: %s", what, sf_errdetail());
    ck_assert_int_eq(sf_gpu_to_host(g, h, d, n * sizeof *h), SF_OK);
    for (int i = 0; i < n; i++)
        if (memcmp(&c[i], &h[i], sizeof *h)) {
            size_t off = 0;
            while (((unsigned char *)&c[i])[off] == ((unsigned char *)&h[i])[off])
                off++;
            ck_abort_msg("%s: source %d differs first in %s: cpu npix %lld flux %.17g x %.17g "
                         "y %.17g peak %.9g (%d,%d); gpu npix %lld flux %.17g x %.17g y %.17g "
                         "peak %.9g (%d,%d)",
                         what, i + 1, field_at(off), c[i].npix, c[i].flux_sum, c[i].x, c[i].y,
                         c[i].peak, c[i].peak_x, c[i].peak_y, h[i].npix, h[i].flux_sum, h[i].x,
                         h[i].y, h[i].peak, h[i].peak_x, h[i].peak_y);
        }
    sf_gpu_free(g, di.data);
    sf_gpu_free(g, dl.data);
    sf_gpu_free(g, d);
    free(c);
    free(h);
}

START_TEST(test_gpu_sizes)
{
    for (int k = 0; k < K_NKINDS; k++)
        for (int s = 0; sftest_sizes[s][0]; s++) {
            sf_image im = {0};
            sf_labels lab = {0};
            char what[64];
            int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
            int n = make_case(k, nx, ny, 1000 + 17 * s + k, &im, &lab);
            snprintf(what, sizeof what, "gpu %s %dx%d", kind_name[k], nx, ny);
            gpu_vs_cpu(what, &im, &lab, n, nx, nx);
            snprintf(what, sizeof what, "gpu %s %dx%d strided", kind_name[k], nx, ny);
            gpu_vs_cpu(what, &im, &lab, n, nx + 3, nx + 5);
            sf_image_free(&im, NULL);
            sf_labels_free(&lab, NULL);
        }
}
END_TEST

START_TEST(test_gpu_special)
{
    sf_image im = {0};
    sf_labels lab = {0};
    const float v[8] = {0.75f, 0.75f, -0.25f, -0.5f, -0.5f, 0.25f, -0.75f, 0.75f};
    const int l[8] = {1, 1, 1, 2, 2, 2, 3, 3};
    ck_assert_int_eq(sf_image_alloc(&im, 8, 1, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 8, 1, SF_HOST, NULL), SF_OK);
    memcpy(im.data, v, sizeof v);
    memcpy(lab.data, l, sizeof l);
    gpu_vs_cpu("gpu exact", &im, &lab, 4, 8, 8); /* label 4 is empty */
    for (int i = 0; i < 8; i++)
        im.data[i] = i < 4 ? 1e30f : 1e-30f * (i + 1);
    gpu_vs_cpu("gpu range", &im, &lab, 3, 8, 8);
    memset(lab.data, 0, sizeof l);
    gpu_vs_cpu("gpu no labels", &im, &lab, 0, 8, 8);
    ck_assert_int_eq(sf_measure_gpu(sftest_gpu(), &im, &lab, 1, NULL, NULL), SF_ERR_PARAM);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

START_TEST(test_gpu_large)
{
    sf_image im = {0};
    sf_labels lab = {0};
    if (sftest_quick())
        return; /* under compute-sanitizer: the small cases only */
    int n = make_case(K_THRESH, 2048, 2048, 77, &im, &lab);
    gpu_vs_cpu("gpu thresh 2048x2048", &im, &lab, n, 2048, 2048);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
    n = make_case(K_WHOLE, 4096, 4096, 78, &im, &lab);
    cpu_vs_ref("cpu whole 4096x4096", &im, &lab, n);
    gpu_vs_cpu("gpu whole 4096x4096", &im, &lab, n, 4096, 4096);
    sf_image_free(&im, NULL);
    sf_labels_free(&lab, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("measure");
    TCase *tc = tcase_create("cpu"), *tg = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_set_timeout(tg, 300);
    tcase_add_test(tc, test_fixsum_carry);
    tcase_add_test(tc, test_fixsum_order);
    tcase_add_test(tc, test_cpu_sizes);
    tcase_add_test(tc, test_cpu_exact);
    tcase_add_test(tc, test_cpu_range);
    tcase_add_test(tc, test_cpu_zero_and_errors);
    suite_add_tcase(s, tc);
    tcase_add_test(tg, test_gpu_sizes);
    tcase_add_test(tg, test_gpu_special);
    tcase_add_test(tg, test_gpu_large);
    return sftest_main(s, &tg, 1);
}
