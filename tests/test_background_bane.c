/* Check suite for `background` method=bane: the cells' running-sum records
 * against the sums kept value by value, the CPU twin on images with a
 * known answer (white noise, a plane, NaN blocks, a box without finite
 * pixels, parameter errors, thread independence; every whole node's level
 * the exact median of its kept pixels, check_cell_medians; the maps left as
 * node grids and made in the threshold's pass, test_grid_cpu), and the GPU version
 * against the CPU twin, bit for bit, on awkward sizes, steps and boxes and
 * on real images. The agreement with BANE's own maps and Aegean's local_rms
 * is tests/py/test_background_ref.py's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "sftest.h"
#include "skyfind/background.h"
#include "skyfind/threshold.h"
#include "skyfind/segment.h"
#include "skyfind/deblend.h"
#include "skyfind/measure.h"
#include "skyfind/fit.h"
#include "skyfind/fits.h"
#include "background_bane.h"
#include "fixsum.h" /* sf_fkey */
#include "select.h"  /* sf_mean2_f32 */

static sf_bkg_params bane_params(int step, int box)
{
    sf_bkg_params p;
    sf_bkg_params_default(&p);
    p.method = SF_BKG_BANE;
    p.step = step;
    p.box = box;
    return p;
}

static void free3(sf_image *a, sf_image *b, sf_image *c)
{
    sf_image_free(a, NULL);
    sf_image_free(b, NULL);
    sf_image_free(c, NULL);
}

/* A cell's running sums, value by value, in the association the header
 * documents (32 chunks a half summed from their starts, the chunks'
 * offsets by sf_bane_scan, an entry P + u): what the cells kept before
 * their records. */
static void running_ref(const float *s, int c, double *a1, double *a2)
{
    const int m = c / 2;
    for (int half = 0; half < 2; half++) {
        const int len = half ? m : c - m, cl = (len + 31) / 32;
        double x1[SF_BANE_CHUNKS], x2[SF_BANE_CHUNKS];
        for (int q = 0; q < SF_BANE_CHUNKS; q++) {
            double u1 = 0.0, u2 = 0.0;
            for (int j = q * cl; j < (q + 1) * cl && j < len; j++) {
                const double d = (double)s[half ? m - 1 - j : m + j];
                u1 = u1 + d;
                u2 = u2 + d * d;
            }
            x1[q] = u1;
            x2[q] = u2;
        }
        sf_bane_scan(x1);
        sf_bane_scan(x2);
        for (int q = 0; q < SF_BANE_CHUNKS; q++) {
            double u1 = 0.0, u2 = 0.0;
            for (int j = q * cl; j < (q + 1) * cl && j < len; j++) {
                const int i = half ? m - 1 - j : m + j;
                const double d = (double)s[i];
                u1 = u1 + d;
                u2 = u2 + d * d;
                a1[i] = (q ? x1[q - 1] : 0.0) + u1;
                a2[i] = (q ? x2[q - 1] : 0.0) + u2;
            }
        }
    }
}

static int cmp_key(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The cells' records (sf_bane_records, sf_bane_entry) give every running
 * sum with the bits of the sums kept value by value, for every count a cell
 * of up to 90 x 90 pixels can have around the chunk and checkpoint sizes
 * (1-value chunks, 7 values without a checkpoint, 8 and 9 with one, the
 * largest cells), on noise with a bright outlier at either end; and a range
 * sum is the difference or sum of those entries, the whole cell's its first
 * pair. */
START_TEST(test_records)
{
    const int counts[] = {1, 2, 3, 31, 32, 33, 63, 64, 65, 289, 448, 449, 450, 511, 512, 513, 577,
                          1024, 1025, 2047, 3000, 4096, 6399, 8100};
    const int nc = (int)(sizeof counts / sizeof counts[0]);
    float *s = malloc(8100 * sizeof *s);
    double *a1 = malloc(8100 * sizeof *a1), *a2 = malloc(8100 * sizeof *a2);
    sf_bane_pair *rec = malloc((size_t)sf_bane_rec_slot(90) * sizeof *rec);
    unsigned long long st = 12345;
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(a1);
    ck_assert_ptr_nonnull(a2);
    ck_assert_ptr_nonnull(rec);
    for (int t = 0; t < nc; t++) {
        const int c = counts[t];
        ck_assert_int_le(sf_bane_rec_pairs(c), sf_bane_rec_slot(90));
        for (int i = 0; i < c; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            s[i] = (float)((double)(st >> 11) / 9007199254740992.0 - 0.5) * 1e-3f;
        }
        s[0] = -3.0f; /* outliers a thousand times the noise at both ends */
        if (c > 1)
            s[c - 1] = 7.0f;
        qsort(s, (size_t)c, sizeof *s, cmp_float);
        running_ref(s, c, a1, a2);
        sf_bane_records(s, c, rec);
        for (int i = 0; i < c; i++) {
            double r1, r2;
            sf_bane_entry(s, c, rec, i, &r1, &r2);
            ck_assert_msg(r1 == a1[i] && r2 == a2[i],
                          "count %d entry %d: %.17g %.17g, kept value by value %.17g %.17g", c, i,
                          r1, r2, a1[i], a2[i]);
        }
        {
            double x1, x2;
            const int m = c / 2;
            sf_bane_range2(s, c, rec, 0, c, &x1, &x2);
            ck_assert(x1 == (c > 1 ? a1[0] + a1[c - 1] : a1[0]));
            ck_assert(x2 == (c > 1 ? a2[0] + a2[c - 1] : a2[0]));
            if (c > 3) { /* both outliers clipped: the entries next to them */
                sf_bane_range2(s, c, rec, 1, c - 1, &x1, &x2);
                ck_assert(x1 == a1[1] + a1[c - 2]);
                ck_assert(x2 == a2[1] + a2[c - 2]);
                /* within a half: a difference that never includes the outlier */
                sf_bane_range2(s, c, rec, m + 1, c - 1, &x1, &x2);
                ck_assert(x1 == (m + 1 < c - 1 ? a1[c - 2] - a1[m] : 0.0));
                ck_assert(fabs(x1) < 1e-3 * c);
            }
        }
    }
    free(s);
    free(a1);
    free(a2);
    free(rec);
}
END_TEST

/* The float bounds of the cells' searches (sf_bane_f_le, sf_bane_f_ge)
 * decide every float as the double bound does: (double)v <= l exactly when
 * v <= f_le(l), (double)v < h exactly when v < f_ge(h); at zeros of both
 * signs, subnormals, the float range's ends, infinities, and bounds just
 * beside floats and between them. */
START_TEST(test_float_bounds)
{
    const float fv[] = {0.0f, -0.0f, 1.40129846e-45f, -1.40129846e-45f, 1.17549435e-38f,
                        -1.17549435e-38f, 1.0f, -1.0f, 1.0e-4f, -1.0e-4f, 3.40282347e38f,
                        -3.40282347e38f, INFINITY, -INFINITY, 0.1f, 123456.789f};
    const int nf = (int)(sizeof fv / sizeof fv[0]);
    unsigned long long st = 99;
    for (int t = 0; t < 20000; t++) {
        double b;
        if (t < nf * 5) { /* each float, and just beside it */
            const double x = (double)fv[t / 5];
            const double d[5] = {0.0, 1e-300, -1e-300, x * 1e-12, -x * 1e-12};
            b = x + d[t % 5];
        } else if (t < nf * 5 + 4) {
            const double e[4] = {1e300, -1e300, 3.4028235677973366e38, -3.4028235677973366e38};
            b = e[t - nf * 5];
        } else {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            b = ldexp((double)(long long)(st >> 11) / 4503599627370496.0 - 1.0, (int)(st % 200) - 100);
        }
        const float le = sf_bane_f_le(b), ge = sf_bane_f_ge(b);
        for (int i = 0; i < nf + 3; i++) {
            const float v = i < nf ? fv[i] : i == nf ? (float)b : i == nf + 1 ? le : ge;
            ck_assert_msg(((double)v <= b) == (v <= le), "v %.9g <= bound %.17g: float bound %.9g", v,
                          b, le);
            ck_assert_msg(((double)v < b) == (v < ge), "v %.9g < bound %.17g: float bound %.9g", v, b,
                          ge);
        }
    }
}
END_TEST

/* White noise of sigma 1 on a level of 5: every node's level within a few
 * standard errors of 5 and its rms within 3% of 1 (a 3-sigma clip of a
 * Gaussian keeps 99.7%: its std is 0.986). */
START_TEST(test_noise)
{
    int n = sftest_quick() ? 200 : 600;
    sf_image im, b, r;
    sf_bkg_stats st;
    sf_bkg_params p = bane_params(20, 120);
    double maxdb = 0, maxdr = 0;
    sftest_noise_image(&im, n, n, 7, 0, 0.0);
    for (size_t i = 0; i < sf_npix(n, n); i++)
        im.data[i] += 5.0f;
    sftest_maps_alloc(&b, &r, n, n);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
    for (size_t i = 0; i < sf_npix(n, n); i++) {
        maxdb = fmax(maxdb, fabs(b.data[i] - 5.0));
        maxdr = fmax(maxdr, fabs(r.data[i] - 0.986));
    }
    ck_assert_msg(maxdb < 0.1, "level off by up to %g", maxdb);
    ck_assert_msg(maxdr < 0.03, "rms off by up to %g", maxdr);
    ck_assert_msg(fabs(st.median - 5) < 0.02 && fabs(st.sigma - 0.986) < 0.01 && st.niter >= 1 &&
                      st.niter <= 3 && st.nvalid == (long long)sf_npix(n, n),
                  "stats %g %g %d %lld", st.median, st.sigma, st.niter, st.nvalid);
    free3(&im, &b, &r);
}
END_TEST

/* A plane a + bx + cy: a box's median is the plane at its centre when the box
 * is whole and symmetric, and the bilinear maps reproduce a plane between
 * nodes; its rms is the spread of the plane over the box. Nodes at the far
 * edge (x = nx) sit one past the last pixel, as BANE's. */
START_TEST(test_plane)
{
    const int nx = 203, ny = 151, step = 10, box = 21; /* odd box: centred exactly */
    sf_image im, b, r;
    sf_bkg_stats st;
    sf_bkg_params p = bane_params(step, box);
    sf_image_alloc(&im, nx, ny, SF_HOST, NULL);
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++)
            im.data[(size_t)y * nx + x] = (float)(100.0 + 0.5 * x - 0.25 * y);
    sftest_maps_alloc(&b, &r, nx, ny);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
    /* pixels whose four nodes all have whole boxes */
    for (int y = 10; y <= 139; y++)
        for (int x = 10; x <= 189; x++) {
            double want = 100.0 + 0.5 * x - 0.25 * y;
            ck_assert_msg(fabs(b.data[(size_t)y * nx + x] - want) < 1e-3,
                          "level at (%d,%d) %.6f, plane %.6f", x, y, b.data[(size_t)y * nx + x],
                          want);
        }
    free3(&im, &b, &r);
}
END_TEST

/* NaN pixels give NaN in both maps, finite pixels finite values; a node
 * whose box is all NaN takes its nearest valid nodes' values; an all-NaN
 * image is an error naming the cause, and so is one whose finite pixels no
 * box reaches (step 10, box 1: only the node pixels are read). */
START_TEST(test_nan)
{
    const int n = 160;
    sf_image im, b, r;
    sf_bkg_stats st;
    sf_bkg_params p = bane_params(16, 32);
    sftest_noise_image(&im, n, n, 3, 0, 0.0);
    for (int y = 0; y < 60; y++) /* a blank corner larger than a box */
        for (int x = 0; x < 60; x++)
            im.data[(size_t)y * n + x] = NAN;
    im.data[(size_t)100 * n + 77] = NAN;
    sftest_maps_alloc(&b, &r, n, n);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
    for (size_t i = 0; i < sf_npix(n, n); i++) {
        ck_assert(isnan(im.data[i]) == isnan(b.data[i]));
        ck_assert(isnan(im.data[i]) == isnan(r.data[i]));
        if (!isnan(b.data[i]))
            ck_assert(isfinite(b.data[i]) && r.data[i] > 0.5 && r.data[i] < 2.0);
    }
    for (size_t i = 0; i < sf_npix(n, n); i++)
        im.data[i] = NAN;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_EMPTY);
    ck_assert(strstr(sf_errdetail(), "no finite pixels"));
    im.data[(size_t)5 * n + 5] = 1.0f;
    p = bane_params(10, 1);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_EMPTY);
    ck_assert_msg(strstr(sf_errdetail(), "no 1x1 box"), "%s", sf_errdetail());
    free3(&im, &b, &r);
}
END_TEST

START_TEST(test_params)
{
    sf_bkg_params p = bane_params(0, 64);
    ck_assert_int_eq(sf_bkg_check_params(&p), SF_ERR_PARAM);
    p = bane_params(16, 0);
    ck_assert_int_eq(sf_bkg_check_params(&p), SF_ERR_PARAM);
    p = bane_params(16, 96);
    ck_assert_int_eq(sf_bkg_check_params(&p), SF_OK);
    p.kappa = 0;
    ck_assert_int_eq(sf_bkg_check_params(&p), SF_ERR_PARAM);
    {
        /* an absurd step and box: refused with the reason, not read for days */
        sf_image im, b, r;
        sf_bkg_stats st;
        sftest_noise_image(&im, 2048, 2048, 1, 0, 0.0);
        sftest_maps_alloc(&b, &r, 2048, 2048);
        p = bane_params(1, 3000);
        ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
        ck_assert_msg(strstr(sf_errdetail(), "step 1 and box 3000 would read"), "%s",
                      sf_errdetail());
        p = bane_params(1, 64); /* 64 steps a box: no cells; 1.7e10 reads a pass */
        ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
        p = bane_params(2, 12); /* cells of 2 x 2, 6 a side: accepted */
        ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
        free3(&im, &b, &r);
    }
}
END_TEST

START_TEST(test_threads)
{
#ifdef _OPENMP
    sf_image im, b1, r1, b2, r2;
    sf_bkg_stats s1, s2;
    int nt = omp_get_max_threads();
    sftest_noise_image(&im, 333, 277, 5, 40, 0.05);
    sftest_maps_alloc(&b1, &r1, 333, 277);
    sftest_maps_alloc(&b2, &r2, 333, 277);
    for (int c = 0; c < 2; c++) { /* pixel path (box 70), cell path (box 78) */
        sf_bkg_params p = bane_params(13, c ? 78 : 70);
        omp_set_num_threads(1);
        ck_assert_int_eq(sf_background_cpu(&im, &p, &s1, &b1, &r1), SF_OK);
        /* node rows a group at a time (SKYFIND_BANE_ROWS: the default 8
         * on several threads, single rows, 3, and more rows than the grid
         * has) */
        for (int g = 0; g < 4; g++) {
            static const char *const rows[] = {NULL, "1", "3", "40"};
            if (rows[g])
                setenv("SKYFIND_BANE_ROWS", rows[g], 1);
            omp_set_num_threads(nt > 1 ? nt : 3);
            ck_assert_int_eq(sf_background_cpu(&im, &p, &s2, &b2, &r2), SF_OK);
            omp_set_num_threads(nt);
            unsetenv("SKYFIND_BANE_ROWS");
            ck_assert(memcmp(b1.data, b2.data, sf_npix(333, 277) * 4) == 0);
            ck_assert(memcmp(r1.data, r2.data, sf_npix(333, 277) * 4) == 0);
            ck_assert(s1.median == s2.median && s1.sigma == s2.sigma && s1.niter == s2.niter);
        }
    }
    free3(&im, &b1, &r1);
    sf_image_free(&b2, NULL);
    sf_image_free(&r2, NULL);
#endif
}
END_TEST

/* The nodes whose box is whole, checked against BANE's rule recomputed
 * here pixel by pixel in double: each level is the exact median of the
 * box's kept pixels (bit for bit, so a zero keeps its sign: the kept
 * pixels' middle value by sf_fkey order, -0 before +0) and each rms their
 * standard deviation. Returns the nodes checked. */
static int check_cell_medians(const sf_image *im, const sf_image *b, const sf_image *r,
                              const sf_bkg_params *p)
{
    const int n = im->nx, step = p->step, h = p->box / 2;
    float *kept = malloc((size_t)p->box * p->box * sizeof *kept);
    int checked = 0;
    ck_assert_ptr_nonnull(kept);
    for (int py = h; py + h <= n; py += step)
        for (int px = h; px + h <= n; px += step) {
            double lo = -INFINITY, hi = INFINITY, mean, sigma, s1 = 0, s2 = 0;
            int m = 0;
            for (int y = py - h; y < py + h; y++)
                for (int x = px - h; x < px + h; x++) {
                    const double v = im->data[(size_t)y * n + x];
                    s1 += v;
                    s2 += v * v;
                    m++;
                }
            mean = s1 / m;
            sigma = sqrt(fmax(s2 / m - mean * mean, 0.0));
            for (int it = 0; it < SF_BANE_PASSES; it++) {
                double l = lo, hh = hi, s0 = sigma;
                int c = 0;
                sf_bane_bounds(mean, sigma, p->kappa, &l, &hh);
                s1 = s2 = 0;
                for (int y = py - h; y < py + h; y++)
                    for (int x = px - h; x < px + h; x++) {
                        const double v = im->data[(size_t)y * n + x];
                        if (v > l && v < hh) {
                            s1 += v;
                            s2 += v * v;
                            c++;
                        }
                    }
                if (!c)
                    break;
                lo = l;
                hi = hh;
                m = c;
                mean = s1 / m;
                sigma = sqrt(fmax(s2 / m - mean * mean, 0.0));
                if (sf_bane_settled(s0, sigma))
                    break;
            }
            m = 0;
            for (int y = py - h; y < py + h; y++)
                for (int x = px - h; x < px + h; x++)
                    if (sf_bane_kept(im->data[(size_t)y * n + x], lo, hi))
                        kept[m++] = im->data[(size_t)y * n + x];
            {
                /* the middle value(s) by key order, as the sorted cells hold them */
                uint32_t *key = (uint32_t *)kept;
                float want, klo, khi;
                for (int i = 0; i < m; i++)
                    key[i] = sf_fkey(kept[i]);
                qsort(key, (size_t)m, sizeof *key, cmp_key);
                khi = sf_fkey_value(key[m / 2]);
                klo = sf_fkey_value(key[m % 2 ? m / 2 : m / 2 - 1]);
                want = m % 2 ? khi : sf_mean2_f32(klo, khi);
                const float got = b->data[(size_t)py * n + px], rms = r->data[(size_t)py * n + px];
                ck_assert_msg(memcmp(&got, &want, sizeof got) == 0,
                              "node (%d,%d): level %.9g, the kept pixels' median %.9g", px, py,
                              got, want);
                ck_assert_msg(fabs(rms - sigma) <= 1e-6 * sigma, "node (%d,%d): rms %.9g, want %.9g",
                              px, py, rms, sigma);
                checked++;
            }
        }
    free(kept);
    return checked;
}

/* The cell path's node level is the exact median of the box's kept pixels
 * and its rms their standard deviation (check_cell_medians), at every node
 * whose box is whole. Three bands of rows: noise quantised to 1/64 (many
 * equal values, and zeros of both signs); values in [0, 1/16) with one 1.0
 * a cell (about ten values in each of the cell sort's buckets that hold
 * any, which its insertion sort orders); noise in [-1, 1). With a bright
 * compact source (its cells crowd a few buckets, so the sort falls back to
 * its radix passes) and a single 1e6 pixel. A cell sorted wrongly would
 * give a wrong median. */
START_TEST(test_cell_medians)
{
    const int step = 17, box = 102, n = 12 * step;
    sf_image im, b, r;
    sf_bkg_stats st;
    sf_bkg_params p = bane_params(step, box);
    sftest_rng rng = {12345};
    ck_assert(sf_bane_use_cells(step, box));
    sf_image_alloc(&im, n, n, SF_HOST, NULL);
    for (int i = 0; i < n * n; i++) {
        const uint64_t u = sftest_next(&rng);
        const int q = (int)(u >> 33) % 129 - 64, x = i % n, y = i / n; /* q: -64..64 */
        const double c = (double)(u >> 11) / 9007199254740992.0;        /* [0, 1) */
        if (y < 4 * step) /* quantised */
            im.data[i] = q == 0 && (i & 1) ? -0.0f : (float)q / 64.0f;
        else if (y < 8 * step) /* a narrow band, and a 1.0 in each cell */
            im.data[i] = x % step == 3 && y % step == 5 ? 1.0f : (float)(c / 16.0);
        else
            im.data[i] = (float)(2.0 * c - 1.0);
    }
    for (int y = 0; y < step; y++) /* a source of peak 1000, sigma 2 px, in cell (5, 5) */
        for (int x = 0; x < step; x++) {
            const double dx = x - 8.3, dy = y - 7.6;
            im.data[(size_t)(5 * step + y) * n + 5 * step + x] +=
                (float)(1000.0 * exp(-(dx * dx + dy * dy) / 8.0));
        }
    im.data[(size_t)(3 * step + 4) * n + 8 * step + 9] = 1e6f;
    sftest_maps_alloc(&b, &r, n, n);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
    ck_assert_int_eq(check_cell_medians(&im, &b, &r, &p), 49);
    free3(&im, &b, &r);
}
END_TEST

/* The same on what radio images hold: Gaussian noise with point sources
 * (a few hundred a node's box, where each node's median is found from a
 * window around its left neighbour's, the candidates a few dozen) and a
 * band of noise ten times stronger whose medians jump between node rows;
 * a stretch of exact zeros of both signs (the zero median's sign); on one
 * thread and on several (a thread's first node has no neighbour's guess). */
START_TEST(test_cell_medians_noise)
{
    const int step = 17, box = 102, n = 16 * step;
    sf_image im, b, r;
    sf_bkg_stats st;
    sf_bkg_params p = bane_params(step, box);
    sftest_rng rng = {777};
    sf_image_alloc(&im, n, n, SF_HOST, NULL);
    for (int i = 0; i < n * n; i++) {
        const double g = sftest_normal(&rng);
        const int y = i / n, x = i % n;
        im.data[i] = (float)(1e-4 * g * (y >= 10 * step && y < 12 * step ? 10.0 : 1.0) + 2e-6);
        if (y < step && x < 7 * step) /* zeros of both signs, more than half of a box */
            im.data[i] = (i & 1) ? -0.0f : 0.0f;
    }
    for (int s = 0; s < 40; s++) { /* point sources, 5-50 sigma */
        const int sx = 10 + (s * 97) % (n - 20), sy = 10 + (s * 61) % (n - 20);
        for (int y = sy - 4; y <= sy + 4; y++)
            for (int x = sx - 4; x <= sx + 4; x++)
                im.data[(size_t)y * n + x] += (float)(1e-4 * (5 + s) *
                                                      exp(-((x - sx) * (x - sx) + (y - sy) * (y - sy)) / 4.0));
    }
    sftest_maps_alloc(&b, &r, n, n);
#ifdef _OPENMP
    const int nt0 = omp_get_max_threads();
    for (int t = 1; t <= 3; t += 2) {
        omp_set_num_threads(t);
#endif
        ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
        ck_assert_int_eq(check_cell_medians(&im, &b, &r, &p), 121);
#ifdef _OPENMP
    }
    omp_set_num_threads(nt0);
#endif
    free3(&im, &b, &r);
}
END_TEST

/* ---- GPU against the CPU twin: the same bits ---------------------------- */

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

/* Pixels where two maps differ in their bits (the first few printed). */
static size_t maps_differ(const sf_image *hb, const sf_image *hr, const sf_image *cb,
                          const sf_image *cr, const char *what, const char *how)
{
    size_t n = sf_npix(hb->nx, hb->ny), bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!same_bits(hb->data[i], cb->data[i]) || !same_bits(hr->data[i], cr->data[i]))
            if (bad++ < 5)
                fprintf(stderr, "%s (%s): pixel (%zu,%zu): gpu %.9g %.9g cpu %.9g %.9g\n", what, how,
                        i % (size_t)hb->nx, i / (size_t)hb->nx, hb->data[i], hr->data[i],
                        cb->data[i], cr->data[i]);
    return bad;
}

/* The threshold cases of the grid and view checks: two levels, the image
 * or the filtered stand-in (scales 1.7, 1.3), the rms map or one sigma,
 * the level subtracted or not. */
static void thr_case(sf_thresh_params *q, int filtered, int use_rms, int subtract)
{
    sf_thresh_params_default(q);
    q->nsigma = 2.5;
    q->flood = 1.0;
    q->subtract = subtract;
    q->rms_global = !use_rms;
    q->filtered = filtered;
    q->level_scale = filtered ? 1.7 : 1;
    q->noise_scale = filtered ? 1.3 : 1;
}

/* A stand-in for a filtered image (f, allocated like im): 1.7 v - 0.3, NaN
 * at some finite pixels. */
static void filtered_standin(const sf_image *im, sf_image *f)
{
    for (int y = 0; y < im->ny; y++)
        for (int x = 0; x < im->nx; x++) {
            float v = im->data[(size_t)y * im->stride + x];
            f->data[(size_t)y * f->stride + x] = (x * 7 + y * 3) % 97 == 0 ? NAN : 1.7f * v - 0.3f;
        }
}

/* The CPU runner's way, for method=bane or mesh (p): the maps left unmade
 * (sf_background_view_cpu), the view's stats, every pixel read from it
 * (sf_bkg_view_at), the maps made from it (sf_bkg_view_rows) and the
 * threshold stage's pass over it (sf_threshold_view_cpu, the maps written
 * or dropped), on the image and on a filtered stand-in (NaN of its own),
 * level subtracted or not, the rms map or one sigma, against
 * sf_background_cpu's maps and sf_threshold_cpu on them: byte for byte,
 * whatever was in the buffers before. For method=bane also the grid itself
 * (sf_background_bane_grid_cpu, sf_bane_maps_cpu, sf_bane_grid_at). Returns
 * the mask pixels set by the first threshold. */
static size_t cpu_grid_vs_eager(const sf_image *im, const sf_bkg_params *p, const char *what)
{
    const int nx = im->nx, ny = im->ny;
    const size_t n = sf_npix(nx, ny);
    sf_image cb, cr, gb, gr, f;
    sf_mask cm = {0}, gm = {0};
    sf_bkg_stats cs, gs, vs;
    sf_bkg_view *view = NULL;
    size_t set0 = 0, bad = 0;
    sftest_maps_alloc(&cb, &cr, nx, ny);
    sftest_maps_alloc(&gb, &gr, nx, ny);
    sf_status sc = sf_background_cpu(im, p, &cs, &cb, &cr);
    sf_status sv = sf_background_view_cpu(im, p, &vs, &view);
    ck_assert_msg(sc == sv, "%s: view status %d, eager %d (%s)", what, sv, sc, sf_errdetail());
    if (p->method == SF_BKG_BANE) {
        sf_bane_grid grid;
        sf_status sg = sf_background_bane_grid_cpu(im, p, &gs, &grid);
        ck_assert_msg(sc == sg, "%s: grid status %d, eager %d (%s)", what, sg, sc, sf_errdetail());
        if (sg == SF_OK) {
            ck_assert_msg(memcmp(&gs, &cs, sizeof gs) == 0, "%s: the grid's stats differ", what);
            ck_assert_int_eq(grid.nan, cs.nvalid < (long long)n);
            memset(gb.data, 0x5a, n * sizeof(float));
            memset(gr.data, 0xa5, n * sizeof(float));
            ck_assert_int_eq(sf_bane_maps_cpu(im, &grid, &gb, &gr, 0, NULL, NULL), SF_OK);
            ck_assert_msg(memcmp(gb.data, cb.data, n * sizeof(float)) == 0 &&
                              memcmp(gr.data, cr.data, n * sizeof(float)) == 0,
                          "%s: sf_bane_maps_cpu's maps differ from sf_background_cpu's", what);
            for (int y = 0; y < ny; y++) /* NaN where the image is: the caller's rule */
                for (int x = 0; x < nx; x++) {
                    const size_t i = (size_t)y * nx + x;
                    const int nan = isnan(im->data[(size_t)y * im->stride + x]);
                    const float b = nan ? NAN : sf_bane_grid_at(&grid, grid.level, x, y),
                                r = nan ? NAN : sf_bane_grid_at(&grid, grid.rms, x, y);
                    bad += memcmp(&b, &cb.data[i], sizeof b) != 0 || memcmp(&r, &cr.data[i], sizeof r) != 0;
                }
            ck_assert_msg(bad == 0, "%s: sf_bane_grid_at differs from the maps at %zu of %zu pixels",
                          what, bad, n);
            sf_bane_grid_free_cpu(&grid);
            ck_assert_ptr_null(grid.level);
        }
    }
    if (sc != SF_OK) {
        ck_assert_ptr_null(view);
        free3(&cb, &cr, &gb);
        sf_image_free(&gr, NULL);
        return 0;
    }
    ck_assert_msg(memcmp(&vs, &cs, sizeof vs) == 0, "%s: the view's stats differ", what);
    for (int y = 0; y < ny; y++) /* every pixel read from the view, as the later stages do */
        for (int x = 0; x < nx; x++) {
            const size_t i = (size_t)y * nx + x;
            const float b = sf_bkg_view_at(view, 0, x, y), r = sf_bkg_view_at(view, 1, x, y);
            bad += memcmp(&b, &cb.data[i], sizeof b) != 0 || memcmp(&r, &cr.data[i], sizeof r) != 0;
        }
    ck_assert_msg(bad == 0, "%s: sf_bkg_view_at differs from the maps at %zu of %zu pixels", what,
                  bad, n);
    memset(gb.data, 0x5a, n * sizeof(float));
    memset(gr.data, 0xa5, n * sizeof(float));
    ck_assert_int_eq(sf_bkg_view_rows(view, &gb, &gr, 0, NULL, NULL), SF_OK);
    ck_assert_msg(memcmp(gb.data, cb.data, n * sizeof(float)) == 0 &&
                      memcmp(gr.data, cr.data, n * sizeof(float)) == 0,
                  "%s: sf_bkg_view_rows's maps differ from sf_background_cpu's", what);
    ck_assert_int_eq(sf_image_alloc(&f, nx, ny, SF_HOST, NULL), SF_OK);
    filtered_standin(im, &f);
    ck_assert_int_eq(sf_mask_alloc(&cm, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_mask_alloc(&gm, nx, ny, SF_HOST, NULL), SF_OK);
    for (int k = 0; k < 4; k++) {
        const int filtered = k >= 2, use_rms = k != 1, subtract = k != 3;
        sf_thresh_params q;
        size_t set = 0;
        thr_case(&q, filtered, use_rms, subtract);
        memset(gb.data, 0x5a, n * sizeof(float));
        memset(gr.data, 0xa5, n * sizeof(float));
        memset(gm.data, 0x77, n);
        ck_assert_int_eq(sf_threshold_view_cpu(filtered ? &f : im, view, &q, &vs, &gb, &gr, use_rms, &gm),
                         SF_OK);
        ck_assert_int_eq(sf_threshold_cpu(filtered ? &f : im, &q, &cs, &cb, use_rms ? &cr : NULL, &cm),
                         SF_OK);
        ck_assert_msg(memcmp(gb.data, cb.data, n * sizeof(float)) == 0 &&
                          memcmp(gr.data, cr.data, n * sizeof(float)) == 0,
                      "%s (threshold %d): the pass's maps differ", what, k);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            set += cm.data[i] != 0;
            bad += gm.data[i] != cm.data[i];
        }
        ck_assert_msg(bad == 0, "%s (threshold %d): %zu of %zu mask pixels differ", what, k, bad, n);
        /* the pass that drops the maps' rows (the runner's): the same mask */
        memset(gm.data, 0x77, n);
        ck_assert_int_eq(sf_threshold_view_cpu(filtered ? &f : im, view, &q, &vs, NULL, NULL, use_rms, &gm),
                         SF_OK);
        ck_assert_msg(memcmp(gm.data, cm.data, n) == 0,
                      "%s (threshold %d, maps not kept): the mask differs", what, k);
        if (k == 0)
            set0 = set;
    }
    sf_bkg_view_free(view);
    free3(&cb, &cr, &gb);
    sf_image_free(&gr, NULL);
    sf_image_free(&f, NULL);
    sf_mask_free(&cm, NULL);
    sf_mask_free(&gm, NULL);
    return set0;
}

START_TEST(test_grid_cpu)
{
    /* method=bane (step, box; seeds 10 k + i) and method=mesh (box, interp;
     * seeds 70 + 10 k + i): boxes of 1 mesh to several, one row or column
     * of meshes, bicubic and bilinear */
    static const struct {
        int mesh, a, b, seed0;
    } cases[] = {{0, 16, 96, 0},  {0, 5, 31, 0},   {0, 3, 1, 0},
                 {0, 30, 180, 0}, {0, 12, 96, 0},  {1, 64, SF_BKG_INTERP_BICUBIC, 70},
                 {1, 17, SF_BKG_INTERP_BILINEAR, 70}, {1, 300, SF_BKG_INTERP_BICUBIC, 70}};
    size_t set = 0;
    int runs = 0;
#ifdef _OPENMP
    const int nt0 = omp_get_max_threads();
#endif
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const int i = cases[c].mesh ? c - 5 : c; /* the case's place among its method's */
        for (int k = 0; sftest_sizes[k][0]; k++) {
            if (sf_npix(sftest_sizes[k][0], sftest_sizes[k][1]) > 600 * 600)
                continue;
            for (int nan = 0; nan < 2; nan++) {
                sf_image im;
                sf_bkg_params p = bane_params(cases[c].a, cases[c].b);
                char what[96];
                if (cases[c].mesh) {
                    sf_bkg_params_default(&p);
                    p.method = SF_BKG_MESH;
                    p.box = cases[c].a;
                    p.interp = cases[c].b;
                }
                sftest_noise_image(&im, sftest_sizes[k][0], sftest_sizes[k][1],
                                   cases[c].seed0 + 10 * k + i, k, nan * 0.2);
#ifdef _OPENMP
                omp_set_num_threads(1 + (i + nan) % 3);
#endif
                snprintf(what, sizeof what, "cpu %s: %dx%d %d %d nan=%d",
                         cases[c].mesh ? "view: mesh box, interp" : "grid: step, box", im.nx,
                         im.ny, cases[c].a, cases[c].b, nan);
                set += cpu_grid_vs_eager(&im, &p, what);
                runs++;
                sf_image_free(&im, NULL);
            }
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(nt0);
#endif
    ck_assert_int_gt(runs, 40);
    ck_assert_msg(set > 0, "no threshold set a pixel: the comparison saw empty masks only");
    {
        sf_image im;
        sf_bkg_params p = bane_params(10, 60);
        sftest_noise_image(&im, 200, 150, 3, 4, 0.0);
        for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
            im.data[i] = NAN;
        ck_assert_int_eq(cpu_grid_vs_eager(&im, &p, "cpu grid: all-nan"), 0);
        sf_image_free(&im, NULL);
    }
}
END_TEST

/* The stages after the threshold reading the maps' pixels from a view (the
 * CPU runner's way, method=bane or mesh) against the same stages given the
 * maps: deblend
 * (with the rms map and with one sigma), measure and fit, on a sky of
 * sources and noise with and without NaN, outputs byte for byte. */
static void readers_grid_vs_maps(const sf_image *im, const sf_bkg_params *p, int *nsrc, int *ncomp)
{
    const int nx = im->nx, ny = im->ny;
    sf_image cb, cr;
    sf_bkg_stats cs, gs;
    sf_bkg_view *view;
    sf_mask m;
    sf_labels l0, la, lb;
    sf_thresh_params q;
    sf_seg_params sp;
    int nl = 0;
    sftest_maps_alloc(&cb, &cr, nx, ny);
    ck_assert_int_eq(sf_background_cpu(im, p, &cs, &cb, &cr), SF_OK);
    ck_assert_int_eq(sf_background_view_cpu(im, p, &gs, &view), SF_OK);
    sf_thresh_params_default(&q);
    q.nsigma = 5;
    q.flood = 3;
    ck_assert_int_eq(sf_mask_alloc(&m, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_threshold_cpu(im, &q, &cs, &cb, &cr, &m), SF_OK);
    sf_seg_params_default(&sp);
    sp.connectivity = 8;
    sp.min_area = 3;
    ck_assert_int_eq(sf_labels_alloc(&l0, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_segment_cpu(&m, &sp, &l0, &nl), SF_OK);
    ck_assert_int_gt(nl, 3);
    for (int rms_map = 0; rms_map < 2; rms_map++) {
        sf_deblend_params dp;
        sf_deblend_in a, b;
        int na = 0, nb = 0, *pa = NULL, *pb = NULL, *ca = NULL, *cbh = NULL;
        sf_deblend_params_default(&dp);
        dp.connectivity = 8;
        dp.minarea = 3;
        memset(&a, 0, sizeof a);
        a.level_scale = a.noise_scale = 1;
        a.subtract = 1;
        a.level = (float)cs.median;
        a.sigma = (float)cs.sigma;
        a.t0 = 3;
        b = a;
        a.bkg = &cb;
        a.rms = rms_map ? &cr : NULL;
        b.view = view;
        b.view_rms = rms_map;
        ck_assert_int_eq(sf_labels_alloc(&la, nx, ny, SF_HOST, NULL), SF_OK);
        ck_assert_int_eq(sf_labels_alloc(&lb, nx, ny, SF_HOST, NULL), SF_OK);
        memcpy(la.data, l0.data, sf_npix(nx, ny) * sizeof *la.data);
        memcpy(lb.data, l0.data, sf_npix(nx, ny) * sizeof *lb.data);
        ck_assert_int_eq(sf_deblend_cpu(im, &a, &dp, &la, nl, &na, &pa, &ca), SF_OK);
        ck_assert_int_eq(sf_deblend_cpu(im, &b, &dp, &lb, nl, &nb, &pb, &cbh), SF_OK);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(memcmp(la.data, lb.data, sf_npix(nx, ny) * sizeof *la.data) == 0 &&
                          memcmp(pa, pb, (size_t)(na + 1) * sizeof *pa) == 0,
                      "deblend by the view (rms map %d): other objects", rms_map);
        if (rms_map) { /* measure and fit on the deblended labels */
            sf_measure_aux ma = {&cs, &cb, &cr, &m, 1, NULL}, mb = {&cs, NULL, NULL, &m, 1, view};
            sf_measure_params mp;
            sf_source *sa = calloc((size_t)na + 1, sizeof *sa), *sb = calloc((size_t)na + 1, sizeof *sb);
            sf_fit_params fp;
            sf_fit_in fa, fb;
            sf_component *qa = NULL, *qb = NULL;
            int ka = 0, kb = 0;
            sf_measure_params_default(&mp);
            ck_assert_int_eq(sf_measure_cpu(im, &la, na, &ma, &mp, sa), SF_OK);
            ck_assert_int_eq(sf_measure_cpu(im, &la, na, &mb, &mp, sb), SF_OK);
            ck_assert_msg(memcmp(sa, sb, (size_t)na * sizeof *sa) == 0,
                          "measure by the view: other sources");
            sf_fit_params_default(&fp);
            memset(&fa, 0, sizeof fa);
            fa.mask = &m;
            fa.level = (float)cs.median;
            fa.sigma = (float)cs.sigma;
            fa.subtract = 1;
            fa.sources = sa;
            fa.nobj = na;
            fa.parent = pa;
            fa.nislands = nl;
            fa.beam_maj = fa.beam_min = 4;
            fb = fa;
            fa.bkg = &cb;
            fa.rms = &cr;
            fb.view = view;
            ck_assert_int_eq(sf_fit_cpu(im, &la, &fa, &fp, &qa, &ka), SF_OK);
            ck_assert_int_eq(sf_fit_cpu(im, &la, &fb, &fp, &qb, &kb), SF_OK);
            ck_assert_int_eq(ka, kb);
            ck_assert_msg(ka == 0 || memcmp(qa, qb, (size_t)ka * sizeof *qa) == 0,
                          "fit by the view: other components");
            *nsrc += na;
            *ncomp += ka;
            free(sa);
            free(sb);
            free(qa);
            free(qb);
        }
        free(pa);
        free(pb);
        free(ca);
        free(cbh);
        sf_labels_free(&la, NULL);
        sf_labels_free(&lb, NULL);
    }
    sf_bkg_view_free(view);
    sf_labels_free(&l0, NULL);
    sf_mask_free(&m, NULL);
    sf_image_free(&cb, NULL);
    sf_image_free(&cr, NULL);
}

START_TEST(test_grid_readers)
{
    int nsrc = 0, ncomp = 0;
    for (int nan = 0; nan < 2; nan++)
        for (int mesh = 0; mesh < 2; mesh++) {
            sf_image im;
            sf_bkg_params p = bane_params(16, 96);
            if (mesh) {
                p.method = SF_BKG_MESH;
                p.box = 48;
            }
            sftest_noise_image(&im, 400 + 37 * nan, 300, 7 + nan, 40, nan * 0.1);
            readers_grid_vs_maps(&im, &p, &nsrc, &ncomp);
            sf_image_free(&im, NULL);
        }
    ck_assert_int_gt(nsrc, 40);
    ck_assert_int_gt(ncomp, 40);
}
END_TEST

/* The GPU runner's way (the maps left as node grids): the grid's stats and
 * the maps made from it (sf_bane_maps_gpu), and the threshold stage's pass
 * that makes the maps and the mask together (sf_threshold_bane_gpu), on the
 * image and on a stand-in for a filtered image (scaled, with NaN of its
 * own), with the level subtracted or not and the rms map or the one sigma,
 * against the CPU twin's maps and sf_threshold_cpu, bit for bit. */
static void gpu_grid_vs_cpu(sf_gpu *g, const sf_image *im, const sf_image *d, const sf_bkg_params *p,
                            sf_status sc, const sf_bkg_stats *cs, const sf_image *cb,
                            const sf_image *cr, const char *what)
{
    int nx = im->nx, ny = im->ny;
    size_t n = sf_npix(nx, ny);
    sf_bane_grid grid;
    sf_bkg_stats gs;
    sf_image db = {0}, dr = {0}, hb, hr, f, df = {0};
    sf_mask dm = {0}, hm = {0}, cm = {0};
    sf_status sg = sf_background_bane_grid_gpu(g, d, p, &gs, &grid);
    ck_assert_msg(sc == sg, "%s (grid): gpu status %d, cpu %d (%s)", what, sg, sc, sf_errdetail());
    if (sc != SF_OK)
        return;
    ck_assert_msg(gs.median == cs->median && gs.sigma == cs->sigma && gs.mean == cs->mean &&
                      gs.nvalid == cs->nvalid && gs.niter == cs->niter,
                  "%s (grid): stats differ", what);
    ck_assert_int_eq(grid.nan, cs->nvalid < (long long)n);
    sftest_maps_alloc(&hb, &hr, nx, ny);
    ck_assert_int_eq(sf_image_alloc(&db, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&dr, nx, ny, SF_DEVICE, g), SF_OK);
    sftest_poison(g, db.data, n * sizeof(float));
    sftest_poison(g, dr.data, n * sizeof(float));
    ck_assert_int_eq(sf_bane_maps_gpu(g, d, &grid, &db, &dr), SF_OK);
    ck_assert_int_eq(sf_image_download(g, &db, &hb), SF_OK);
    ck_assert_int_eq(sf_image_download(g, &dr, &hr), SF_OK);
    size_t bad = maps_differ(&hb, &hr, cb, cr, what, "sf_bane_maps_gpu");
    ck_assert_msg(bad == 0, "%s (sf_bane_maps_gpu): %zu of %zu pixels differ", what, bad, n);
    /* the filtered stand-in: 1.7 v - 0.3, NaN at some finite pixels */
    ck_assert_int_eq(sf_image_alloc(&f, nx, ny, SF_HOST, NULL), SF_OK);
    filtered_standin(im, &f);
    ck_assert_int_eq(sf_image_alloc(&df, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, &f, &df), SF_OK);
    ck_assert_int_eq(sf_mask_alloc(&dm, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_mask_alloc(&hm, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_mask_alloc(&cm, nx, ny, SF_HOST, NULL), SF_OK);
    for (int k = 0; k < 4; k++) {
        const int filtered = k >= 2, use_rms = k != 1, subtract = k != 3;
        sf_thresh_params q;
        char how[64];
        thr_case(&q, filtered, use_rms, subtract);
        snprintf(how, sizeof how, "threshold: %s, rms %s, subtract %d", filtered ? "filtered" : "image",
                 use_rms ? "map" : "global", subtract);
        sftest_poison(g, db.data, n * sizeof(float));
        sftest_poison(g, dr.data, n * sizeof(float));
        sftest_poison(g, dm.data, n);
        ck_assert_int_eq(sf_threshold_bane_gpu(g, filtered ? &df : d, d, &grid, &q, &gs, &db, &dr,
                                               use_rms, &dm),
                         SF_OK);
        ck_assert_int_eq(sf_threshold_cpu(filtered ? &f : im, &q, cs, cb, use_rms ? cr : NULL, &cm),
                         SF_OK);
        ck_assert_int_eq(sf_image_download(g, &db, &hb), SF_OK);
        ck_assert_int_eq(sf_image_download(g, &dr, &hr), SF_OK);
        ck_assert_int_eq(sf_mask_download(g, &dm, &hm), SF_OK);
        bad = maps_differ(&hb, &hr, cb, cr, what, how);
        ck_assert_msg(bad == 0, "%s (%s): %zu of %zu map pixels differ", what, how, bad, n);
        size_t set = 0;
        for (size_t i = 0; i < n; i++) {
            set += cm.data[i] != 0;
            if (hm.data[i] != cm.data[i] && bad++ < 5)
                fprintf(stderr, "%s (%s): mask (%zu,%zu): gpu %d cpu %d\n", what, how, i % nx,
                        i / nx, hm.data[i], cm.data[i]);
        }
        ck_assert_msg(bad == 0, "%s (%s): %zu of %zu mask pixels differ", what, how, bad, n);
        ck_assert_msg(set < n, "%s (%s): every pixel set", what, how);
    }
    sf_image_free(&f, NULL);
    sf_image_free(&df, g);
    sf_image_free(&db, g);
    sf_image_free(&dr, g);
    sf_image_free(&hb, NULL);
    sf_image_free(&hr, NULL);
    sf_mask_free(&dm, g);
    sf_mask_free(&hm, NULL);
    sf_mask_free(&cm, NULL);
}

static void gpu_vs_cpu(const sf_image *im, const sf_bkg_params *p, const char *what)
{
    sf_gpu *g = sftest_gpu();
    int nx = im->nx, ny = im->ny;
    size_t n = sf_npix(nx, ny), bad = 0;
    sf_image d = {0}, db = {0}, dr = {0}, cb, cr, hb, hr;
    sf_bkg_stats cs, gs;
    sf_status sc, sg;
    if (!sftest_part_mine()) /* another process's share (SKYFIND_TEST_PART) */
        return;
    sftest_maps_alloc(&cb, &cr, nx, ny);
    sftest_maps_alloc(&hb, &hr, nx, ny);
    ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&db, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&dr, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, im, &d), SF_OK);
    sftest_poison(g, db.data, n * sizeof(float));
    sftest_poison(g, dr.data, n * sizeof(float));
    sc = sf_background_cpu(im, p, &cs, &cb, &cr);
    sg = sf_background_gpu(g, &d, p, &gs, &db, &dr);
    ck_assert_msg(sc == sg, "%s: gpu status %d, cpu %d (%s)", what, sg, sc, sf_errdetail());
    if (sc == SF_OK) {
        ck_assert_int_eq(sf_image_download(g, &db, &hb), SF_OK);
        ck_assert_int_eq(sf_image_download(g, &dr, &hr), SF_OK);
        bad = maps_differ(&hb, &hr, &cb, &cr, what, "sf_background_gpu");
        ck_assert_msg(bad == 0, "%s: %zu of %zu pixels differ", what, bad, n);
        ck_assert_msg(gs.median == cs.median && gs.sigma == cs.sigma && gs.mean == cs.mean &&
                          gs.nvalid == cs.nvalid && gs.niter == cs.niter,
                      "%s: stats gpu %.9g %.9g %.9g %lld %d cpu %.9g %.9g %.9g %lld %d", what,
                      gs.median, gs.sigma, gs.mean, gs.nvalid, gs.niter, cs.median, cs.sigma,
                      cs.mean, cs.nvalid, cs.niter);
    }
    gpu_grid_vs_cpu(g, im, &d, p, sc, &cs, &cb, &cr, what);
    sf_image_free(&d, g);
    sf_image_free(&db, g);
    sf_image_free(&dr, g);
    sf_image_free(&cb, NULL);
    sf_image_free(&cr, NULL);
    sf_image_free(&hb, NULL);
    sf_image_free(&hr, NULL);
}

START_TEST(test_gpu_random)
{
    /* cell path with a staged box, pixel path, box 1, pixel path unstaged,
     * cell path unstaged (180^2 pixels); the cell path with nodes of 10 x 10
     * cells (more than the GPU's warp-per-node kernel takes: its block
     * kernel) and with cells of 33^2 pixels (more than its warp sort takes);
     * nodes of 8 x 8 cells (the GPU's warp a node) and of 4 x 4 (its half
     * warp a node, with rounds of cells left empty; 6 x 6 above) */
    static const int steps[][2] = {{16, 96}, {5, 31}, {3, 1},  {40, 500}, {30, 180},
                                   {4, 40},  {33, 198}, {12, 96}, {8, 32}};
    const int nsteps = (int)(sizeof steps / sizeof steps[0]);
    for (int k = 0; sftest_sizes[k][0]; k++) {
        if (sftest_quick() && sf_npix(sftest_sizes[k][0], sftest_sizes[k][1]) > 300 * 300)
            continue;
        for (int nan = 0; nan < 2; nan++)
            for (int s = 0; s < nsteps; s++) {
                sf_image im;
                sf_bkg_params p = bane_params(steps[s][0], steps[s][1]);
                char what[96];
                p.kappa = s == 1 ? 2.5 : 3.0;
                sftest_noise_image(&im, sftest_sizes[k][0], sftest_sizes[k][1], 10 * k + s, k,
                                   nan * 0.2);
                snprintf(what, sizeof what, "%dx%d step %d box %d nan=%d", im.nx, im.ny, p.step,
                         p.box, nan);
                gpu_vs_cpu(&im, &p, what);
                sf_image_free(&im, NULL);
            }
    }
}
END_TEST

START_TEST(test_gpu_special)
{
    int n = sftest_quick() ? 200 : 1100;
    sf_image im;
    sf_bkg_params p = bane_params(15, 90);
    sftest_rng r = {5};
    sftest_noise_image(&im, n, n - 37, 21, 50, 0.3); /* NaN blocks, an optical level */
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = 3700.0f + 20.0f * im.data[i];
    gpu_vs_cpu(&im, &p, "NaN blocks + offset");
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) /* integer ties: even-count medians */
        im.data[i] = (float)(int)(20 * sftest_uniform(&r)) - 7;
    gpu_vs_cpu(&im, &p, "ties");
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) /* constant: rms 0 */
        im.data[i] = -1.25f;
    gpu_vs_cpu(&im, &p, "constant");
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) /* near the float limit */
        im.data[i] = (float)(3e38 * (sftest_uniform(&r) - 0.5));
    gpu_vs_cpu(&im, &p, "float limit");
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++) /* tiny values */
        im.data[i] = (float)(1e-30 * sftest_normal(&r));
    gpu_vs_cpu(&im, &p, "1e-30");
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = NAN;
    gpu_vs_cpu(&im, &p, "all-nan");
    im.data[7] = 2.0f;
    p = bane_params(10, 1);
    gpu_vs_cpu(&im, &p, "no box reaches the finite pixel");
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_gpu_real)
{
    static const char *files[] = {
        "radio_parkes_1904-66_SIN.fits", "optical_eso_ntt_emmi_256x256_int16_bscale.fits",
        "radio_vla_nvas_W51_22GHz_114x124x1x1.fits", "radio_parkes_1904-66_SIN_galactic.fits",
        "quirk_2mass_20x21_int16_bscale.fits", "radio_atca_scorpio_s17_1000x1000.fits",
        "radio_amila_GRB120422A_512x512x1x1.fits", "sim_aegean_synthetic_512x256.fits", NULL};
    if (!sftest_have_data()) {
        printf("SKIP: no test data (SKYFIND_TEST_DATA)\n");
        return;
    }
    for (int i = 0; files[i] && (!sftest_quick() || i < 3); i++) {
        sf_image im = {0};
        sf_fits_info info;
        sf_bkg_params p = bane_params(14, 84); /* Parkes's step=auto */
        ck_assert_msg(sf_fits_read(sftest_data(files[i]), -1, NULL, &im, &info) == SF_OK, "%s: %s",
                      files[i], sf_errdetail());
        gpu_vs_cpu(&im, &p, files[i]);
        p = bane_params(16, 96); /* step=auto without a beam */
        gpu_vs_cpu(&im, &p, files[i]);
        p = bane_params(30, 180); /* AMI-LA's step=auto: cells, the box not staged */
        gpu_vs_cpu(&im, &p, files[i]);
        sf_image_free(&im, NULL);
        sf_fits_info_free(&info);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("background_bane");
    TCase *cpu = tcase_create("cpu"), *gpu = tcase_create("gpu");
    tcase_set_timeout(cpu, 300);
    tcase_set_timeout(gpu, 600);
    tcase_add_test(cpu, test_records);
    tcase_add_test(cpu, test_float_bounds);
    tcase_add_test(cpu, test_noise);
    tcase_add_test(cpu, test_plane);
    tcase_add_test(cpu, test_nan);
    tcase_add_test(cpu, test_params);
    tcase_add_test(cpu, test_threads);
    tcase_add_test(cpu, test_cell_medians);
    tcase_add_test(cpu, test_cell_medians_noise);
    tcase_add_test(cpu, test_grid_cpu);
    tcase_add_test(cpu, test_grid_readers);
    suite_add_tcase(s, cpu);
    tcase_add_test(gpu, test_gpu_random);
    tcase_add_test(gpu, test_gpu_special);
    tcase_add_test(gpu, test_gpu_real);
    TCase *gc[] = {gpu};
    return sftest_main(s, gc, 1);
}
