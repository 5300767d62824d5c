/* Check suite for `background` method=mesh: the CPU twin on images with a
 * known answer (constant, noise, gradient, NaN regions, blank meshes,
 * parameter errors), the clipping's sums carried between passes against
 * prefix arrays of them, and the GPU version against the CPU twin (mesh grid,
 * interpolation and the whole stage) on awkward sizes and real images. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "sftest.h"
#include "skyfind/background.h"
#include "skyfind/fits.h"
#include "background_mesh.h"

static sf_bkg_params mesh_params(int box, int filter)
{
    sf_bkg_params p;
    sf_bkg_params_default(&p);
    p.method = SF_BKG_MESH;
    p.box = box;
    p.filter = filter;
    return p;
}

static void mesh_alloc(sf_bkg_mesh *m, int nx, int ny, int box)
{
    int nbx, nby;
    sf_bkg_mesh_shape(nx, ny, box, &nbx, &nby);
    m->loc = SF_HOST;
    m->bkg = malloc((size_t)nbx * nby * sizeof(float));
    m->rms = malloc((size_t)nbx * nby * sizeof(float));
    ck_assert(m->bkg && m->rms);
}

static void mesh_free(sf_bkg_mesh *m)
{
    free(m->bkg);
    free(m->rms);
    m->bkg = m->rms = NULL;
}

START_TEST(test_shape)
{
    int nbx, nby;
    sf_bkg_mesh_shape(256, 256, 64, &nbx, &nby);
    ck_assert(nbx == 4 && nby == 4);
    sf_bkg_mesh_shape(257, 191, 64, &nbx, &nby);
    ck_assert(nbx == 5 && nby == 3);
    sf_bkg_mesh_shape(1, 1000, 64, &nbx, &nby);
    ck_assert(nbx == 1 && nby == 16);
    sf_bkg_mesh_shape(10, 10, 64, &nbx, &nby);
    ck_assert(nbx == 1 && nby == 1);
}
END_TEST

/* A constant image: SExtractor's histogram collapses into one bin and
 * backguess returns its mean, so the level is the constant and the rms 0. */
START_TEST(test_constant)
{
    int sizes[][2] = {{200, 130}, {1, 1}, {1, 257}, {3, 5}, {64, 64}};
    for (int k = 0; k < 5; k++) {
        sf_image im, b, r;
        sf_bkg_stats st;
        sf_bkg_params p = mesh_params(32, 3);
        int nx = sizes[k][0], ny = sizes[k][1];
        ck_assert_int_eq(sf_image_alloc(&im, nx, ny, SF_HOST, NULL), SF_OK);
        for (size_t i = 0; i < sf_npix(nx, ny); i++)
            im.data[i] = 3.5f;
        sftest_maps_alloc(&b, &r, nx, ny);
        ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
        for (size_t i = 0; i < sf_npix(nx, ny); i++)
            ck_assert_msg(b.data[i] == 3.5f && r.data[i] == 0.0f, "%dx%d pixel %zu: %g %g", nx,
                          ny, i, b.data[i], r.data[i]);
        ck_assert(st.median == 3.5 && st.sigma == 0.0 && st.nvalid == (long long)(nx * ny));
        sf_image_free(&im, NULL);
        sf_image_free(&b, NULL);
        sf_image_free(&r, NULL);
    }
}
END_TEST

/* Gaussian noise of sigma 1: level ~0, rms ~1 (the 3-sigma histogram clip
 * leaves 0.986 of sigma, which SExtractor does not correct). */
START_TEST(test_noise)
{
    int n = sftest_quick() ? 256 : 1024;
    for (int e = 0; e < 3; e++) {
        sf_image im, b, r;
        sf_bkg_stats st;
        sf_bkg_params p = mesh_params(64, 3);
        double maxb = 0, sr = 0;
        p.estimator = e;
        sftest_noise_image(&im, n, n, 42 + e, 0, 0.0);
        sftest_maps_alloc(&b, &r, n, n);
        ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
        for (size_t i = 0; i < sf_npix(n, n); i++) {
            maxb = fmax(maxb, fabs(b.data[i]));
            sr += r.data[i];
        }
        sr /= (double)sf_npix(n, n);
        /* the spline extrapolates half a mesh beyond the outer nodes */
        ck_assert_msg(maxb < 0.15, "estimator %d: |level| up to %g", e, maxb);
        ck_assert_msg(fabs(sr - 1.0) < 0.03, "estimator %d: mean rms %g", e, sr);
        ck_assert_msg(fabs(st.median) < 0.05 && fabs(st.sigma - 1) < 0.03 && st.converged,
                      "estimator %d: stats %g %g", e, st.median, st.sigma);
        sf_image_free(&im, NULL);
        sf_image_free(&b, NULL);
        sf_image_free(&r, NULL);
    }
}
END_TEST

/* A plane is followed exactly by both interpolations (its second
 * differences are 0, the median filter of a plane is the plane), with
 * SExtractor's node convention: mesh (i, j) is represented at x = (i+0.5)
 * box - 0.5 but y = (j+0.5) box, so the map is the plane shifted by half a
 * pixel in y. Checked inside and beyond the outermost nodes. */
START_TEST(test_gradient)
{
    const int nx = 256, ny = 192, box = 32;
    const double a = 10.0, gx = 0.0123457, gy = -0.0171717; /* no pixel lattice */
    for (int it = 0; it < 2; it++) {
        sf_image im, b, r;
        sf_bkg_stats st;
        sf_bkg_params p = mesh_params(box, 3);
        double worst = 0;
        p.interp = it;
        ck_assert_int_eq(sf_image_alloc(&im, nx, ny, SF_HOST, NULL), SF_OK);
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++)
                im.data[(size_t)y * nx + x] = (float)(a + gx * x + gy * y);
        sftest_maps_alloc(&b, &r, nx, ny);
        ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                double want = a + gx * x + gy * (y - 0.5);
                worst = fmax(worst, fabs(b.data[(size_t)y * nx + x] - want));
            }
        /* (gradients with a common lattice, 0.01 and 0.02, give spiky
         * histograms whose interpolated median, times 2.5 in the mode, is
         * off by up to half a lattice step: SExtractor's behaviour too) */
        ck_assert_msg(worst < 1e-4, "interp %d: plane missed by %g", it, worst);
        sf_image_free(&im, NULL);
        sf_image_free(&b, NULL);
        sf_image_free(&r, NULL);
    }
}
END_TEST

START_TEST(test_nan_positions)
{
    sf_image im, b, r;
    sf_bkg_stats st;
    sf_bkg_params p = mesh_params(32, 3);
    long long nfin = 0;
    sftest_noise_image(&im, 301, 207, 7, 20, 0.1);
    sftest_maps_alloc(&b, &r, 301, 207);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
    for (size_t i = 0; i < sf_npix(301, 207); i++) {
        int nan = isnan(im.data[i]);
        nfin += !nan;
        ck_assert_msg(nan ? isnan(b.data[i]) && isnan(r.data[i])
                          : isfinite(b.data[i]) && isfinite(r.data[i]),
                      "pixel %zu: img %g bkg %g rms %g", i, im.data[i], b.data[i], r.data[i]);
    }
    ck_assert(st.nvalid == nfin && st.nused == nfin);
    sf_image_free(&im, NULL);
    sf_image_free(&b, NULL);
    sf_image_free(&r, NULL);
}
END_TEST

/* Wholly blank meshes take the mean of their nearest valid meshes (ties
 * summed in raster order in float, as SExtractor's filterback). */
START_TEST(test_blank_meshes)
{
    const int nx = 256, ny = 256, box = 32, nbx = 8;
    sf_image im;
    sf_bkg_mesh m = {0};
    sf_bkg_params p = mesh_params(box, 1);
    sftest_noise_image(&im, nx, ny, 11, 0, 0.0);
    for (size_t i = 0; i < sf_npix(nx, ny); i++)
        im.data[i] += 100.0f + (float)(i % nx) * 0.01f;
    /* mesh (2,3) blank; mesh (0,0) more than half blank; mesh (7,7) 40% blank */
    for (int y = 0; y < ny; y++)
        for (int x = 0; x < nx; x++) {
            int bx = x / box, by = y / box, lx = x % box, ly = y % box;
            if ((bx == 2 && by == 3) || (bx == 0 && by == 0 && ly < 20) ||
                (bx == 7 && by == 7 && ly < 12))
                im.data[(size_t)y * nx + x] = NAN;
            (void)lx;
        }
    mesh_alloc(&m, nx, ny, box);
    ck_assert_int_eq(sf_bkg_mesh_cpu(&im, &p, &m), SF_OK);
    ck_assert(m.nbx == 8 && m.nby == 8 && m.box == box);
    {
        float *v = m.bkg;
        float want = (((v[2 * nbx + 2] + v[3 * nbx + 1]) + v[3 * nbx + 3]) + v[4 * nbx + 2]) / 4;
        float want00 = (v[1] + v[nbx]) / 2;
        ck_assert_msg(v[3 * nbx + 2] == want, "blank mesh %g, want %g", v[3 * nbx + 2], want);
        ck_assert_msg(v[0] == want00, "half-blank mesh %g, want %g", v[0], want00);
        ck_assert_msg(fabsf(v[7 * nbx + 7] - (100.0f + 0.01f * 239.5f)) < 0.2f,
                      "60%% valid mesh not measured: %g", v[7 * nbx + 7]);
    }
    /* min_valid 0.3 accepts mesh (0,0) (37.5% valid) */
    p.min_valid = 0.3;
    ck_assert_int_eq(sf_bkg_mesh_cpu(&im, &p, &m), SF_OK);
    ck_assert(fabsf(m.bkg[0] - (100.0f + 0.01f * 15.5f)) < 0.2f);
    mesh_free(&m);
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_params)
{
    sf_image im, b, r;
    sf_bkg_stats st;
    sf_bkg_params p;
    sftest_noise_image(&im, 50, 40, 3, 0, 0.0);
    sftest_maps_alloc(&b, &r, 50, 40);
    p = mesh_params(0, 3);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p = mesh_params(16, 2);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p = mesh_params(16, 0);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p = mesh_params(16, 3);
    p.min_valid = 1.5;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p.min_valid = -0.1;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p.min_valid = NAN;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p = mesh_params(16, 3);
    p.estimator = 7;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p = mesh_params(16, 3);
    p.interp = 3;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p = mesh_params(16, 3);
    p.kappa = 0;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_PARAM);
    p = mesh_params(16, 3);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, NULL, &r), SF_ERR_PARAM);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, NULL), SF_ERR_PARAM);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_OK);
    for (size_t i = 0; i < sf_npix(50, 40); i++)
        im.data[i] = NAN;
    ck_assert_int_eq(sf_background_cpu(&im, &p, &st, &b, &r), SF_ERR_EMPTY);
    ck_assert(strstr(sf_errdetail(), "finite") != NULL);
    sf_image_free(&im, NULL);
    sf_image_free(&b, NULL);
    sf_image_free(&r, NULL);
}
END_TEST

/* The same maps on 1 and 2 threads, bit for bit. */
START_TEST(test_threads)
{
#ifdef _OPENMP
    sf_image im, b1, r1, b2, r2;
    sf_bkg_stats s1, s2;
    sf_bkg_params p = mesh_params(24, 5);
    int nt = omp_get_max_threads();
    sftest_noise_image(&im, 333, 277, 5, 40, 0.05);
    sftest_maps_alloc(&b1, &r1, 333, 277);
    sftest_maps_alloc(&b2, &r2, 333, 277);
    omp_set_num_threads(1);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &s1, &b1, &r1), SF_OK);
    omp_set_num_threads(nt > 1 ? nt : 3);
    ck_assert_int_eq(sf_background_cpu(&im, &p, &s2, &b2, &r2), SF_OK);
    omp_set_num_threads(nt);
    ck_assert(memcmp(b1.data, b2.data, sf_npix(333, 277) * 4) == 0);
    ck_assert(memcmp(r1.data, r2.data, sf_npix(333, 277) * 4) == 0);
    ck_assert(s1.median == s2.median && s1.sigma == s2.sigma && s1.niter == s2.niter);
    sf_image_free(&im, NULL);
    sf_image_free(&b1, NULL);
    sf_image_free(&r1, NULL);
    sf_image_free(&b2, NULL);
    sf_image_free(&r2, NULL);
#endif
}
END_TEST

/* ---- GPU against the CPU twin ------------------------------------------- */

static int close_to(float g, float c, double tol)
{
    return g == c || fabs((double)g - c) <= tol;
}

/* Mesh grid, interpolation of the CPU grid, and the whole stage. */
static void gpu_vs_cpu(const sf_image *im, const sf_bkg_params *p, const char *what)
{
    sf_gpu *g = sftest_gpu();
    int nx = im->nx, ny = im->ny, nbx, nby, bad = 0;
    size_t n = sf_npix(nx, ny), nb;
    sf_bkg_mesh mc = {0}, mg = {0}, md = {0};
    sf_image d = {0}, db = {0}, dr = {0}, cb, cr, hb, hr;
    sf_bkg_stats cs, gs;
    sf_status sc, sg;
    float *gbk, *grm;
    sf_bkg_mesh_shape(nx, ny, p->box, &nbx, &nby);
    nb = (size_t)nbx * nby;
    mesh_alloc(&mc, nx, ny, p->box);
    sftest_maps_alloc(&cb, &cr, nx, ny);
    sftest_maps_alloc(&hb, &hr, nx, ny);
    gbk = malloc(nb * sizeof(float));
    grm = malloc(nb * sizeof(float));
    ck_assert_int_eq(sf_image_alloc(&d, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&db, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_alloc(&dr, nx, ny, SF_DEVICE, g), SF_OK);
    ck_assert_int_eq(sf_image_upload(g, im, &d), SF_OK);
    ck_assert_int_eq(sf_gpu_malloc(g, (void **)&md.bkg, nb * sizeof(float)), SF_OK);
    ck_assert_int_eq(sf_gpu_malloc(g, (void **)&md.rms, nb * sizeof(float)), SF_OK);
    md.loc = SF_DEVICE;

    /* 1. the mesh grid: float32 relative 1e-6 (of level + rms for levels) */
    sc = sf_bkg_mesh_cpu(im, p, &mc);
    sftest_poison(g, md.bkg, nb * sizeof(float));
    sftest_poison(g, md.rms, nb * sizeof(float));
    sg = sf_bkg_mesh_gpu(g, &d, p, &md);
    ck_assert_msg(sg == sc, "%s: mesh gpu status %d, cpu %d (%s)", what, sg, sc, sf_errdetail());
    if (sc == SF_OK) {
        ck_assert(md.nbx == nbx && md.nby == nby && md.box == p->box);
        ck_assert_int_eq(sf_gpu_to_host(g, gbk, md.bkg, nb * sizeof(float)), SF_OK);
        ck_assert_int_eq(sf_gpu_to_host(g, grm, md.rms, nb * sizeof(float)), SF_OK);
        for (size_t i = 0; i < nb; i++)
            if (!close_to(gbk[i], mc.bkg[i], 1e-6 * (fabs(mc.bkg[i]) + fabs(mc.rms[i]))) ||
                !close_to(grm[i], mc.rms[i], 1e-6 * fabs(mc.rms[i]))) {
                if (bad++ < 5)
                    fprintf(stderr, "%s: mesh %zu (%zu,%zu): gpu %.9g %.9g cpu %.9g %.9g\n",
                            what, i, i % nbx, i / nbx, gbk[i], grm[i], mc.bkg[i], mc.rms[i]);
            }
        ck_assert_msg(!bad, "%s: %d of %zu meshes differ", what, bad, nb);

        /* 2. interpolation of the CPU grid: 1e-5 of the local rms / relative */
        ck_assert_int_eq(sf_gpu_to_device(g, md.bkg, mc.bkg, nb * sizeof(float)), SF_OK);
        ck_assert_int_eq(sf_gpu_to_device(g, md.rms, mc.rms, nb * sizeof(float)), SF_OK);
        mg = md;
        ck_assert_int_eq(sf_bkg_interp_cpu(&mc, p, im, &cb, &cr), SF_OK);
        for (int full = 0; full < 2; full++) {
            double worst = 0;
            sftest_poison(g, db.data, n * 4);
            sftest_poison(g, dr.data, n * 4);
            if (full) { /* 3. the whole stage */
                ck_assert_int_eq(sf_background_cpu(im, p, &cs, &cb, &cr), SF_OK);
                ck_assert_msg(sf_background_gpu(g, &d, p, &gs, &db, &dr) == SF_OK, "%s: %s",
                              what, sf_errdetail());
                ck_assert_msg(close_to((float)gs.median, (float)cs.median,
                                       1e-6 * (fabs(cs.median) + cs.sigma)) &&
                                  close_to((float)gs.sigma, (float)cs.sigma, 1e-6 * cs.sigma) &&
                                  gs.nvalid == cs.nvalid,
                              "%s: stats gpu %.9g %.9g %lld cpu %.9g %.9g %lld", what, gs.median,
                              gs.sigma, gs.nvalid, cs.median, cs.sigma, cs.nvalid);
            } else {
                ck_assert_msg(sf_bkg_interp_gpu(g, &mg, p, &d, &db, &dr) == SF_OK, "%s: %s", what,
                              sf_errdetail());
            }
            ck_assert_int_eq(sf_image_download(g, &db, &hb), SF_OK);
            ck_assert_int_eq(sf_image_download(g, &dr, &hr), SF_OK);
            for (size_t i = 0; i < n; i++) {
                float c = cb.data[i], s = cr.data[i];
                int ok = isnan(c) ? isnan(hb.data[i]) && isnan(hr.data[i])
                                  : close_to(hb.data[i], c, 1e-5 * fabs(s) + 1e-6 * fabs(c)) &&
                                        close_to(hr.data[i], s, 1e-5 * fabs(s));
                if (!isnan(c))
                    worst = fmax(worst, fabs(hb.data[i] - c) / fmax(fabs(s), 1e-30));
                if (!ok && bad++ < 5)
                    fprintf(stderr, "%s: %s pixel (%zu,%zu): gpu %.9g %.9g cpu %.9g %.9g\n", what,
                            full ? "stage" : "interp", i % nx, i / nx, hb.data[i], hr.data[i], c,
                            s);
            }
            ck_assert_msg(!bad, "%s: %s: %d pixels differ (largest %.3g rms)", what,
                          full ? "stage" : "interp", bad, worst);
        }
    }
    sf_gpu_free(g, md.bkg);
    sf_gpu_free(g, md.rms);
    sf_image_free(&d, g);
    sf_image_free(&db, g);
    sf_image_free(&dr, g);
    sf_image_free(&cb, NULL);
    sf_image_free(&cr, NULL);
    sf_image_free(&hb, NULL);
    sf_image_free(&hr, NULL);
    free(gbk);
    free(grm);
    mesh_free(&mc);
}

/* The surface from derivative grids (sf_bkg_node) equals SExtractor's: on
 * each image row, nodes interpolated along y, then the spline recurrence
 * along that row; and the recurrence's t_i is constant from i = 31, which
 * the GPU's spline table (gpu/background_mesh_maps.cuh) relies on. */
START_TEST(test_spline_grids)
{
    enum { NBX = 9, NBY = 6 };
    float m[NBX * NBY], my[NBX * NBY], g[NBX * NBY], gy[NBX * NBY], u[16];
    float p = 0.0f, p31 = 0.0f;
    srand(7);
    for (int i = 0; i < NBX * NBY; i++)
        m[i] = 100.0f + (float)(rand() % 2000) / 100.0f;
    for (int x = 0; x < NBX; x++)
        sf_bkg_spline_d2(m + x, NBX, NBY, my + x, u);
    for (int y = 0; y < NBY; y++)
        sf_bkg_spline_d2(m + y * NBX, 1, NBX, g + y * NBX, u);
    for (int x = 0; x < NBX; x++)
        sf_bkg_spline_d2(g + x, NBX, NBY, gy + x, u);
    for (int ky = 0; ky < NBY - 1; ky++)
        for (int s = 0; s <= 8; s++) {
            float dy = s / 8.0f, nodes[NBX], dn[NBX], d[NBX];
            for (int k = 0; k < NBX; k++)
                nodes[k] = sf_bkg_cubic(m[ky * NBX + k], m[(ky + 1) * NBX + k], my[ky * NBX + k],
                                        my[(ky + 1) * NBX + k], dy);
            sf_bkg_spline_d2(nodes, 1, NBX, dn, u);
            for (int k = 0; k < NBX; k++) {
                float v;
                sf_bkg_node(m, my, g, gy, (size_t)(ky * NBX + k), (size_t)((ky + 1) * NBX + k), dy,
                            &v, &d[k]);
                ck_assert_msg(fabsf(v - nodes[k]) <= 1e-6f * fabsf(nodes[k]),
                              "node %d,%d: %.9g vs %.9g", ky, k, v, nodes[k]);
                ck_assert_msg(fabsf(d[k] - dn[k]) <= 1e-5f * (fabsf(dn[k]) + 1.0f),
                              "x-derivative %d,%d at dy %g: grids %.9g, per row %.9g", ky, k, dy,
                              d[k], dn[k]);
            }
        }
    for (int i = 1; i < 100000; i++) {
        p = -1.0f / (p + 4.0f);
        if (i == 31)
            p31 = p;
        if (i > 31)
            ck_assert_msg(p == p31, "spline t_%d = %.9g differs from t_31 = %.9g", i, p, p31);
    }
}
END_TEST

/* backguess as it ran before 2026-12-02: every pass's moments from prefix
 * arrays of hist[j], hist[j]*j and hist[j]*j*j, the median by the same
 * bisection. The reference for the sums carried between passes. */
static int backguess_prefix(const unsigned *hist, const sf_bkg_quant *q, double kappa, int maxiter,
                            int estimator, float *level, float *rms, int *converged)
{
    const int nlm1 = q->nlevels - 1;
    unsigned long long *C0 = malloc(3 * ((size_t)nlm1 + 2) * sizeof *C0);
    unsigned long long *C1 = C0 + (nlm1 + 2), *C2 = C0 + 2 * (nlm1 + 2);
    int lcut = 0, hcut = nlm1, it = 0;
    double sig = SF_BKG_GUESS_START * nlm1, sig1 = 1.0,
           mea = ((double)q->mean - (double)q->qzero) / (double)q->qscale, med = mea;
    ck_assert_ptr_nonnull(C0);
    C0[0] = C1[0] = C2[0] = 0;
    for (int i = 0; i <= nlm1; i++) {
        unsigned long long h = hist[i];
        C0[i + 1] = C0[i] + h;
        C1[i + 1] = C1[i] + h * (unsigned long long)i;
        C2[i + 1] = C2[i] + h * (unsigned long long)i * (unsigned long long)i;
    }
    while (it < maxiter && sig >= SF_BKG_GUESS_MINSIG && fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS) {
        unsigned long long lowsum = 0, highsum = 0, sum = 0, s1 = 0, s2 = 0;
        int lo = lcut, hi = hcut;
        it++;
        sig1 = sig;
        if (hcut >= lcut) {
            const unsigned long long base = C0[lcut], tot = C0[hcut + 1] - base;
            int a = lcut, b = hcut;
            while (a < b) {
                int c = a + (b - a) / 2;
                if ((C0[c] - base) + (C0[c + 1] - base) >= tot)
                    b = c;
                else
                    a = c + 1;
            }
            lo = a;
            hi = a - 1;
            lowsum = C0[a] - base;
            highsum = tot - lowsum;
            sum = tot;
            s1 = C1[hcut + 1] - C1[lcut];
            s2 = C2[hcut + 1] - C2[lcut];
        }
        sf_bkg_guess_pass(sum, s1, s2, lowsum, highsum, hi, lo <= nlm1 ? hist[lo] : 0u,
                          hi >= 0 ? hist[hi] : 0u, nlm1, kappa, &med, &mea, &sig, &lcut, &hcut);
    }
    *converged = !(it >= maxiter && sig >= SF_BKG_GUESS_MINSIG &&
                   fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS);
    sf_bkg_guess_level(q, estimator, med, mea, sig, level, rms);
    free(C0);
    return it;
}

/* sf_bkg_range_sums, moved between random ranges (overlapping, nested,
 * apart, one bin), against the sums counted afresh. */
START_TEST(test_range_sums)
{
    sftest_rng r = {77};
    enum { N = 4096 };
    static unsigned hist[N];
    for (int i = 0; i < N; i++) /* counts up to 2^20: the products need 64 bits */
        hist[i] = (unsigned)(sftest_next(&r) % (i % 7 == 0 ? 1048576 : 40));
    int ra = 0, rb = N - 1;
    unsigned long long s1 = 0, s2 = 0;
    for (int j = 0; j < N; j++) {
        s1 += (unsigned long long)hist[j] * j;
        s2 += (unsigned long long)hist[j] * j * j;
    }
    for (int t = 0; t < 20000; t++) {
        int a, b;
        const int kind = (int)(sftest_next(&r) % 4);
        if (kind == 0) { /* anywhere */
            a = (int)(sftest_next(&r) % N);
            b = a + (int)(sftest_next(&r) % (N - a));
        } else if (kind == 1) { /* the ends moved by a few bins */
            a = ra + (int)(sftest_next(&r) % 9) - 4;
            b = rb + (int)(sftest_next(&r) % 9) - 4;
        } else if (kind == 2) { /* one bin */
            a = b = (int)(sftest_next(&r) % N);
        } else { /* apart from the last range, where there is room */
            a = rb + 1 + (int)(sftest_next(&r) % 50);
            b = a + (int)(sftest_next(&r) % 50);
        }
        a = a < 0 ? 0 : a > N - 1 ? N - 1 : a;
        b = b < a ? a : b > N - 1 ? N - 1 : b;
        sf_bkg_range_sums(hist, a, b, &ra, &rb, &s1, &s2);
        unsigned long long e1 = 0, e2 = 0;
        for (int j = a; j <= b; j++) {
            e1 += (unsigned long long)hist[j] * j;
            e2 += (unsigned long long)hist[j] * j * j;
        }
        ck_assert_msg(ra == a && rb == b && s1 == e1 && s2 == e2,
                      "step %d [%d, %d]: sums %llu %llu, counted %llu %llu", t, a, b, s1, s2, e1, e2);
    }
}
END_TEST

/* sf_bkg_backguess against the prefix-array version on histograms of many
 * shapes (noise, a source's tail, two peaks, a spike, empty bins, one bin,
 * a constant mesh), every estimator and kappa: the same passes, the same
 * level and rms bits. */
START_TEST(test_backguess_sums)
{
    sftest_rng r = {2026};
    static unsigned hist[SF_BKG_QUANTIF_NMAXLEVELS];
    static unsigned long long pre[SF_BKG_QUANTIF_NMAXLEVELS + 1];
    const double kappas[] = {3.0, 2.0, 5.0, 1.0};
    int cases = 0;
    for (int t = 0; t < 3000; t++) {
        sf_bkg_quant q;
        const int nl = t % 10 == 0 ? 1 + (int)(sftest_next(&r) % 8)
                                   : 1 + (int)(sftest_next(&r) % SF_BKG_QUANTIF_NMAXLEVELS);
        const int shape = t % 6;
        const double mid = nl * (0.2 + 0.6 * sftest_uniform(&r)), w = 1 + nl * 0.1 * sftest_uniform(&r);
        memset(hist, 0, sizeof hist);
        for (int k = 0; k < 4096; k++) {
            double x;
            if (shape == 0) /* noise */
                x = mid + w * sftest_normal(&r);
            else if (shape == 1) /* noise and a source's tail above it */
                x = k % 5 ? mid + w * sftest_normal(&r) : mid + w * 8 * sftest_uniform(&r);
            else if (shape == 2) /* two peaks */
                x = (k % 2 ? 0.2 : 0.8) * nl + 0.05 * nl * sftest_normal(&r);
            else if (shape == 3) /* a spike on flat counts */
                x = k % 3 ? mid : nl * sftest_uniform(&r);
            else if (shape == 4) /* sparse: every other bin empty */
                x = 2 * floor((mid + w * sftest_normal(&r)) / 2);
            else /* constant */
                x = mid;
            if (x >= 0 && x < nl)
                hist[(int)x]++;
        }
        q.nlevels = nl;
        q.mean = (float)mid;
        q.sigma = (float)w;
        q.qzero = -1.5f;
        q.qscale = 0.25f;
        q.cste = 0.0f;
        for (int e = 0; e < 3; e++) {
            const double kappa = kappas[t % 4];
            const int est = e == 0 ? SF_BKG_EST_SEXTRACTOR : e == 1 ? SF_BKG_EST_MEDIAN : SF_BKG_EST_MEAN;
            const int maxiter = t % 7 == 0 ? 3 : 100;
            float l0, s0, l1, s1;
            int c0, c1;
            int i0 = backguess_prefix(hist, &q, kappa, maxiter, est, &l0, &s0, &c0);
            int i1 = sf_bkg_backguess(hist, &q, kappa, maxiter, est, &l1, &s1, &c1, pre);
            ck_assert_msg(i0 == i1 && c0 == c1 && memcmp(&l0, &l1, sizeof l0) == 0 &&
                              memcmp(&s0, &s1, sizeof s0) == 0,
                          "case %d (nlevels %d, shape %d, estimator %d): passes %d/%d converged "
                          "%d/%d level %.9g/%.9g rms %.9g/%.9g",
                          t, nl, shape, est, i0, i1, c0, c1, l0, l1, s0, s1);
            cases++;
        }
    }
    ck_assert_int_eq(cases, 9000);
}
END_TEST

START_TEST(test_gpu_random)
{
    static const int boxes[] = {64, 16, 7};
    for (int k = 0; sftest_sizes[k][0]; k++) {
        if (sftest_quick() && sf_npix(sftest_sizes[k][0], sftest_sizes[k][1]) > 300 * 300)
            continue;
        for (int nan = 0; nan < 2; nan++)
            for (int b = 0; b < 3; b++) {
                sf_image im;
                sf_bkg_params p = mesh_params(boxes[b], b == 2 ? 5 : 3);
                char what[96];
                p.estimator = (k + b) % 3;
                p.interp = (k + nan) % 2;
                sftest_noise_image(&im, sftest_sizes[k][0], sftest_sizes[k][1], 10 * k + b, k,
                                   nan * 0.2);
                snprintf(what, sizeof what, "%dx%d box %d nan=%d est %d interp %d", im.nx, im.ny,
                         p.box, nan, p.estimator, p.interp);
                gpu_vs_cpu(&im, &p, what);
                sf_image_free(&im, NULL);
            }
    }
}
END_TEST

START_TEST(test_gpu_special)
{
    int n = sftest_quick() ? 200 : 1500;
    sf_image im;
    sf_bkg_params p = mesh_params(32, 3);
    sftest_rng r = {5};
    /* blank meshes (a NaN block) and an offset optical-like level */
    sftest_noise_image(&im, n, n - 37, 21, 50, 0.3);
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = 3700.0f + 20.0f * im.data[i];
    gpu_vs_cpu(&im, &p, "blank meshes + offset");
    /* integer ties */
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = (float)(int)(20 * sftest_uniform(&r)) - 7;
    gpu_vs_cpu(&im, &p, "ties");
    /* constant: rms 0 */
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = -1.25f;
    gpu_vs_cpu(&im, &p, "constant");
    /* all NaN: both SF_ERR_EMPTY */
    for (size_t i = 0; i < sf_npix(im.nx, im.ny); i++)
        im.data[i] = NAN;
    gpu_vs_cpu(&im, &p, "all-nan");
    sf_image_free(&im, NULL);
    /* maxiter 2 and kappa 2.5 */
    p.maxiter = 2;
    p.kappa = 2.5;
    sftest_noise_image(&im, 333, 301, 6, 100, 0.0);
    gpu_vs_cpu(&im, &p, "maxiter 2 kappa 2.5");
    sf_image_free(&im, NULL);
}
END_TEST

START_TEST(test_gpu_real)
{
    static const char *files[] = {
        "optical_eso_ntt_emmi_256x256_int16_bscale.fits", "radio_parkes_1904-66_SIN.fits",
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
        sf_bkg_params p = mesh_params(64, 3);
        ck_assert_msg(sf_fits_read(sftest_data(files[i]), -1, NULL, &im, &info) == SF_OK, "%s: %s",
                      files[i], sf_errdetail());
        if (im.nx < 128 || im.ny < 128)
            p.box = 16;
        gpu_vs_cpu(&im, &p, files[i]);
        p.box = 14; /* the Parkes runner's box=auto */
        p.interp = SF_BKG_INTERP_BILINEAR;
        gpu_vs_cpu(&im, &p, files[i]);
        sf_image_free(&im, NULL);
        sf_fits_info_free(&info);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("background_mesh");
    TCase *cpu = tcase_create("cpu"), *gpu = tcase_create("gpu");
    tcase_set_timeout(cpu, 300);
    tcase_set_timeout(gpu, 600);
    tcase_add_test(cpu, test_shape);
    tcase_add_test(cpu, test_constant);
    tcase_add_test(cpu, test_noise);
    tcase_add_test(cpu, test_gradient);
    tcase_add_test(cpu, test_nan_positions);
    tcase_add_test(cpu, test_blank_meshes);
    tcase_add_test(cpu, test_params);
    tcase_add_test(cpu, test_threads);
    tcase_add_test(cpu, test_spline_grids);
    tcase_add_test(cpu, test_range_sums);
    tcase_add_test(cpu, test_backguess_sums);
    suite_add_tcase(s, cpu);
    tcase_add_test(gpu, test_gpu_random);
    tcase_add_test(gpu, test_gpu_special);
    tcase_add_test(gpu, test_gpu_real);
    TCase *gc[] = {gpu};
    return sftest_main(s, gc, 1);
}
