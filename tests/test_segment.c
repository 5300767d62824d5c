/* Check suite of the `segment` stage: the CPU twin against an independent
 * BFS flood-fill reference, and the GPU version against the CPU twin (label
 * maps and counts must be identical, and the labelled pixels the GPU counts
 * for the deblend stage), on random, adversarial and real masks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "sftest.h"
#include "skyfind/fits.h"
#include "skyfind/segment.h"

static const double densities[] = {0.0, 0.1, 0.5, 0.59, 0.9, 1.0};
static const int min_areas[] = {1, 3, 10};
#define NDENS (int)(sizeof densities / sizeof densities[0])
#define NMIN (int)(sizeof min_areas / sizeof min_areas[0])

/* ---- reference: BFS flood fill in raster order, then min_area + renumber */

static int ref_label(const uint8_t *m, int nx, int ny, int conn, int min_area, int32_t *out)
{
    size_t npix = sf_npix(nx, ny);
    int32_t *queue = malloc(npix * sizeof *queue);
    int32_t *area = malloc((npix + 1) * sizeof *area);
    int32_t *renum = malloc((npix + 1) * sizeof *renum);
    int nraw = 0, n = 0;
    ck_assert(queue && area && renum);
    memset(out, 0, npix * sizeof *out);
    for (size_t s = 0; s < npix; s++) {
        size_t head = 0, tail = 0;
        if (!m[s] || out[s])
            continue;
        out[s] = ++nraw;
        area[nraw] = 0;
        queue[tail++] = (int32_t)s;
        while (head < tail) {
            int32_t q = queue[head++];
            int qx = q % nx, qy = q / nx;
            area[nraw]++;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int x = qx + dx, y = qy + dy;
                    if ((dx == 0 && dy == 0) || (conn == 4 && dx != 0 && dy != 0))
                        continue;
                    if (x < 0 || y < 0 || x >= nx || y >= ny)
                        continue;
                    size_t j = (size_t)y * nx + x;
                    if (m[j] && !out[j]) {
                        out[j] = nraw;
                        queue[tail++] = (int32_t)j;
                    }
                }
        }
    }
    for (int k = 1; k <= nraw; k++)
        renum[k] = area[k] >= min_area ? ++n : 0;
    for (size_t i = 0; i < npix; i++)
        out[i] = out[i] ? renum[out[i]] : 0;
    free(queue);
    free(area);
    free(renum);
    return n;
}

/* ---- comparison reports ---------------------------------------------------- */

static int compare_labels(const int32_t *want, int nwant, const int32_t *got, int ngot,
                          int nx, int ny, const char *what)
{
    size_t npix = sf_npix(nx, ny), bad = 0;
    for (size_t i = 0; i < npix; i++) {
        if (want[i] == got[i])
            continue;
        if (bad < 8)
            printf("  %s: pixel (x=%zu, y=%zu): expected %d, got %d\n", what, i % nx,
                   i / nx, want[i], got[i]);
        bad++;
    }
    if (bad || nwant != ngot)
        printf("FAIL %s: %zu of %zu pixels differ; N expected %d, got %d\n", what, bad, npix,
               nwant, ngot);
    return bad == 0 && nwant == ngot;
}

/* CPU twin against the reference; returns N. */
static int check_cpu(const sf_mask *m, int conn, int min_area, const char *what)
{
    sf_labels lab = {0};
    sf_seg_params p = {conn, min_area};
    int n = -1, nref;
    int32_t *ref = malloc(sf_npix(m->nx, m->ny) * sizeof *ref);
    char buf[256];
    ck_assert_ptr_nonnull(ref);
    ck_assert_int_eq(sf_labels_alloc(&lab, m->nx, m->ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_segment_cpu(m, &p, &lab, &n), SF_OK);
    nref = ref_label(m->data, m->nx, m->ny, conn, min_area, ref);
    snprintf(buf, sizeof buf, "cpu %s %dx%d conn %d min_area %d", what, m->nx, m->ny, conn,
             min_area);
    int ok = compare_labels(ref, nref, lab.data, n, m->nx, m->ny, buf);
    free(ref);
    sf_labels_free(&lab, NULL);
    ck_assert_msg(ok, "%s: CPU labels differ from the reference", buf);
    return n;
}

static void check_cpu_all(const sf_mask *m, const char *what)
{
    for (int c = 4; c <= 8; c += 4)
        for (int k = 0; k < NMIN; k++)
            check_cpu(m, c, min_areas[k], what);
}

/* ---- masks ----------------------------------------------------------------- */

static void checker_mask(sf_mask *m, int nx, int ny)
{
    ck_assert_int_eq(sf_mask_alloc(m, nx, ny, SF_HOST, NULL), SF_OK);
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++)
            m->data[(size_t)y * nx + x] = (x + y) % 2 == 0;
}

/* Rows 0, 2, 4, ... full, joined alternately at the right and the left end:
 * one snake of 4-connected pixels. */
static void serpentine_mask(sf_mask *m, int nx, int ny)
{
    ck_assert_int_eq(sf_mask_alloc(m, nx, ny, SF_HOST, NULL), SF_OK);
    memset(m->data, 0, sf_npix(nx, ny));
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++) {
            int on = y % 2 == 0 || (y % 4 == 1 ? x == nx - 1 : x == 0);
            m->data[(size_t)y * nx + x] = (uint8_t)on;
        }
}

/* A square spiral of width 1 with gaps of 1, walking inwards. */
static void spiral_mask(sf_mask *m, int n)
{
    int x0 = 0, y0 = 0, x1 = n - 1, y1 = n - 1;
    ck_assert_int_eq(sf_mask_alloc(m, n, n, SF_HOST, NULL), SF_OK);
    memset(m->data, 0, sf_npix(n, n));
    while (x0 <= x1 && y0 <= y1) {
        for (int x = x0; x <= x1; x++)
            m->data[(size_t)y0 * n + x] = 1;
        for (int y = y0; y <= y1; y++)
            m->data[(size_t)y * n + x1] = 1;
        if (y1 > y0)
            for (int x = x0; x <= x1; x++)
                m->data[(size_t)y1 * n + x] = 1;
        if (y1 - 2 > y0 + 1)
            for (int y = y0 + 2; y <= y1; y++)
                m->data[(size_t)y * n + x0] = 1;
        x0 += 2;
        y0 += 2;
        x1 -= 2;
        y1 -= 2;
        if (x0 <= x1 && y0 <= y1)
            m->data[(size_t)y0 * n + x0 - 1] = 1; /* links the next turn inwards */
    }
}

/* Diagonal staircases: under 4-connectivity every pixel is its own island. */
static void diagonal_mask(sf_mask *m, int nx, int ny)
{
    ck_assert_int_eq(sf_mask_alloc(m, nx, ny, SF_HOST, NULL), SF_OK);
    memset(m->data, 0, sf_npix(nx, ny));
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++)
            m->data[(size_t)y * nx + x] = (x - y) % 7 == 0 || (x + y) % 11 == 0;
}

/* ---- CPU tests ------------------------------------------------------------- */

START_TEST(cpu_random)
{
    for (int s = 0; sftest_sizes[s][0]; s++)
        for (int d = 0; d < NDENS; d++) {
            sf_mask m = {0};
            char what[64];
            sftest_random_mask(&m, sftest_sizes[s][0], sftest_sizes[s][1], 1000 + 17 * s + d,
                               densities[d]);
            snprintf(what, sizeof what, "random p=%.2f", densities[d]);
            check_cpu_all(&m, what);
            sf_mask_free(&m, NULL);
        }
}
END_TEST

START_TEST(cpu_checkerboard)
{
    for (int s = 0; sftest_sizes[s][0]; s++) {
        int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
        sf_mask m = {0};
        size_t ones = (sf_npix(nx, ny) + 1) / 2;
        checker_mask(&m, nx, ny);
        check_cpu_all(&m, "checkerboard");
        ck_assert_int_eq(check_cpu(&m, 4, 1, "checkerboard"), (int)ones);
        if (nx > 1 && ny > 1)
            ck_assert_int_eq(check_cpu(&m, 8, 1, "checkerboard"), 1);
        sf_mask_free(&m, NULL);
    }
}
END_TEST

START_TEST(cpu_serpentine_spiral)
{
    sf_mask m = {0};
    serpentine_mask(&m, 101, 203);
    check_cpu_all(&m, "serpentine");
    ck_assert_int_eq(check_cpu(&m, 4, 1, "serpentine"), 1);
    sf_mask_free(&m, NULL);
    for (int n = 1; n <= 64; n += 9) {
        spiral_mask(&m, n);
        ck_assert_int_eq(check_cpu(&m, 4, 1, "spiral"), 1);
        check_cpu_all(&m, "spiral");
        sf_mask_free(&m, NULL);
    }
}
END_TEST

START_TEST(cpu_all_ones_and_single_pixel)
{
    sf_mask m = {0};
    sf_labels lab = {0};
    sf_seg_params p;
    int n = -1;
    sftest_random_mask(&m, 300, 200, 5, 1.0);
    check_cpu_all(&m, "all ones");
    ck_assert_int_eq(check_cpu(&m, 8, 60000, "all ones"), 1);
    ck_assert_int_eq(check_cpu(&m, 4, 60001, "all ones"), 0);
    sf_mask_free(&m, NULL);

    sf_seg_params_default(&p);
    ck_assert_int_eq(p.connectivity, 8);
    ck_assert_int_eq(p.min_area, 1);
    ck_assert_int_eq(sf_mask_alloc(&m, 1, 1, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 1, 1, SF_HOST, NULL), SF_OK);
    m.data[0] = 1;
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(lab.data[0], 1);
    p.min_area = 2;
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(lab.data[0], 0);
    m.data[0] = 0;
    p.min_area = 1;
    ck_assert_int_eq(sf_segment_cpu(&m, NULL, &lab, &n), SF_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(lab.data[0], 0);
    sf_labels_free(&lab, NULL);
    sf_mask_free(&m, NULL);
}
END_TEST

/* A hand-checked case (scipy.ndimage.label gives the same): diagonal links
 * join islands only under 8-connectivity, and numbering follows first pixels. */
START_TEST(cpu_diagonal_and_order)
{
    static const uint8_t pat[5 * 6] = {
        0, 0, 0, 1, 0, 1,
        1, 0, 1, 0, 0, 1,
        0, 1, 0, 0, 1, 1,
        0, 0, 0, 1, 0, 0,
        1, 1, 0, 0, 0, 1};
    static const int32_t want4[5 * 6] = {
        0, 0, 0, 1, 0, 2,
        3, 0, 4, 0, 0, 2,
        0, 5, 0, 0, 2, 2,
        0, 0, 0, 6, 0, 0,
        7, 7, 0, 0, 0, 8};
    static const int32_t want8[5 * 6] = {
        0, 0, 0, 1, 0, 2,
        1, 0, 1, 0, 0, 2,
        0, 1, 0, 0, 2, 2,
        0, 0, 0, 2, 0, 0,
        3, 3, 0, 0, 0, 4};
    sf_mask m = {0};
    sf_labels lab = {0};
    sf_seg_params p = {4, 1};
    int n = -1;
    ck_assert_int_eq(sf_mask_alloc(&m, 6, 5, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, 6, 5, SF_HOST, NULL), SF_OK);
    memcpy(m.data, pat, sizeof pat);
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_OK);
    ck_assert(compare_labels(want4, 8, lab.data, n, 6, 5, "hand case conn 4"));
    p.connectivity = 8;
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_OK);
    ck_assert(compare_labels(want8, 4, lab.data, n, 6, 5, "hand case conn 8"));
    p.min_area = 2; /* keeps islands 1, 2, 3 of want8, drops 4 */
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(lab.data[29], 0);
    ck_assert_int_eq(lab.data[24], 3);
    sf_labels_free(&lab, NULL);
    sf_mask_free(&m, NULL);

    for (int s = 0; sftest_sizes[s][0]; s++) {
        int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
        diagonal_mask(&m, nx, ny);
        check_cpu_all(&m, "diagonals");
        sf_mask_free(&m, NULL);
    }
}
END_TEST

START_TEST(cpu_bad_params)
{
    sf_mask m = {0};
    sf_labels lab = {0}, small = {0};
    sf_seg_params p = {6, 1};
    int n = 123;
    sftest_random_mask(&m, 8, 8, 1, 0.5);
    ck_assert_int_eq(sf_labels_alloc(&lab, 8, 8, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&small, 8, 7, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_ERR_PARAM);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "connectivity 6"));
    p.connectivity = 4;
    p.min_area = 0;
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_ERR_PARAM);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "min_area 0"));
    p.min_area = 1;
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &small, &n), SF_ERR_PARAM);
    m.loc = SF_DEVICE;
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_ERR_PARAM);
    m.loc = SF_HOST;
    ck_assert_int_eq(n, 123); /* untouched on failure */
    ck_assert_int_eq(sf_segment_cpu(&m, &p, &lab, &n), SF_OK);
    sf_labels_free(&small, NULL);
    sf_labels_free(&lab, NULL);
    sf_mask_free(&m, NULL);
}
END_TEST

/* A two-level mask: random pixels set to 2 (flood only), a fraction of
 * them promoted to 1 (seed). */
static void two_level_mask(sf_mask *m, int nx, int ny, uint64_t seed, double p, double pseed)
{
    sftest_rng r = {seed};
    sftest_random_mask(m, nx, ny, seed, p);
    for (size_t i = 0; i < sf_npix(nx, ny); i++)
        if (m->data[i])
            m->data[i] = sftest_uniform(&r) < pseed ? 1 : 2;
}

/* Two-level masks: an island is kept only when it holds a seed (1); the
 * labels equal the one-level labels of the union with seedless islands
 * removed and the rest renumbered in raster order. */
START_TEST(cpu_seed_and_flood)
{
    for (int s = 0; sftest_sizes[s][0]; s++)
        for (int conn = 4; conn <= 8; conn += 4) {
            int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1], n2 = -1, n1 = -1;
            size_t np = sf_npix(nx, ny);
            sf_mask m = {0}, one = {0};
            sf_labels l2 = {0}, l1 = {0};
            sf_seg_params p = {conn, 2};
            two_level_mask(&m, nx, ny, 900 + s, 0.45, 0.05);
            ck_assert_int_eq(sf_mask_alloc(&one, nx, ny, SF_HOST, NULL), SF_OK);
            for (size_t i = 0; i < np; i++)
                one.data[i] = m.data[i] != 0;
            ck_assert_int_eq(sf_labels_alloc(&l2, nx, ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_labels_alloc(&l1, nx, ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_segment_cpu(&m, &p, &l2, &n2), SF_OK);
            ck_assert_int_eq(sf_segment_cpu(&one, &p, &l1, &n1), SF_OK);
            /* keep[l] for one-level labels: has a seed; then the expected numbering */
            int32_t *map = calloc((size_t)n1 + 1, sizeof *map), k = 0;
            for (size_t i = 0; i < np; i++)
                if (m.data[i] == 1 && l1.data[i])
                    map[l1.data[i]] = 1;
            for (int l = 1; l <= n1; l++)
                map[l] = map[l] ? ++k : 0;
            ck_assert_int_eq(n2, k);
            for (size_t i = 0; i < np; i++)
                ck_assert_int_eq(l2.data[i], map[l1.data[i]]);
            if (np > 1000)
                ck_assert_msg(k < n1, "%dx%d: some islands should lack a seed", nx, ny);
            free(map);
            sf_mask_free(&m, NULL);
            sf_mask_free(&one, NULL);
            sf_labels_free(&l1, NULL);
            sf_labels_free(&l2, NULL);
        }
}
END_TEST

/* The CPU twin labels strips of rows in parallel and joins them: with any
 * number of threads (strips) the labels equal the reference's, on masks
 * whose islands cross many strip edges (a snake through every row, random
 * masks near and above the percolation threshold, two-level masks). */
START_TEST(cpu_threads)
{
#ifdef _OPENMP
    static const int threads[] = {1, 2, 3, 5, 8, 16};
    const int nx = 512, ny = 2048; /* up to 16 strips of 128 rows */
    int keep = omp_get_max_threads();
    sf_mask snake = {0}, rnd = {0}, two = {0};
    sf_labels ref = {0}, lab = {0};
    serpentine_mask(&snake, nx, ny);
    sftest_random_mask(&rnd, nx, ny, 77, 0.59);
    two_level_mask(&two, nx, ny, 78, 0.62, 0.02);
    ck_assert_int_eq(sf_labels_alloc(&ref, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&lab, nx, ny, SF_HOST, NULL), SF_OK);
    for (int t = 0; t < (int)(sizeof threads / sizeof threads[0]); t++) {
        char what[64];
        omp_set_num_threads(threads[t]);
        snprintf(what, sizeof what, "serpentine, %d threads", threads[t]);
        ck_assert_int_eq(check_cpu(&snake, 4, 1, what), 1);
        snprintf(what, sizeof what, "random p=0.59, %d threads", threads[t]);
        check_cpu_all(&rnd, what);
        /* the two-level mask against its one-thread labels */
        for (int conn = 4; conn <= 8; conn += 4) {
            sf_seg_params p = {conn, 3};
            int nref = -1, n = -1;
            omp_set_num_threads(1);
            ck_assert_int_eq(sf_segment_cpu(&two, &p, &ref, &nref), SF_OK);
            omp_set_num_threads(threads[t]);
            ck_assert_int_eq(sf_segment_cpu(&two, &p, &lab, &n), SF_OK);
            ck_assert_int_eq(n, nref);
            ck_assert_msg(memcmp(ref.data, lab.data, sf_npix(nx, ny) * sizeof *lab.data) == 0,
                          "two-level mask, conn %d, %d threads: labels differ", conn, threads[t]);
        }
    }
    omp_set_num_threads(keep);
    sf_mask_free(&snake, NULL);
    sf_mask_free(&rnd, NULL);
    sf_mask_free(&two, NULL);
    sf_labels_free(&ref, NULL);
    sf_labels_free(&lab, NULL);
#endif
}
END_TEST

/* ---- GPU against the CPU twin --------------------------------------------- */

static void check_gpu(const sf_mask *m, int conn, int min_area, const char *what)
{
    sf_gpu *g = sftest_gpu();
    sf_mask dm = {0};
    sf_labels dl = {0}, cl = {0}, gl = {0};
    sf_seg_params p = {conn, min_area};
    int nc = -1, ng = -1, nx = m->nx, ny = m->ny;
    char buf[256];
    snprintf(buf, sizeof buf, "gpu %s %dx%d conn %d min_area %d", what, nx, ny, conn, min_area);
    ck_assert_int_eq(sf_labels_alloc(&cl, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&gl, nx, ny, SF_HOST, NULL), SF_OK);
    ck_assert_int_eq(sf_mask_alloc(&dm, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_labels_alloc(&dl, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_segment_cpu(m, &p, &cl, &nc), SF_OK);
    ck_assert_int_eq(sf_mask_upload(g, m, &dm), SF_OK);
    sftest_poison(g, dl.data, sf_npix(nx, ny) * sizeof(int32_t));
    long long npix = -1, want = 0;
    sf_status st = sf_segment_gpu_counted(g, &dm, &p, &dl, &ng, &npix);
    ck_assert_msg(st == SF_OK, "%s: %s: %s", buf, sf_strerror(st), sf_errdetail());
    ck_assert_int_eq(sf_labels_download(g, &dl, &gl), SF_OK);
    int ok = compare_labels(cl.data, nc, gl.data, ng, nx, ny, buf);
    /* the labelled pixels, counted by the 8-connected (block) path only */
    for (size_t i = 0; conn == 8 && i < sf_npix(nx, ny); i++)
        want += cl.data[i] != 0;
    ck_assert_msg(npix == want, "%s: %lld labelled pixels counted, %lld labelled", buf, npix, want);
    sf_labels_free(&dl, g);
    sf_mask_free(&dm, g);
    sf_labels_free(&gl, NULL);
    sf_labels_free(&cl, NULL);
    ck_assert_msg(ok, "%s: GPU labels differ from the CPU's", buf);
}

static void check_gpu_all(const sf_mask *m, const char *what)
{
    for (int c = 4; c <= 8; c += 4)
        for (int k = 0; k < NMIN; k++)
            check_gpu(m, c, min_areas[k], what);
}

START_TEST(gpu_random)
{
    for (int s = 0; sftest_sizes[s][0]; s++)
        for (int d = 0; d < NDENS; d++)
            for (int seed = 0; seed < 2; seed++) {
                sf_mask m = {0};
                char what[64];
                sftest_random_mask(&m, sftest_sizes[s][0], sftest_sizes[s][1],
                                   7000 + 131 * s + 7 * d + seed, densities[d]);
                snprintf(what, sizeof what, "random p=%.2f seed %d", densities[d], seed);
                check_gpu_all(&m, what);
                sf_mask_free(&m, NULL);
            }
}
END_TEST

START_TEST(gpu_seed_and_flood)
{
    for (int s = 0; sftest_sizes[s][0]; s++)
        for (int d = 0; d < NDENS; d++) {
            sf_mask m = {0};
            two_level_mask(&m, sftest_sizes[s][0], sftest_sizes[s][1], 4400 + 17 * s + d,
                           densities[d], 0.05);
            check_gpu_all(&m, "two-level");
            sf_mask_free(&m, NULL);
        }
}
END_TEST

START_TEST(gpu_shapes)
{
    sf_mask m = {0};
    for (int s = 0; sftest_sizes[s][0]; s++) {
        int nx = sftest_sizes[s][0], ny = sftest_sizes[s][1];
        checker_mask(&m, nx, ny);
        check_gpu_all(&m, "checkerboard");
        sf_mask_free(&m, NULL);
        diagonal_mask(&m, nx, ny);
        check_gpu_all(&m, "diagonals");
        sf_mask_free(&m, NULL);
        serpentine_mask(&m, nx, ny);
        check_gpu_all(&m, "serpentine");
        sf_mask_free(&m, NULL);
    }
    for (int n = 1; n <= 300; n += 37) {
        spiral_mask(&m, n);
        check_gpu_all(&m, "spiral");
        sf_mask_free(&m, NULL);
    }
    sftest_random_mask(&m, 1, 1, 1, 1.0);
    check_gpu_all(&m, "single pixel");
    sf_mask_free(&m, NULL);
    sftest_random_mask(&m, 1, 100000, 1, 0.6); /* more rows than a grid's y limit */
    check_gpu_all(&m, "tall");
    sf_mask_free(&m, NULL);
}
END_TEST

START_TEST(gpu_large)
{
    static const int sizes[][2] = {{2048, 2048}, {2047, 2049}, {1999, 1500}};
    if (sftest_quick())
        return; /* under compute-sanitizer: the smaller cases only */
    for (int s = 0; s < 3; s++) {
        int nx = sizes[s][0], ny = sizes[s][1];
        sf_mask m = {0};
        for (int d = 0; d < NDENS; d++)
            for (int seed = 0; seed < 3; seed++) {
                char what[64];
                sftest_random_mask(&m, nx, ny, 99 + 1000 * s + 10 * d + seed, densities[d]);
                snprintf(what, sizeof what, "random p=%.2f seed %d", densities[d], seed);
                check_gpu(&m, 8, 1, what);
                check_gpu(&m, 4, 3, what);
                sf_mask_free(&m, NULL);
            }
        checker_mask(&m, nx, ny);
        check_gpu_all(&m, "checkerboard");
        sf_mask_free(&m, NULL);
        serpentine_mask(&m, nx, ny);
        check_gpu_all(&m, "serpentine");
        sf_mask_free(&m, NULL);
        diagonal_mask(&m, nx, ny);
        check_gpu(&m, 4, 1, "diagonals");
        check_gpu(&m, 8, 1, "diagonals");
        sf_mask_free(&m, NULL);
    }
    {
        sf_mask m = {0};
        spiral_mask(&m, 2048);
        check_gpu_all(&m, "spiral");
        sf_mask_free(&m, NULL);
    }
}
END_TEST

/* ---- real images: mask = value > median + 3 std of the finite pixels ------ */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static int real_mask(const char *name, sf_mask *m)
{
    sf_image im = {0};
    sf_fits_info info;
    size_t npix, nf = 0;
    float *v;
    double mean = 0, var = 0, med, thr;
    memset(&info, 0, sizeof info);
    if (sf_fits_read(sftest_data(name), -1, NULL, &im, &info) != SF_OK) {
        printf("  %s: not read (%s), skipped\n", name, sf_errdetail());
        return 0;
    }
    sf_fits_info_free(&info);
    npix = sf_npix(im.nx, im.ny);
    v = malloc(npix * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < npix; i++)
        if (isfinite(im.data[i]))
            v[nf++] = im.data[i];
    if (nf == 0) {
        free(v);
        sf_image_free(&im, NULL);
        return 0;
    }
    qsort(v, nf, sizeof *v, cmp_float);
    med = nf % 2 ? v[nf / 2] : 0.5 * ((double)v[nf / 2 - 1] + v[nf / 2]);
    for (size_t i = 0; i < nf; i++)
        mean += v[i];
    mean /= (double)nf;
    for (size_t i = 0; i < nf; i++)
        var += (v[i] - mean) * (v[i] - mean);
    thr = med + 3 * sqrt(var / (double)nf);
    free(v);
    ck_assert_int_eq(sf_mask_alloc(m, im.nx, im.ny, SF_HOST, NULL), SF_OK);
    for (size_t i = 0; i < npix; i++)
        m->data[i] = isfinite(im.data[i]) && im.data[i] > thr;
    sf_image_free(&im, NULL);
    return 1;
}

static const char *real_images[] = {
    "radio_atca_scorpio_s17_1000x1000.fits", "radio_amila_GRB120422A_512x512x1x1.fits",
    "radio_parkes_1904-66_SIN.fits", "radio_lofar_GRB201006A_wsclean_256x256.fits",
    "sim_aegean_synthetic_512x256.fits", "optical_eso_ntt_emmi_256x256_int16_bscale.fits",
    "optical_ngc1316_440x300_RICE_tilecompressed.fits", "radio_lofar_dirty_beam_512x512x1x1.fits",
    "quirk_ukidss_wfcam_300x300_int32_bscale_zpn.fits", NULL};

static void real_images_check(int gpu)
{
    int used = 0;
    if (!sftest_have_data()) {
        printf("SKIP: no test data at %s\n", sftest_data(""));
        return;
    }
    for (int k = 0; real_images[k]; k++) {
        sf_mask m = {0};
        if (!real_mask(real_images[k], &m))
            continue;
        if (gpu)
            check_gpu_all(&m, real_images[k]);
        else
            check_cpu_all(&m, real_images[k]);
        sf_mask_free(&m, NULL);
        used++;
    }
    ck_assert_int_gt(used, 0);
}

START_TEST(cpu_real_images) { real_images_check(0); }
END_TEST

START_TEST(gpu_real_images) { real_images_check(1); }
END_TEST

int main(void)
{
    Suite *s = suite_create("segment");
    TCase *cpu = tcase_create("cpu");
    TCase *gpu = tcase_create("gpu");
    tcase_set_timeout(cpu, 300);
    tcase_set_timeout(gpu, 600);
    tcase_add_test(cpu, cpu_random);
    tcase_add_test(cpu, cpu_checkerboard);
    tcase_add_test(cpu, cpu_serpentine_spiral);
    tcase_add_test(cpu, cpu_all_ones_and_single_pixel);
    tcase_add_test(cpu, cpu_diagonal_and_order);
    tcase_add_test(cpu, cpu_bad_params);
    tcase_add_test(cpu, cpu_seed_and_flood);
    tcase_add_test(cpu, cpu_threads);
    tcase_add_test(cpu, cpu_real_images);
    suite_add_tcase(s, cpu);
    tcase_add_test(gpu, gpu_random);
    tcase_add_test(gpu, gpu_shapes);
    tcase_add_test(gpu, gpu_seed_and_flood);
    tcase_add_test(gpu, gpu_large);
    tcase_add_test(gpu, gpu_real_images);
    return sftest_main(s, &gpu, 1);
}
