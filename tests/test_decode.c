/* Check suite for the raw pixel decode (the batch engine's read path): files
 * of every BITPIX with and without BSCALE/BZERO and BLANK, written with
 * CFITSIO, read raw and decoded by the CPU twin must equal CFITSIO's own
 * conversion (sf_fits_read) bit for bit; the GPU decode must equal the twin
 * bit for bit on awkward sizes, every output element written. */
#include <fitsio.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sftest.h"
#include "skyfind/decode.h"
#include "skyfind/fits.h"

static char tmpdir[256];

typedef struct {
    int bitpix;
    double bscale, bzero;
    int blank; /* write a BLANK card (integer types) */
} kind;

static const kind kinds[] = {
    {8, 1, 0, 0},       {8, 0.5, -3, 1},      {16, 1, 0, 0},         {16, 1, 32768, 0},
    {16, 2.92273835509, 3713.66692596, 1},    {32, 1, 0, 0},         {32, 0.7071, 0, 1},
    {32, 1, 2147483648.0, 0},                 {64, 1, 0, 0},         {64, 1e-3, 5, 1},
    {64, 1, 9223372036854775808.0, 0},        {64, 1, 9223372036854775808.0, 1}, /* uint64 */
    {-32, 1, 0, 0},     {-32, 2.5, -1, 0},    {-64, 1, 0, 0},        {-64, 1e-2, 7, 0},
    {0, 0, 0, 0}};

/* Pixels in a piece of sf_fits_read_raw_cpu's read (256 kB of 4-byte pixels). */
#define PIECE ((size_t)65536)

/* Write an nx x ny x nz file of the kind with random values (blanks, NaN,
 * infinities and extremes sprinkled in); returns its path (static). */
static const char *write_kind(const kind *k, int nx, int ny, int nz, uint64_t seed)
{
    static char path[512];
    fitsfile *fp = NULL;
    int status = 0;
    long naxes[3] = {nx, ny, nz};
    size_t n = (size_t)nx * ny * nz;
    sftest_rng r = {seed};
    long long blank = k->bitpix == 8 ? 255 : k->bitpix == 16 ? -32768 : -99;
    snprintf(path, sizeof path, "!%s/k%d_%d_%d.fits", tmpdir, k->bitpix, nx, ny);
    ck_assert_int_eq(fits_create_file(&fp, path, &status), 0);
    ck_assert_int_eq(fits_create_img(fp, k->bitpix, nz > 1 ? 3 : 2, naxes, &status), 0);
    if (k->bscale != 1 || k->bzero != 0) {
        fits_write_key(fp, TDOUBLE, "BSCALE", (void *)&k->bscale, "", &status);
        fits_write_key(fp, TDOUBLE, "BZERO", (void *)&k->bzero, "", &status);
        fits_set_bscale(fp, 1.0, 0.0, &status); /* values below are written as stored */
    }
    if (k->blank)
        fits_write_key(fp, TLONGLONG, "BLANK", &blank, "", &status);
    ck_assert_int_eq(status, 0);
    switch (k->bitpix) {
    case 8: {
        unsigned char *v = malloc(n);
        for (size_t i = 0; i < n; i++)
            v[i] = (unsigned char)(sftest_next(&r) >> 56);
        if (n > 3 && k->blank)
            v[1] = (unsigned char)blank;
        fits_write_img(fp, TBYTE, 1, (LONGLONG)n, v, &status);
        free(v);
        break;
    }
    case 16: {
        short *v = malloc(n * sizeof *v);
        for (size_t i = 0; i < n; i++)
            v[i] = (short)(sftest_next(&r) >> 48);
        if (n > 3) {
            v[0] = 32767;
            v[2] = k->blank ? (short)blank : -32768;
        }
        fits_write_img(fp, TSHORT, 1, (LONGLONG)n, v, &status);
        free(v);
        break;
    }
    case 32: {
        int *v = malloc(n * sizeof *v);
        for (size_t i = 0; i < n; i++)
            v[i] = (int)(sftest_next(&r) >> 32);
        if (n > 3) {
            v[0] = 2147483647;
            v[2] = k->blank ? (int)blank : (int)-2147483647 - 1;
        }
        for (size_t i = PIECE - 1; k->blank && i + 1 < n; i += PIECE) /* blanks either side of */
            v[i] = v[i + 1] = (int)blank;                             /* each read piece's end */
        fits_write_img(fp, TINT, 1, (LONGLONG)n, v, &status);
        free(v);
        break;
    }
    case 64: {
        LONGLONG *v = malloc(n * sizeof *v);
        for (size_t i = 0; i < n; i++)
            v[i] = (LONGLONG)(sftest_next(&r) >> 20) - ((LONGLONG)1 << 43);
        if (k->bzero == 9223372036854775808.0) { /* unsigned: small values, 0 and 2^64 - 1 */
            for (size_t i = 0; i < n; i++)
                v[i] = LLONG_MIN + (LONGLONG)(sftest_next(&r) >> 20);
            v[0] = LLONG_MIN;
            if (n > 1)
                v[1] = LLONG_MAX;
        }
        if (n > 3 && k->blank)
            v[2] = blank;
        fits_write_img(fp, TLONGLONG, 1, (LONGLONG)n, v, &status);
        free(v);
        break;
    }
    case -32: {
        float *v = malloc(n * sizeof *v);
        for (size_t i = 0; i < n; i++)
            v[i] = (float)(sftest_normal(&r) * 1e3);
        if (n > 5) {
            v[1] = NAN;
            v[2] = INFINITY;
            v[3] = -INFINITY;
            v[4] = 3.4e38f;
        }
        for (size_t i = PIECE - 1; i + 1 < n; i += PIECE) { /* either side of each read piece's end */
            v[i] = (i / PIECE) % 2 ? NAN : INFINITY;
            v[i + 1] = -INFINITY;
        }
        fits_write_img(fp, TFLOAT, 1, (LONGLONG)n, v, &status);
        free(v);
        break;
    }
    default: {
        double *v = malloc(n * sizeof *v);
        for (size_t i = 0; i < n; i++)
            v[i] = sftest_normal(&r) * 1e5;
        if (n > 5) {
            v[1] = NAN;
            v[2] = -INFINITY;
            v[4] = 1.0000000001;
        }
        fits_write_img(fp, TDOUBLE, 1, (LONGLONG)n, v, &status);
        free(v);
        break;
    }
    }
    ck_assert_msg(status == 0, "writing BITPIX %d: CFITSIO status %d", k->bitpix, status);
    fits_close_file(fp, &status);
    return path + 1;
}

static void *get_malloc(void *ctx, size_t bytes)
{
    void **keep = ctx;
    *keep = malloc(bytes ? bytes : 1);
    return *keep;
}

static int same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* raw read + CPU decode, and sf_fits_read (which takes the same raw path for
 * plain files), equal CFITSIO's conversion (sf_fits_read with
 * SKYFIND_FITS_CFITSIO=1), plane by plane */
START_TEST(test_cpu_vs_cfitsio)
{
    for (int i = 0; kinds[i].bitpix; i++)
        for (int plane = 0; plane < 3; plane += 2) {
            const kind *k = &kinds[i];
            const char *path = write_kind(k, 37, 11, 3, 100 + i);
            sf_image ref = {0}, dec = {0};
            sf_fits_info in1, in2;
            sf_raw_layout l;
            void *raw = NULL, *keep = NULL;
            long long nb = -1, nnan = 0;
            sf_image cfi = {0};
            sf_fits_info in0;
            float *cf;
            setenv("SKYFIND_FITS_CFITSIO", "1", 1);
            ck_assert_msg(sf_fits_read(path, plane, NULL, &cfi, &in0) == SF_OK, "%s", sf_errdetail());
            unsetenv("SKYFIND_FITS_CFITSIO");
            cf = cfi.data;
            ck_assert_msg(sf_fits_read(path, plane, NULL, &ref, &in1) == SF_OK, "%s", sf_errdetail());
            ck_assert_msg(sf_fits_read_raw(path, plane, get_malloc, &keep, &raw, &l, &in2) == SF_OK,
                          "%s", sf_errdetail());
            ck_assert_msg(l.bitpix == k->bitpix, "BITPIX %d read as layout %d (not raw)", k->bitpix, l.bitpix);
            ck_assert_int_eq(l.nx, 37);
            ck_assert_int_eq(l.ny, 11);
            ck_assert_int_eq(sf_image_alloc(&dec, l.nx, l.ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_decode_cpu(raw, &l, &dec, &nb), SF_OK);
            for (size_t p = 0; p < sf_npix(l.nx, l.ny); p++) {
                float c = cf[p];
                if (!isfinite(c)) /* the rule: every non-finite value is blank */
                    c = NAN;
                nnan += isnan(c);
                ck_assert_msg(same_float(dec.data[p], c),
                              "BITPIX %d bscale %g bzero %g plane %d pixel %zu: decode %.9g, CFITSIO %.9g",
                              k->bitpix, k->bscale, k->bzero, plane + 1, p, dec.data[p], cf[p]);
                ck_assert_msg(same_float(ref.data[p], c),
                              "BITPIX %d bscale %g bzero %g plane %d pixel %zu: sf_fits_read %.9g, "
                              "CFITSIO %.9g", k->bitpix, k->bscale, k->bzero, plane + 1, p,
                              ref.data[p], cf[p]);
            }
            ck_assert_int_eq(nb, nnan);
            ck_assert_int_eq(in1.nnan, nnan);
            ck_assert_int_eq(in0.nnan, nnan);
            if (sf_raw_pixel_bytes(&l) == sizeof(float)) {
                /* 4-byte pixels decode in place (the batch engine's CPU
                 * workers): the raw buffer itself as the image */
                sf_image in = {l.nx, l.ny, (size_t)l.nx, raw, SF_HOST};
                long long nb2 = -1;
                ck_assert_int_eq(sf_decode_cpu(raw, &l, &in, &nb2), SF_OK);
                for (size_t p = 0; p < sf_npix(l.nx, l.ny); p++)
                    ck_assert_msg(same_float(in.data[p], dec.data[p]),
                                  "BITPIX %d bscale %g plane %d pixel %zu: in place %.9g, apart %.9g",
                                  k->bitpix, k->bscale, plane + 1, p, in.data[p], dec.data[p]);
                ck_assert_int_eq(nb2, nb);
            }
            sf_image_free(&cfi, NULL);
            sf_fits_info_free(&in0);
            ck_assert_str_eq(in1.bunit, in2.bunit);
            ck_assert_int_eq(in1.nplanes, in2.nplanes);
            sf_image_free(&ref, NULL);
            sf_image_free(&dec, NULL);
            sf_fits_info_free(&in1);
            sf_fits_info_free(&in2);
            free(keep);
        }
}
END_TEST

/* an independent spelling of the rule on a few values */
START_TEST(test_cpu_rule)
{
    unsigned char be16[2] = {0x80, 0x00}, be32[4] = {0xC0, 0x49, 0x0F, 0xDB};
    sf_raw_layout l = {16, 1.0, 32768.0, 0, 0, 1, 1};
    ck_assert(sf_decode_pixel(be16, &l, sf_raw_scaled(&l)) == 0.0f); /* uint16 convention */
    l.has_blank = 1;
    l.blank = -32768;
    ck_assert(isnan(sf_decode_pixel(be16, &l, 1)));
    l = (sf_raw_layout){-32, 1.0, 0.0, 0, 0, 1, 1};
    ck_assert(sf_decode_pixel(be32, &l, 0) == -3.14159274101257324f);
    l.bscale = 2.0;
    ck_assert(sf_decode_pixel(be32, &l, 1) == (float)(-3.14159274101257324 * 2.0));
    {   /* unsigned 64-bit (BZERO 2^63): exact, not through v + 2^63 in double */
        const uint64_t stored[] = {0x8000000000000000ull, 0x8000000000000005ull, 0x7fffffffffffffffull,
                                   0x8020000000000001ull, 0x800000000001e240ull};
        const float want[] = {0.0f, 5.0f, 18446744073709551615.0f, 9007199254740992.0f, 123456.0f};
        l = (sf_raw_layout){64, 1.0, 9223372036854775808.0, 0, 0, 1, 1};
        for (int i = 0; i < 5; i++) {
            unsigned char be[8];
            for (int b = 0; b < 8; b++)
                be[b] = (unsigned char)(stored[i] >> (56 - 8 * b));
            ck_assert_msg(sf_decode_pixel(be, &l, sf_raw_scaled(&l)) == want[i], "uint64 %d: %.9g, want %.9g", i,
                          sf_decode_pixel(be, &l, 1), want[i]);
        }
        l.has_blank = 1;
        l.blank = (long long)0x8000000000000005ull;
        {
            unsigned char be[8] = {0x80, 0, 0, 0, 0, 0, 0, 5};
            ck_assert(isnan(sf_decode_pixel(be, &l, 1)));
        }
    }
    l = (sf_raw_layout){8, 1.0, 0.0, 0, 0, 0, 1};
    ck_assert(sf_raw_check(&l) == SF_ERR_FORMAT);
    l = (sf_raw_layout){17, 1.0, 0.0, 0, 0, 1, 1};
    ck_assert(sf_raw_check(&l) == SF_ERR_FORMAT);
    l = (sf_raw_layout){16, 0.0, 0.0, 0, 0, 1, 1};
    ck_assert(sf_raw_check(&l) == SF_ERR_FORMAT);
}
END_TEST

/* gzip'd and tile-compressed files come as CFITSIO's floats; a truncated
 * file is refused, naming it */
START_TEST(test_cpu_paths)
{
    const char *path = write_kind(&kinds[3], 20, 10, 1, 7);
    char cmd[1200], gz[600], trunc[600];
    sf_fits_info in;
    sf_raw_layout l;
    void *raw = NULL, *keep = NULL;
    sf_status st;
    snprintf(gz, sizeof gz, "%s.gz", path);
    snprintf(cmd, sizeof cmd, "gzip -c '%s' > '%s'", path, gz);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(sf_fits_read_raw(gz, 0, get_malloc, &keep, &raw, &l, &in), SF_OK);
    ck_assert_int_eq(l.bitpix, SF_RAW_NATIVE);
    sf_fits_info_free(&in);
    free(keep);
    keep = NULL;
    snprintf(trunc, sizeof trunc, "%s/trunc.fits", tmpdir);
    snprintf(cmd, sizeof cmd, "head -c 3000 '%s' > '%s'", path, trunc);
    ck_assert_int_eq(system(cmd), 0);
    st = sf_fits_read_raw(trunc, 0, get_malloc, &keep, &raw, &l, &in);
    ck_assert_int_ne(st, SF_OK);
    ck_assert_msg(strstr(sf_errdetail(), "trunc.fits") && strstr(sf_errdetail(), "truncated"), "%s",
                  sf_errdetail());
    free(keep);
    if (sftest_have_data()) {
        keep = NULL;
        ck_assert_int_eq(sf_fits_read_raw(sftest_data("optical_ngc1316_440x300_RICE_tilecompressed.fits"),
                                          0, get_malloc, &keep, &raw, &l, &in), SF_OK);
        ck_assert_int_eq(l.bitpix, SF_RAW_NATIVE);
        ck_assert_int_eq(l.nx, 440);
        sf_fits_info_free(&in);
        free(keep);
    }
}
END_TEST

/* The CPU twins' read (sf_fits_read_raw_cpu): 4-byte pixels of planes of
 * 4.4 MB (three 2 MB chunks, the last short, of 256 kB pieces, the last
 * ragged; NaN, infinities and blanks on both sides of each piece's end),
 * decoded as they are read, equal the raw read then sf_decode_cpu, NaN
 * count included, on 1 and 4 threads; other pixel types and CFITSIO's
 * conversions come back as sf_fits_read_raw gives them (decoded 0); a
 * truncated file still fails naming itself. */
START_TEST(test_cpu_read_decoded)
{
    /* kinds: -32, -32 scaled, 32, 32 scaled with BLANK, 32 unsigned; -64 and 16 */
    static const int four[] = {12, 13, 5, 6, 7}, other[] = {14, 2};
    for (size_t i = 0; i < sizeof four / sizeof *four; i++) {
        const kind *k = &kinds[four[i]];
        const int nz = i == 0 ? 2 : 1; /* a second plane: an offset into the file */
        const char *path = write_kind(k, 1100, 1000, nz, 300 + i);
        for (int plane = 0; plane < nz; plane++) {
            sf_fits_info in1, in2;
            sf_raw_layout l1, l2;
            void *raw1 = NULL, *raw2 = NULL, *keep1 = NULL, *keep2 = NULL;
            long long nb = -1, nnan = 0;
            ck_assert_msg(sf_fits_read_raw(path, plane, get_malloc, &keep1, &raw1, &l1, &in1) == SF_OK,
                          "%s", sf_errdetail());
            ck_assert_int_eq(l1.decoded, 0);
            sf_image ref = {l1.nx, l1.ny, (size_t)l1.nx, raw1, SF_HOST};
            ck_assert_int_eq(sf_decode_cpu(raw1, &l1, &ref, &nb), SF_OK);
            for (size_t p = 0; p < sf_npix(l1.nx, l1.ny); p++)
                nnan += isnan(ref.data[p]);
            ck_assert_int_eq(nb, nnan);
            ck_assert_msg(nnan >= (k->bitpix == -32 || k->blank ? 2 * 16 : 0),
                          "BITPIX %d: only %lld blank pixels", k->bitpix, nnan);
            for (int t = 1; t <= 4; t += 3) {
                omp_set_num_threads(t);
                ck_assert_msg(sf_fits_read_raw_cpu(path, plane, get_malloc, &keep2, &raw2, &l2, &in2) ==
                              SF_OK, "%s", sf_errdetail());
                ck_assert_msg(l2.decoded == 1, "BITPIX %d bscale %g: not decoded as read", k->bitpix,
                              k->bscale);
                ck_assert_int_eq(l2.nblank, nnan);
                ck_assert_int_eq(l2.nx, 1100);
                ck_assert_int_eq(l2.ny, 1000);
                size_t p = 0, np = sf_npix(l2.nx, l2.ny); /* one assertion: Check logs each */
                while (p < np && same_float(((float *)raw2)[p], ref.data[p]))
                    p++;
                ck_assert_msg(p == np, "BITPIX %d bscale %g plane %d pixel %zu, %d threads: decoded as "
                              "read %.9g, after %.9g", k->bitpix, k->bscale, plane + 1, p, t,
                              ((float *)raw2)[p < np ? p : 0], ref.data[p < np ? p : 0]);
                sf_fits_info_free(&in2);
                free(keep2);
                keep2 = NULL;
            }
            omp_set_num_threads(2);
            sf_fits_info_free(&in1);
            free(keep1);
        }
    }
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) { /* 8 and 2 bytes: raw */
        const char *path = write_kind(&kinds[other[i]], 300, 200, 1, 400 + i);
        sf_fits_info in1, in2;
        sf_raw_layout l1, l2;
        void *raw1 = NULL, *raw2 = NULL, *keep1 = NULL, *keep2 = NULL;
        ck_assert_int_eq(sf_fits_read_raw(path, 0, get_malloc, &keep1, &raw1, &l1, &in1), SF_OK);
        ck_assert_int_eq(sf_fits_read_raw_cpu(path, 0, get_malloc, &keep2, &raw2, &l2, &in2), SF_OK);
        ck_assert_int_eq(l2.decoded, 0);
        ck_assert_int_eq(l2.bitpix, l1.bitpix);
        ck_assert(memcmp(raw1, raw2, sf_raw_bytes(&l1)) == 0);
        sf_fits_info_free(&in1);
        sf_fits_info_free(&in2);
        free(keep1);
        free(keep2);
    }
    {
        const char *path = write_kind(&kinds[12], 1100, 1000, 2, 300); /* the first file again */
        char cmd[1200], trunc[600];
        sf_fits_info in;
        sf_raw_layout l;
        void *raw = NULL, *keep = NULL;
        snprintf(trunc, sizeof trunc, "%s/trunc_big.fits", tmpdir);
        snprintf(cmd, sizeof cmd, "head -c 3000000 '%s' > '%s'", path, trunc);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_ne(sf_fits_read_raw_cpu(trunc, 0, get_malloc, &keep, &raw, &l, &in), SF_OK);
        ck_assert_msg(strstr(sf_errdetail(), "trunc_big.fits") && strstr(sf_errdetail(), "truncated"),
                      "%s", sf_errdetail());
        free(keep);
    }
}
END_TEST

/* GPU decode equals the CPU twin bit for bit; every output element written */
START_TEST(test_gpu_vs_cpu)
{
    sf_gpu *g = sftest_gpu();
    static const int sz[][2] = {{1, 1}, {1, 5}, {7, 1}, {3, 3}, {33, 17}, {257, 3}, {1021, 67}, {0, 0}};
    for (int i = 0; kinds[i].bitpix; i++)
        for (int s = 0; sz[s][0]; s++) {
            const kind *k = &kinds[i];
            const char *path = write_kind(k, sz[s][0], sz[s][1], 1, 900 + 10 * i + s);
            sf_image hc = {0}, hg = {0}, dimg = {0};
            sf_fits_info in;
            sf_raw_layout l;
            void *raw = NULL, *keep = NULL, *draw = NULL;
            long long nbc = -1, nbg = -2;
            size_t bytes;
            ck_assert_int_eq(sf_fits_read_raw(path, 0, get_malloc, &keep, &raw, &l, &in), SF_OK);
            bytes = sf_raw_bytes(&l);
            ck_assert_int_eq(sf_image_alloc(&hc, l.nx, l.ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_image_alloc(&hg, l.nx, l.ny, SF_HOST, NULL), SF_OK);
            ck_assert_int_eq(sf_image_alloc(&dimg, l.nx, l.ny, SF_DEVICE, g), SF_OK);
            ck_assert_int_eq(sf_gpu_malloc(g, &draw, (bytes + 15) & ~(size_t)15), SF_OK);
            ck_assert_int_eq(sf_gpu_to_device(g, draw, raw, bytes), SF_OK);
            sftest_poison(g, dimg.data, sf_npix(l.nx, l.ny) * sizeof(float));
            ck_assert_int_eq(sf_decode_cpu(raw, &l, &hc, &nbc), SF_OK);
            ck_assert_msg(sf_decode_gpu(g, draw, &l, &dimg, &nbg) == SF_OK, "%s", sf_errdetail());
            ck_assert_int_eq(sf_image_download(g, &dimg, &hg), SF_OK);
            ck_assert_msg(nbc == nbg, "BITPIX %d %dx%d: %lld blank on the CPU, %lld on the GPU",
                          k->bitpix, l.nx, l.ny, nbc, nbg);
            for (size_t p = 0; p < sf_npix(l.nx, l.ny); p++) {
                uint32_t ug, uc;
                memcpy(&ug, &hg.data[p], 4);
                memcpy(&uc, &hc.data[p], 4);
                ck_assert_msg(ug == uc, "BITPIX %d bscale %g %dx%d pixel %zu: GPU %.9g (0x%08x), CPU %.9g (0x%08x)",
                              k->bitpix, k->bscale, l.nx, l.ny, p, hg.data[p], ug, hc.data[p], uc);
            }
            sf_gpu_free(g, draw);
            sf_image_free(&dimg, g);
            sf_image_free(&hc, NULL);
            sf_image_free(&hg, NULL);
            sf_fits_info_free(&in);
            free(keep);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decode");
    TCase *cpu = tcase_create("cpu"), *gpu = tcase_create("gpu");
    TCase *gc[1] = {gpu};
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sf_decode_XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    tcase_add_test(cpu, test_cpu_vs_cfitsio);
    tcase_add_test(cpu, test_cpu_rule);
    tcase_add_test(cpu, test_cpu_paths);
    tcase_add_test(cpu, test_cpu_read_decoded);
    tcase_set_timeout(cpu, 60);
    tcase_add_test(gpu, test_gpu_vs_cpu);
    tcase_set_timeout(gpu, 120);
    suite_add_tcase(s, cpu);
    int rc = sftest_main(s, gc, 1);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return rc;
}
