/* Stage `convolve`, CPU twin: direct (rank-one row+column passes through a
 * ring of filtered rows, double accumulators; or the general 2-D sums, the
 * GPU's fused multiply-add chains in float, convolve_fma.c, through a ring
 * of extended rows; OpenMP over rows) and FFT (FFTW single precision:
 * overlap-save tiles with 2-D
 * plans when a tile is at most half the padded image, else the whole
 * padded image by 1-D row and column plans; either way every tile, row or
 * column chunk is done by the same plan, so the result does not depend on
 * the thread count; cached plans and kernel spectra), with the edge modes
 * and the NaN-normalised convolution that convolve.h defines.
 *
 * In this file, in order: the edge modes and the extended rows (edge_map,
 * ext_val, src_row); the direct methods' pieces (row_taps, col_taps, the NaN
 * footprint, pixel_direct for one pixel, finish/finish_row for the NaN
 * normalisation); direct_2d; row_pass and direct_separable; the FFT (the
 * cache of fft_entry: plans and kernel spectrum per padded size or tile and
 * kernel; fft2_fwd/fft2_inv, the whole image's 2-D transforms; cmul; fft_pass,
 * one whole-image convolution; fft_tile_side and tile_pass, the tiles;
 * conv_fft, the method with its NaN pass); the method picker,
 * sf_convolve_pick; and the stage, sf_convolve_cpu. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fftw3.h>
#include "simd.h"
#include "convolve_fma.h"
#include "skyfind/convolve.h"

enum { EXT_VALUE, EXT_CLEAN, EXT_VALID }; /* v; v with NaN as 0; 1 valid, 0 NaN */

/* Index m of the extended line mapped into [0, n) by the edge mode; -1 for
 * a zero-mode pixel outside (a valid zero). Periodic for any m. */
static inline long edge_map(long m, long n, int edge)
{
    long r;
    if (m >= 0 && m < n)
        return m;
    switch (edge) {
    case SF_EDGE_NEAREST:
        return m < 0 ? 0 : n - 1;
    case SF_EDGE_REFLECT:
        r = m % (2 * n);
        r += r < 0 ? 2 * n : 0;
        return r < n ? r : 2 * n - 1 - r;
    case SF_EDGE_WRAP:
        r = m % n;
        return r < 0 ? r + n : r;
    default:
        return -1;
    }
}

static inline float ext_val(float v, int what)
{
    if (what == EXT_CLEAN)
        return isnan(v) ? 0.0f : v;
    if (what == EXT_VALID)
        return isnan(v) ? 0.0f : 1.0f;
    return v;
}

/* Source row of extended row m (NULL: a zero-mode row outside the image). */
static inline const float *src_row(const sf_image *in, long m, int edge)
{
    long sy = edge_map(m, in->ny, edge);
    return sy < 0 ? NULL : in->data + (size_t)sy * in->stride;
}

/* dst[s] = extended row at x = s - lpad, for s in [0, n + lpad + rpad): the
 * general edge path runs over the lpad + rpad border cells only. */
#define DEFINE_EXT_ROW(NAME, T)                                                           \
    static void NAME(T *dst, const float *src, int n, int lpad, int rpad, int edge,      \
                     int what)                                                           \
    {                                                                                    \
        const T out = what == EXT_VALID ? 1 : 0; /* zero mode outside: a valid zero */  \
        if (!src) {                                                                      \
            for (int s = 0; s < n + lpad + rpad; s++)                                    \
                dst[s] = out;                                                            \
            return;                                                                      \
        }                                                                                \
        for (int s = 0; s < lpad; s++) {                                                 \
            long i = edge_map(s - lpad, n, edge);                                        \
            dst[s] = i < 0 ? out : ext_val(src[i], what);                                \
        }                                                                                \
        T *d = dst + lpad;                                                               \
        if (what == EXT_VALUE)                                                           \
            for (int x = 0; x < n; x++)                                                  \
                d[x] = src[x];                                                           \
        else if (what == EXT_CLEAN)                                                      \
            for (int x = 0; x < n; x++)                                                  \
                d[x] = isnan(src[x]) ? 0 : src[x];                                       \
        else                                                                             \
            for (int x = 0; x < n; x++)                                                  \
                d[x] = isnan(src[x]) ? 0 : 1;                                            \
        for (int s = 0; s < rpad; s++) {                                                 \
            long i = edge_map(n + s, n, edge);                                           \
            d[n + s] = i < 0 ? out : ext_val(src[i], what);                              \
        }                                                                                \
    }
DEFINE_EXT_ROW(ext_row_d, double)
DEFINE_EXT_ROW(ext_row_f, float)

/* acc[x] += sum_t w[t] * e[x + t], x in [0, nx): the interior loop, blocked so
 * that XB accumulators stay in registers across the taps. */
#define XB 16
SF_SIMD_BODY void row_taps_body(double *restrict acc, const double *restrict e,
                               const double *restrict w, int nt, int nx)
{
    int x = 0;
    for (; x + XB <= nx; x += XB) {
        double a[XB];
        for (int t = 0; t < XB; t++)
            a[t] = acc[x + t];
        for (int i = 0; i < nt; i++) {
            const double wi = w[i], *p = e + x + i;
            if (wi == 0)
                continue;
            for (int t = 0; t < XB; t++)
                a[t] += wi * p[t];
        }
        for (int t = 0; t < XB; t++)
            acc[x + t] = a[t];
    }
    for (; x < nx; x++) {
        double a = acc[x];
        for (int i = 0; i < nt; i++)
            if (w[i] != 0)
                a += w[i] * e[x + i];
        acc[x] = a;
    }
}
SF_SIMD_KERNEL_VOID(row_taps,
                    (double *restrict acc, const double *restrict e, const double *restrict w,
                     int nt, int nx),
                    (acc, e, w, nt, nx))

/* acc[x] += sum_j c[j] * r[j][x] (rows of float): row by row over chunks
 * of XC pixels, so the accumulators stay in L1 and the loop vectorises. */
#define XC 512
SF_SIMD_BODY void col_taps_body(double *restrict acc, const float *const *r, const double *c, int nt,
                               int nx)
{
    for (int x0 = 0; x0 < nx; x0 += XC) {
        int n = nx - x0 < XC ? nx - x0 : XC;
        double *restrict a = acc + x0;
        for (int j = 0; j < nt; j++) {
            const double cj = c[j];
            const float *restrict p = r[j] + x0;
            if (cj == 0)
                continue;
            for (int t = 0; t < n; t++)
                a[t] += cj * p[t];
        }
    }
}
SF_SIMD_KERNEL_VOID(col_taps,
                    (double *restrict acc, const float *const *r, const double *c, int nt, int nx),
                    (acc, r, c, nt, nx))

/* flag[y*nx+x] = 1 when a NaN lies in the kernel footprint of (x, y) (the
 * extended image as the edge mode makes it): column counts slid down the
 * rows, window sums slid along them. */
static sf_status nan_footprint(const sf_image *in, int kx, int ky, int edge, uint8_t *flag)
{
    const int nx = in->nx, ny = in->ny, lx = kx - 1 - kx / 2, ly = ky - 1 - ky / 2;
    const int ne = nx + kx - 1;
    int bad = 0;
#pragma omp parallel reduction(| : bad)
    {
        float *v = malloc((size_t)ne * sizeof *v);
        int *cc = calloc((size_t)ne, sizeof *cc);
        int nth = omp_get_num_threads(), id = omp_get_thread_num();
        int y0 = (int)((long)ny * id / nth), y1 = (int)((long)ny * (id + 1) / nth);
        if (!v || !cc)
            bad = 1;
        for (int y = y0; y < y1 && !bad; y++) {
            if (y == y0) /* rows y0 - ly .. y0 + ky/2 */
                for (long m = (long)y - ly; m <= (long)y + ky / 2; m++) {
                    ext_row_f(v, src_row(in, m, edge), nx, lx, kx / 2, edge, EXT_VALID);
                    for (int s = 0; s < ne; s++)
                        cc[s] += v[s] == 0;
                }
            else {
                ext_row_f(v, src_row(in, (long)y - 1 - ly, edge), nx, lx, kx / 2, edge, EXT_VALID);
                for (int s = 0; s < ne; s++)
                    cc[s] -= v[s] == 0;
                ext_row_f(v, src_row(in, (long)y + ky / 2, edge), nx, lx, kx / 2, edge, EXT_VALID);
                for (int s = 0; s < ne; s++)
                    cc[s] += v[s] == 0;
            }
            long win = 0;
            for (int s = 0; s < kx - 1; s++)
                win += cc[s];
            uint8_t *f = flag + (size_t)y * nx;
            for (int x = 0; x < nx; x++) {
                win += cc[x + kx - 1];
                f[x] = win > 0;
                win -= cc[x];
            }
        }
        free(v);
        free(cc);
    }
    return bad ? sf_fail(SF_ERR_NOMEM, "convolve: out of memory (NaN footprint)") : SF_OK;
}

/* One output pixel by the definition (general edge path, double sums). */
static void pixel_direct(const sf_image *in, const sf_kernel *k, int edge, int x, int y,
                         double *num, double *den)
{
    double n = 0, d = 0;
    for (int j = 0; j < k->ny; j++) {
        const float *r = src_row(in, (long)y - j + k->ny / 2, edge);
        for (int i = 0; i < k->nx; i++) {
            double w = k->w[(size_t)j * k->nx + i];
            long sx = edge_map((long)x - i + k->nx / 2, in->nx, edge);
            float v = r && sx >= 0 ? r[sx] : 0.0f; /* zero mode outside: a valid zero */
            if (!isnan(v)) {
                n += w * v;
                d += w;
            }
        }
    }
    *num = n;
    *den = d;
}

/* The output pixel from num and den (NaN-normalised when flagged). */
static inline float finish(float v, double num, double den, int nanmode, const uint8_t *flag,
                           size_t idx, double sum)
{
    if (!nanmode || !flag[idx])
        return (float)num;
    if (isnan(v) || den == 0)
        return NAN;
    return (float)(num / den * sum);
}

/* Output row y of the direct methods from its sums (den: with nanmode). */
static void finish_row(const sf_image *in, sf_image *out, int y, const double *acc,
                       const double *den, int nanmode, const uint8_t *flag, double sum)
{
    const float *iv = in->data + (size_t)y * in->stride;
    float *o = out->data + (size_t)y * out->stride;
    for (int x = 0; x < in->nx; x++)
        o[x] = finish(iv[x], acc[x], nanmode ? den[x] : 0, nanmode, flag, (size_t)y * in->nx + x,
                      sum);
}

/* ---- direct, general 2-D: the GPU's sums (convolve_fma.c) ---------------- */

/* Ring row dst (rw floats): image row r extended by the edge mode, then zeros
 * (the vector steps read past the row's nx + kx - 1). */
static void ring_row(float *dst, size_t rw, const float *r, int nx, int kx, int edge, int what)
{
    ext_row_f(dst, r, nx, kx - 1 - kx / 2, kx / 2, edge, what);
    memset(dst + nx + kx - 1, 0, (rw - (size_t)(nx + kx - 1)) * sizeof *dst);
}

/* Each thread takes a band of whole output rows (SF_CONV2D_RB at a time) and
 * keeps the extended input rows (edge mode applied, NaN as 0; with nanmode
 * also the validity rows) of its window in a ring of SF_CONV2D_RB + ky - 1
 * slots, image row m in slot m mod the ring's size, so every image row is
 * extended once per thread. sf_conv2d_band sums a band into a block of rows
 * that finish turns into the output (the NaN normalisation). Each pixel's
 * sum is the same chain of operations whatever the band, the thread count or
 * the build, so the output is too. */
static sf_status direct_2d(const sf_image *in, const sf_kernel *k, int edge, int nanmode,
                           const uint8_t *flag, sf_image *out)
{
    const int nx = in->nx, ny = in->ny, kx = k->nx, ky = k->ny;
    const int top = ky - 1 - ky / 2; /* input rows above an output row */
    const int nxv = (nx + SF_CONV2D_VEC - 1) / SF_CONV2D_VEC * SF_CONV2D_VEC;
    const int ring = SF_CONV2D_RB + ky - 1, dbl = (long)kx * ky > SF_CONV_FLOAT_ROWS_MAX;
    const size_t rw = (size_t)nxv + kx - 1 + SF_CONV2D_VEC; /* a ring row, with slack */
    float *wf = malloc(sf_npix(kx, ky) * sizeof *wf);
    int bad = 0;
    if (!wf)
        return sf_fail(SF_ERR_NOMEM, "convolve: out of memory (kernel copy)");
    for (int j = 0; j < ky; j++) /* flipped in both axes: wf[kr][t] = w[ky-1-kr][kx-1-t] */
        for (int i = 0; i < kx; i++)
            wf[(size_t)j * kx + i] = k->w[(size_t)(ky - 1 - j) * kx + (kx - 1 - i)];
#pragma omp parallel reduction(| : bad)
    {
        const int nth = omp_get_num_threads(), id = omp_get_thread_num();
        const int nb = (ny + SF_CONV2D_RB - 1) / SF_CONV2D_RB; /* bands, shared out in order */
        const int b0 = (int)((long)nb * id / nth), b1 = (int)((long)nb * (id + 1) / nth);
        const int nset = nanmode ? 2 : 1;
        float *buf = malloc(((size_t)ring * nset * rw + (size_t)SF_CONV2D_RB * nxv * 2) *
                            sizeof *buf); /* the ring, then the band's sums and weight sums */
        long *held = malloc((size_t)ring * sizeof *held); /* the image row in each slot */
        const float **rv = malloc((size_t)ring * 2 * sizeof *rv);
        if (!buf || !held || !rv)
            bad = 1;
        for (int i = 0; !bad && i < ring; i++)
            held[i] = LONG_MIN;
        for (int b = b0; b < b1 && !bad; b++) {
            const int y0 = b * SF_CONV2D_RB, rb = ny - y0 < SF_CONV2D_RB ? ny - y0 : SF_CONV2D_RB;
            float *acc = buf + (size_t)ring * nset * rw, *den = acc + (size_t)SF_CONV2D_RB * nxv;
            for (int jr = 0; jr < rb + ky - 1; jr++) {
                const long m = (long)y0 - top + jr;
                const int slot = (int)(((m % ring) + ring) % ring);
                float *ev = buf + (size_t)slot * nset * rw, *em = ev + rw;
                if (held[slot] != m) {
                    const float *r = src_row(in, m, edge);
                    ring_row(ev, rw, r, nx, kx, edge, nanmode ? EXT_CLEAN : EXT_VALUE);
                    if (nanmode)
                        ring_row(em, rw, r, nx, kx, edge, EXT_VALID);
                    held[slot] = m;
                }
                rv[jr] = ev;
                if (nanmode)
                    rv[ring + jr] = em;
            }
            if (!nanmode) { /* the sums are the output */
                sf_conv2d_band(rv, wf, kx, ky, nx, rb, dbl, out->data + (size_t)y0 * out->stride,
                               out->stride);
                continue;
            }
            sf_conv2d_band(rv, wf, kx, ky, nx, rb, dbl, acc, nxv);
            sf_conv2d_band(rv + ring, wf, kx, ky, nx, rb, dbl, den, nxv);
            for (int r = 0; r < rb; r++) {
                const int y = y0 + r;
                const float *iv = in->data + (size_t)y * in->stride, *a = acc + (size_t)r * nxv,
                            *d = den + (size_t)r * nxv;
                float *o = out->data + (size_t)y * out->stride;
                for (int x = 0; x < nx; x++)
                    o[x] = finish(iv[x], a[x], d[x], 1, flag, (size_t)y * nx + x, k->sum);
            }
        }
        free(buf);
        free(held);
        free(rv);
    }
    free(wf);
    return bad ? sf_fail(SF_ERR_NOMEM, "convolve: out of memory (direct row buffers)") : SF_OK;
}

/* ---- direct, rank one: a row pass into float rows, then a column pass ---- */

/* The row pass of image row sy (what: EXT_VALUE/CLEAN/VALID) into float row
 * t: sum_i rf[i] e[x + i] in doubles, rounded to float. */
static void row_pass(const sf_image *in, int sy, int edge, int what, const double *rf, int kx,
                     double *e, double *acc, float *t)
{
    const int nx = in->nx, lx = kx - 1 - kx / 2;
    ext_row_d(e, in->data + (size_t)sy * in->stride, nx, lx, kx / 2, edge, what);
    memset(acc, 0, (size_t)nx * sizeof *acc);
    row_taps(acc, e, rf, kx, nx);
    for (int x = 0; x < nx; x++)
        t[x] = (float)acc[x];
}

/* Each thread takes a band of output rows and keeps the row pass of the
 * image rows its window needs in a ring of ky rows (two with nanmode: values
 * and valid counts), row m in slot m % ky, so every image row is filtered
 * once per band and no image-sized intermediate is written (at 2048^2 that
 * was 16 MB whose first touch cost as much as the arithmetic). Rows whose
 * window leaves the image (the edge modes fold it) take their rows in a
 * separate set. The same sums in the same order as a whole intermediate
 * gives, so the same bits. */
static sf_status direct_separable(const sf_image *in, const sf_kernel *k, int edge, int nanmode,
                                  const uint8_t *flag, sf_image *out)
{
    const int nx = in->nx, ny = in->ny, kx = k->nx, ky = k->ny, h = ky / 2;
    const int ne = nx + kx - 1;
    /* ring rows padded by 64 bytes past a multiple of 64, so that the column
     * pass's ky rows do not all fall in the same cache sets */
    const size_t ts = ((size_t)nx + 15) / 16 * 16 + 16;
    double rf[SF_KERNEL_MAX], cf[SF_KERNEL_MAX], rowsum = 0;
    float *ones = nanmode && edge == SF_EDGE_ZERO ? malloc((size_t)nx * sizeof *ones) : NULL;
    int bad = 0;
    if (nanmode && edge == SF_EDGE_ZERO && !ones)
        return sf_fail(SF_ERR_NOMEM, "convolve: out of memory (separable pass)");
    for (int i = 0; i < kx; i++) {
        rf[i] = k->row[kx - 1 - i];
        rowsum += k->row[i];
    }
    for (int j = 0; j < ky; j++)
        cf[j] = k->col[j];
    for (int x = 0; ones && x < nx; x++)
        ones[x] = (float)rowsum; /* zero mode: the row pass of a row of valid zeros */
#pragma omp parallel reduction(| : bad)
    {
        const int np = 1 + nanmode;
        double *e = malloc((size_t)ne * sizeof *e), *acc = malloc((size_t)nx * sizeof *acc);
        double *rs = malloc((size_t)nx * sizeof *rs); /* the row pass's sums */
        double *den = nanmode ? malloc((size_t)nx * sizeof *den) : NULL;
        const float **rp = malloc((size_t)ky * sizeof *rp);
        /* ring: np * ky rows; edge set: np * ky rows; tags of the ring's rows */
        float *ring = malloc((size_t)2 * np * ky * ts * sizeof *ring);
        int *tag = malloc((size_t)ky * sizeof *tag);
        const int nth = omp_get_num_threads(), id = omp_get_thread_num();
        const int y0 = (int)((long)ny * id / nth), y1 = (int)((long)ny * (id + 1) / nth);
        if (!e || !acc || !rs || !rp || !ring || !tag || (nanmode && !den))
            bad = 1;
        for (int j = 0; !bad && j < ky; j++)
            tag[j] = -1;
        for (int y = y0; y < y1 && !bad; y++) {
            /* the window's image rows are y + h - ky + 1 .. y + h */
            const int inside = y + h - ky + 1 >= 0 && y + h < ny;
            double cz[SF_KERNEL_MAX];
            int nt = 0;
            for (int pass = 0; pass < np; pass++) {
                const int what = pass ? EXT_VALID : nanmode ? EXT_CLEAN : EXT_VALUE;
                float *set = ring + (size_t)(inside ? pass : np + pass) * ky * ts;
                /* the rows of the window: missing ring rows (or the edge
                 * set's rows) filtered, then listed in tap order */
                nt = 0;
                for (int j = 0; j < ky; j++) {
                    const long sy = edge_map((long)y - j + h, ny, edge);
                    float *t;
                    if (sy < 0) { /* zero mode outside: zero values, valid zeros */
                        if (pass) {
                            rp[nt] = ones;
                            cz[nt++] = cf[j];
                        }
                        continue;
                    }
                    if (inside) { /* sy == y - j + h: the ring's slot */
                        t = set + (size_t)(sy % ky) * ts;
                        if (tag[sy % ky] != (int)sy)
                            row_pass(in, (int)sy, edge, what, rf, kx, e, rs, t);
                    } else {
                        t = set + (size_t)j * ts;
                        row_pass(in, (int)sy, edge, what, rf, kx, e, rs, t);
                    }
                    rp[nt] = t;
                    cz[nt++] = cf[j];
                }
                if (inside && pass == np - 1) /* both sets hold the window now */
                    for (int j = 0; j < ky; j++)
                        tag[(y - j + h) % ky] = y - j + h;
                if (pass) {
                    memset(den, 0, (size_t)nx * sizeof *den);
                    col_taps(den, rp, cz, nt, nx);
                } else {
                    memset(acc, 0, (size_t)nx * sizeof *acc);
                    col_taps(acc, rp, cz, nt, nx);
                }
            }
            finish_row(in, out, y, acc, den, nanmode, flag, k->sum);
        }
        free(e);
        free(acc);
        free(rs);
        free(den);
        free(rp);
        free(ring);
        free(tag);
    }
    free(ones);
    return bad ? sf_fail(SF_ERR_NOMEM, "convolve: out of memory (separable row buffers)") : SF_OK;
}

/* ---- FFT: plans and kernel spectra cached per padded size and kernel ---- */

#define FFT_CACHE_MAX 8                     /* entries kept */
#define FFT_CACHE_BYTES ((size_t)512 << 20) /* kernel spectra kept, in all */
/* FFT den is recomputed directly where |den| < FFT_DEN_RECHECK * (its FFT
 * rounding error, measured where den must equal the kernel sum): there the
 * ratio num/den would lose more than ~1e-4 to rounding, and den == 0 must be
 * exact. */
#define FFT_DEN_RECHECK 1e4

/* The 2-D transforms are made of 1-D ones: real rows (r2c, c2r) and
 * complex columns in chunks of FFT_COLS (c2c, strided), each plan made for
 * one row or one chunk and run by the stage's OpenMP threads over all of
 * them. Every row and every chunk is computed by the same plan whatever the
 * number of threads, so the filtered image is the same to the bit with 1 or
 * 16 threads (FFTW's own threaded 2-D plans are not: their plan, and the
 * rounding, depend on the thread count). */
#define FFT_COLS 16

typedef struct {
    int px, py, kx, ky;
    int rp, cp;            /* row pitches: real rows (px rounded up to 8 floats) and
                              spectrum rows (px/2+1 rounded up to 4 complex), so every
                              row starts 32-byte aligned: FFTW's SIMD codelets then
                              run (unaligned rows take ~2.7 times longer) */
    float *kw;             /* the kernel's weights: the key */
    fftwf_complex *kspec;  /* its spectrum divided by px*py (py rows of cp) */
    fftwf_plan rfwd, rinv; /* one row: r2c, c2r */
    fftwf_plan cfwd, cinv; /* FFT_COLS columns: forward, backward */
    fftwf_plan cfwd1, cinv1; /* the last (px/2+1) % FFT_COLS columns, if any */
    int tile;              /* a tile entry: px = py = F, 2-D plans, rp = F, cp = F/2+1 */
    fftwf_plan tfwd, tinv; /* a tile's 2-D r2c and c2r */
    size_t bytes;
    int refs, cached;
    unsigned long used;
} fft_entry;

static pthread_mutex_t fft_lock = PTHREAD_MUTEX_INITIALIZER;
static fft_entry *fft_cache[FFT_CACHE_MAX];
static unsigned long fft_tick;

static void fft_entry_free(fft_entry *e) /* under fft_lock (the planner is not thread safe) */
{
    if (!e)
        return;
    fftwf_plan *pl[] = {&e->rfwd, &e->rinv, &e->cfwd, &e->cinv, &e->cfwd1, &e->cinv1, &e->tfwd,
                        &e->tinv};
    for (size_t i = 0; i < sizeof pl / sizeof pl[0]; i++)
        if (*pl[i])
            fftwf_destroy_plan(*pl[i]);
    fftwf_free(e->kspec);
    free(e->kw);
    free(e);
}

/* Forward: r (py rows of px reals at pitch rp, rows from y_used on all
 * zero) -> s (py rows of px/2+1 at pitch cp; the pitch's padding is zero). */
static void fft2_fwd(const fft_entry *e, float *r, fftwf_complex *s, int y_used)
{
    const int px = e->px, py = e->py, rp = e->rp, cp = e->cp, nc1 = px / 2 + 1;
    const int nch = (nc1 + FFT_COLS - 1) / FFT_COLS;
#pragma omp parallel for schedule(static)
    for (int y = 0; y < py; y++) {
        if (y < y_used) {
            fftwf_execute_dft_r2c(e->rfwd, r + (size_t)y * rp, s + (size_t)y * cp);
            memset(s + (size_t)y * cp + nc1, 0, (size_t)(cp - nc1) * sizeof *s);
        } else {
            memset(s + (size_t)y * cp, 0, (size_t)cp * sizeof *s);
        }
    }
#pragma omp parallel for schedule(static)
    for (int c = 0; c < nch; c++) {
        fftwf_complex *col = s + (size_t)c * FFT_COLS;
        fftwf_execute_dft((c + 1) * FFT_COLS <= nc1 || !e->cfwd1 ? e->cfwd : e->cfwd1, col, col);
    }
}

/* Backward: s (destroyed) -> rows [y0, y1) of r. */
static void fft2_inv(const fft_entry *e, fftwf_complex *s, float *r, int y0, int y1)
{
    const int px = e->px, rp = e->rp, cp = e->cp, nc1 = px / 2 + 1;
    const int nch = (nc1 + FFT_COLS - 1) / FFT_COLS;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < nch; c++) {
        fftwf_complex *col = s + (size_t)c * FFT_COLS;
        fftwf_execute_dft((c + 1) * FFT_COLS <= nc1 || !e->cinv1 ? e->cinv : e->cinv1, col, col);
    }
#pragma omp parallel for schedule(static)
    for (int y = y0; y < y1; y++)
        fftwf_execute_dft_c2r(e->rinv, s + (size_t)y * cp, r + (size_t)y * rp);
}

static fft_entry *fft_entry_new(const sf_kernel *k, int px, int py, int tile)
{
    const int nc1 = px / 2 + 1, rest = nc1 % FFT_COLS;
    const int rp = tile ? px : (px + 7) / 8 * 8, cp = tile ? nc1 : (nc1 + 3) / 4 * 4;
    /* the kernel's rows only (fft2_fwd reads no row past them; a tile's 2-D
     * plans need the whole tile): at 4096^2 a serial clearing of 67 MB,
     * page faults and all, was a third of convolve's time on 16 threads */
    size_t nr = (size_t)rp * (tile ? py : k->ny), nc = (size_t)py * cp;
    /* ESTIMATE: the arrays are not touched. The chunks of columns start at
     * multiples of FFT_COLS complex numbers, so as aligned as the buffer;
     * the rows are when their lengths keep 32-byte alignment, otherwise
     * their plans must not assume it. */
    const unsigned fl = FFTW_ESTIMATE;
    fft_entry *e = calloc(1, sizeof *e);
    float *r = fftwf_alloc_real(nr);
    if (!e || !r || !(e->kw = malloc(sf_npix(k->nx, k->ny) * sizeof(float))) ||
        !(e->kspec = fftwf_alloc_complex(nc)))
        goto fail;
    e->px = px;
    e->py = py;
    e->rp = rp;
    e->cp = cp;
    e->kx = k->nx;
    e->ky = k->ny;
    e->bytes = nc * sizeof(fftwf_complex);
    e->tile = tile;
    memcpy(e->kw, k->w, sf_npix(k->nx, k->ny) * sizeof(float));
    if (tile) { /* one F x F tile, FFTW's own 2-D plans (one thread each) */
        if (!(e->tfwd = fftwf_plan_dft_r2c_2d(py, px, r, e->kspec, fl)) ||
            !(e->tinv = fftwf_plan_dft_c2r_2d(py, px, e->kspec, r, fl | FFTW_DESTROY_INPUT)))
            goto fail;
        memset(r, 0, nr * sizeof *r);
        for (int j = 0; j < k->ny; j++)
            memcpy(r + (size_t)j * rp, k->w + (size_t)j * k->nx, (size_t)k->nx * sizeof *r);
        fftwf_execute_dft_r2c(e->tfwd, r, e->kspec);
        goto scale;
    }
    e->rfwd = fftwf_plan_many_dft_r2c(1, &px, 1, r, NULL, 1, rp, e->kspec, NULL, 1, cp, fl);
    e->rinv = fftwf_plan_many_dft_c2r(1, &px, 1, e->kspec, NULL, 1, cp, r, NULL, 1, rp,
                                      fl | FFTW_DESTROY_INPUT);
    e->cfwd = fftwf_plan_many_dft(1, &py, nc1 < FFT_COLS ? nc1 : FFT_COLS, e->kspec, NULL, cp, 1,
                                  e->kspec, NULL, cp, 1, FFTW_FORWARD, fl);
    e->cinv = fftwf_plan_many_dft(1, &py, nc1 < FFT_COLS ? nc1 : FFT_COLS, e->kspec, NULL, cp, 1,
                                  e->kspec, NULL, cp, 1, FFTW_BACKWARD, fl);
    if (rest && nc1 > FFT_COLS) { /* the last, partial chunk of columns */
        e->cfwd1 = fftwf_plan_many_dft(1, &py, rest, e->kspec, NULL, cp, 1, e->kspec, NULL, cp, 1,
                                       FFTW_FORWARD, fl);
        e->cinv1 = fftwf_plan_many_dft(1, &py, rest, e->kspec, NULL, cp, 1, e->kspec, NULL, cp, 1,
                                       FFTW_BACKWARD, fl);
        if (!e->cfwd1 || !e->cinv1)
            goto fail;
    }
    if (!e->rfwd || !e->rinv || !e->cfwd || !e->cinv)
        goto fail;
    memset(r, 0, nr * sizeof *r);
    for (int j = 0; j < k->ny; j++)
        memcpy(r + (size_t)j * rp, k->w + (size_t)j * k->nx, (size_t)k->nx * sizeof *r);
    fft2_fwd(e, r, e->kspec, k->ny); /* r -> kspec */
scale:
#pragma omp parallel for schedule(static) if (nc >= (1u << 16))
    for (size_t i = 0; i < nc; i++) { /* each value alone: the same bits on any thread count */
        const float sc = 1.0f / (float)sf_npix(px, py);
        e->kspec[i][0] *= sc;
        e->kspec[i][1] *= sc;
    }
    fftwf_free(r);
    return e;
fail:
    fftwf_free(r);
    fft_entry_free(e);
    return NULL;
}

/* The entry for (kernel, padded size), made if needed; release it with
 * fft_release. NULL when out of memory. */
static fft_entry *fft_acquire(const sf_kernel *k, int px, int py, int tile)
{
    size_t nk = sf_npix(k->nx, k->ny);
    fft_entry *e = NULL;
    pthread_mutex_lock(&fft_lock);
    for (int i = 0; i < FFT_CACHE_MAX && !e; i++) {
        fft_entry *c = fft_cache[i];
        if (c && c->px == px && c->py == py && c->tile == tile && c->kx == k->nx &&
            c->ky == k->ny && memcmp(c->kw, k->w, nk * sizeof(float)) == 0)
            e = c;
    }
    if (!e && (e = fft_entry_new(k, px, py, tile))) {
        /* evict the least recently used idle entries while full or too big */
        size_t total = e->bytes;
        for (int i = 0; i < FFT_CACHE_MAX; i++)
            total += fft_cache[i] ? fft_cache[i]->bytes : 0;
        for (;;) {
            int slot = -1, idle = -1, used = 0;
            for (int i = 0; i < FFT_CACHE_MAX; i++) {
                if (!fft_cache[i])
                    slot = i;
                else if (!fft_cache[i]->refs &&
                         (idle < 0 || fft_cache[i]->used < fft_cache[idle]->used))
                    idle = i;
                used += fft_cache[i] != NULL;
            }
            if (slot >= 0 && (total <= FFT_CACHE_BYTES || used == 0)) {
                fft_cache[slot] = e;
                e->cached = 1;
                break;
            }
            if (idle < 0)
                break; /* everything in use: this entry lives for one call */
            total -= fft_cache[idle]->bytes;
            fft_entry_free(fft_cache[idle]);
            fft_cache[idle] = NULL;
        }
    }
    if (e) {
        e->refs++;
        e->used = ++fft_tick;
    }
    pthread_mutex_unlock(&fft_lock);
    return e;
}

static void fft_release(fft_entry *e)
{
    pthread_mutex_lock(&fft_lock);
    if (--e->refs == 0 && !e->cached)
        fft_entry_free(e);
    pthread_mutex_unlock(&fft_lock);
}

/* s *= k, complex, in float (the product of two spectra) */
static inline void cmul(fftwf_complex s, const fftwf_complex k)
{
    const float a = s[0], b = s[1], c = k[0], d = k[1];
    s[0] = a * c - b * d;
    s[1] = a * d + b * c;
}

/* s[i] *= k[i], i in [0, n) (both builds, simd.h) */
SF_SIMD_BODY void spec_mul_body(fftwf_complex *restrict s, const fftwf_complex *restrict k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cmul(s[i], k[i]);
}
SF_SIMD_KERNEL_VOID(spec_mul,
                    (fftwf_complex *restrict s, const fftwf_complex *restrict k, size_t n),
                    (s, k, n))

/* res = the padded edge-extended image (what) convolved with the kernel,
 * circularly on px*py, which is linear for px >= nx+kx-1, py >= ny+ky-1:
 * out(x, y) = res[(y + ky-1) * rp + x + kx-1] (rp: the entry's row pitch); only those rows
 * are computed. */
static void fft_pass(const sf_image *in, const sf_kernel *k, int edge, int what,
                     const fft_entry *fe, float *res, fftwf_complex *spec)
{
    const int nx = in->nx, ny = in->ny, kx = k->nx, ky = k->ny, px = fe->px, py = fe->py;
    const int lx = kx - 1 - kx / 2, ly = ky - 1 - ky / 2, ne = nx + kx - 1, rp = fe->rp;
    const size_t nc = (size_t)py * fe->cp;
#pragma omp parallel for schedule(static)
    for (int yy = 0; yy < ny + ky - 1; yy++) { /* the rows below are not read */
        float *r = res + (size_t)yy * rp;
        ext_row_f(r, src_row(in, (long)yy - ly, edge), nx, lx, kx / 2, edge, what);
        memset(r + ne, 0, (size_t)(rp - ne) * sizeof *r);
    }
    (void)px;
    fft2_fwd(fe, res, spec, ny + ky - 1);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nc; i += 4096)
        spec_mul(spec + i, fe->kspec + i, nc - i < 4096 ? nc - i : 4096);
    fft2_inv(fe, spec, res, ky - 1, ny + ky - 1); /* the rows the caller reads */
}

/* The tile side for a kx x ky kernel on an nx x ny image: the smallest
 * power of two of at least 64 and 12 times the kernel's side less one (so a
 * tile's output, F - k + 1 a side, is at least 11/12 of it), or 0 when a
 * tile would not be smaller than half the image's padded side: the whole
 * image is transformed then. */
static int fft_tile_side(int nx, int ny, int kx, int ky)
{
    const int k = kx > ky ? kx : ky, px = sf_fft_size(nx + kx - 1), py = sf_fft_size(ny + ky - 1);
    int f = 64;
    while (f < 12 * (k - 1))
        f *= 2;
    return 2 * f <= (px < py ? px : py) ? f : 0;
}

/* dst (rows of dstride) = the edge-extended image (what) convolved with the
 * kernel, tile by tile: each F x F tile of the extended image (its output,
 * F - k + 1 a side, and the kernel's reach around it) transformed by the
 * entry's 2-D plans, multiplied by the kernel's spectrum and transformed
 * back (overlap-save). Tiles are independent and each is computed by the
 * same plan whatever thread runs it, so the result does not depend on the
 * thread count; against one transform of the whole image they differ in
 * the last bits only (smaller transforms round less). At 2048^2 with a
 * 15x15 kernel the tiles (F 256) took 18 ms of transforms on one thread
 * against about 40 ms for the whole image, and they scale with the
 * threads (the whole image's column passes did 4.3x on 16 cores). Returns
 * nonzero when out of memory. */
static int tile_pass(const sf_image *in, const sf_kernel *k, int edge, int what,
                     const fft_entry *fe, float *dst, size_t dstride)
{
    const int nx = in->nx, ny = in->ny, kx = k->nx, ky = k->ny, F = fe->px, cp = fe->cp;
    const int lx = kx - 1 - kx / 2, ly = ky - 1 - ky / 2, tx = F - kx + 1, ty = F - ky + 1;
    const int ntx = (nx + tx - 1) / tx, nty = (ny + ty - 1) / ty;
    const float outside = what == EXT_VALID ? 1.0f : 0.0f; /* zero mode: a valid zero */
    int bad = 0;
#pragma omp parallel reduction(| : bad)
    {
        float *r = fftwf_alloc_real((size_t)F * F);
        fftwf_complex *sp = fftwf_alloc_complex((size_t)F * cp);
        if (!r || !sp)
            bad = 1;
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntx * nty; t++) {
            const int x0 = (t % ntx) * tx, y0 = (t / ntx) * ty, e0 = x0 - lx;
            if (bad)
                continue;
            /* tile row j, column i: the extended image at (e0 + i, y0 + j - ly) */
            for (int j = 0; j < F; j++) {
                const float *row = src_row(in, (long)y0 + j - ly, edge);
                float *rr = r + (size_t)j * F;
                if (!row) {
                    for (int i = 0; i < F; i++)
                        rr[i] = outside;
                } else if (e0 >= 0 && e0 + F <= nx) {
                    const float *src = row + e0;
                    if (what == EXT_VALUE)
                        memcpy(rr, src, (size_t)F * sizeof *rr);
                    else
                        for (int i = 0; i < F; i++)
                            rr[i] = ext_val(src[i], what);
                } else {
                    for (int i = 0; i < F; i++) {
                        const long m = edge_map((long)e0 + i, nx, edge);
                        rr[i] = m < 0 ? outside : ext_val(row[m], what);
                    }
                }
            }
            fftwf_execute_dft_r2c(fe->tfwd, r, sp);
            spec_mul(sp, fe->kspec, (size_t)F * cp);
            fftwf_execute_dft_c2r(fe->tinv, sp, r);
            for (int y = y0; y < y0 + ty && y < ny; y++)
                memcpy(dst + (size_t)y * dstride + x0,
                       r + (size_t)(y - y0 + ky - 1) * F + kx - 1,
                       (size_t)((x0 + tx < nx ? x0 + tx : nx) - x0) * sizeof *dst);
        }
        fftwf_free(r);
        fftwf_free(sp);
    }
    return bad;
}

static sf_status conv_fft(const sf_image *in, const sf_kernel *k, int edge, int nanmode,
                          const uint8_t *flag, sf_image *out)
{
    const int nx = in->nx, ny = in->ny, kx = k->nx, ky = k->ny;
    const int F = fft_tile_side(nx, ny, kx, ky);
    const int px = F ? F : sf_fft_size(nx + kx - 1), py = F ? F : sf_fft_size(ny + ky - 1);
    fft_entry *fe = fft_acquire(k, px, py, F != 0);
    float *res = NULL, *den = NULL;
    fftwf_complex *spec = NULL;
    size_t dstride = 0;
    double sumabs = 0;
    int bad = 0;
    if (!fe)
        goto nomem;
    if (F) { /* tiles: the values into out, the valid counts into res */
        if (nanmode && !(res = sf_host_alloc(sf_npix(nx, ny) * sizeof *res)))
            goto nomem;
        bad = tile_pass(in, k, edge, nanmode ? EXT_CLEAN : EXT_VALUE, fe, out->data, out->stride);
        if (!bad && nanmode)
            bad = tile_pass(in, k, edge, EXT_VALID, fe, res, (size_t)nx);
        if (bad)
            goto nomem;
        den = res;
        dstride = (size_t)nx;
    } else {
        if (!(res = sf_host_alloc((size_t)fe->rp * py * sizeof *res)) ||
            !(spec = sf_host_alloc((size_t)py * fe->cp * sizeof *spec)))
            goto nomem;
        fft_pass(in, k, edge, nanmode ? EXT_CLEAN : EXT_VALUE, fe, res, spec);
#pragma omp parallel for schedule(static)
        for (int y = 0; y < ny; y++)
            memcpy(out->data + (size_t)y * out->stride,
                   res + (size_t)(y + ky - 1) * fe->rp + kx - 1, (size_t)nx * sizeof(float));
        if (nanmode)
            fft_pass(in, k, edge, EXT_VALID, fe, res, spec);
        den = res + (size_t)(ky - 1) * fe->rp + kx - 1;
        dstride = (size_t)fe->rp;
    }
    if (nanmode) {
        double err = 0;
        for (size_t i = 0; i < sf_npix(kx, ky); i++)
            sumabs += fabs(k->w[i]);
        /* the rounding error of den, from the pixels without NaN under the
         * kernel, where den is the kernel sum */
#pragma omp parallel for reduction(max : err) schedule(static)
        for (int y = 0; y < ny; y++) {
            const float *dr = den + (size_t)y * dstride;
            for (int x = 0; x < nx; x++)
                if (!flag[(size_t)y * nx + x])
                    err = fmax(err, fabs(dr[x] - k->sum));
        }
        const double thr = FFT_DEN_RECHECK * fmax(err, 1e-8 * sumabs);
#pragma omp parallel for schedule(dynamic, 16)
        for (int y = 0; y < ny; y++) {
            const float *iv = in->data + (size_t)y * in->stride;
            const float *dr = den + (size_t)y * dstride;
            float *o = out->data + (size_t)y * out->stride;
            for (int x = 0; x < nx; x++) {
                double num = o[x], dd = dr[x];
                if (!flag[(size_t)y * nx + x])
                    continue; /* no NaN under the kernel: the plain sum */
                if (!isnan(iv[x]) && fabs(dd) < thr)
                    pixel_direct(in, k, edge, x, y, &num, &dd);
                o[x] = finish(iv[x], num, dd, 1, flag, (size_t)y * nx + x, k->sum);
            }
        }
    }
    sf_host_free(spec);
    sf_host_free(res);
    fft_release(fe);
    return SF_OK;
nomem:
    sf_host_free(spec);
    sf_host_free(res);
    if (fe)
        fft_release(fe);
    return sf_fail(SF_ERR_NOMEM, "convolve: out of memory for a %dx%d FFT (image %dx%d, "
                   "kernel %dx%d)", px, py, nx, ny, kx, ky);
}

/* ---- the method picker (sf_convolve_pick, convolve.h) -------------------- */

/* CPU policy (method auto, sf_convolve_cpu). On a CPU with FMA (x86-64
 * with AVX2 and FMA, the build's SIMD dispatch), general kernels take the
 * direct method up to DIRECT_MAX_TAPS, as on the GPU, whose sums
 * they then are bit for bit (convolve_fma.h), and FFT above. Measured with
 * tests/tools/sf_convolve_tool --threads 1 --nan 0 (2026-12-03, the 2-core
 * VM, minimum of 5; H200 host, tests/bench/results/h200-2026-12-03-fma/),
 * 15x15 at 2048^2 (Gaussian 5 x 3.5 px at 30 degrees, sim2048's beam):
 * direct 15.3 ms in AVX-512 against FFT 18-25 ms on the VM, 17.7 against 45
 * on the host; AVX2 + FMA 50 ms on the VM, 34 ms on the host. At 21x21 the
 * FFT wins by 1.6x in AVX-512 (VM, 1024^2 and 2048^2). The rule depends on
 * the CPU only, not on SKYFIND_SIMD, so that variable never changes the
 * output.
 * Without FMA (and for rank-one kernels everywhere) the cost model of the
 * double-precision loops: estimated ns per call,
 *   direct, general:  (CPU_NS_TAP_2D * kx*ky + CPU_NS_PIX_2D) * npix
 *   direct, rank one: (CPU_NS_TAP_SEP * (kx+ky) + CPU_NS_PIX_SEP) * npix
 *   fft:              CPU_NS_FFT * P * log2(P),  P = sf_fft_size(nx+kx-1) * sf_fft_size(ny+ky-1)
 * the cheaper wins. Measured with tests/tools/sf_convolve_tool --repeat 5
 * --threads 1 --nan 0 (minimum of 5 runs after a warm-up that builds the FFTW
 * plan and kernel spectrum) on the 2-core development VM (Intel Xeon 2.5 GHz,
 * AVX-512, GCC 12 -O3, FFTW 3.3.10 with FFTW_ESTIMATE), images of 512^2 to
 * 4096^2 of Gaussian noise:
 *   general direct: 3x3 to 25x25 kernels on 1024^2: 8.1 to 296 ms, a fit of
 *     0.45 ns per tap + 3.7 ns per pixel (within 5% at 2048^2 and 4096^2);
 *   rank one: 5x5 to 53x53 Gaussians on 1024^2: 9.7 to 72.5 ms, 0.62 ns per
 *     tap of the two passes + 3.0 ns per pixel;
 *   fft: 1.6 to 3.7 ns per P*log2(P) (1.6-1.8 for sizes like 560, 1050,
 *     1080; 2.5-3 for 2058, 2100, 4200; 3.4-3.7 for 525 and 1029, whose
 *     factor 7^3 or 3*5^2*7 is slow in FFTW); 2.5 is used.
 * So at 2048^2 direct wins up to about 11x11 general kernels and 43x43
 * rank-one kernels. Two threads speed both methods up by 1.2-1.9x on that
 * (shared, loaded) VM, so the crossover is the same to the noise. */
#define CPU_NS_TAP_2D 0.45
#define CPU_NS_PIX_2D 3.7
#define CPU_NS_TAP_SEP 0.62
#define CPU_NS_PIX_SEP 3.0
#define CPU_NS_FFT 2.5

/* GPU policy, measured on an H100 (tests/bench/bench_convolve, CUDA events,
 * median of 20): rank-one kernels always direct (41 taps at 8192^2: 0.62 ms
 * against 1.60 ms by FFT; 2026-11-22, tests/bench/results/h100-2026-11-22);
 * general kernels direct up to 15 x 15 = 225 taps, FFT above. With the
 * register-blocked 2-D kernel (2026-11-26, tests/bench/results/
 * h100-2026-11-26-convolve-rb): 15 x 15 direct 0.079 / 0.253 / 0.922 ms at
 * 2048^2 / 4096^2 / 8192^2 against FFT 0.105 / 0.397 / 1.476; 17 x 17
 * direct 0.112 / 0.388 / 1.453 against FFT 0.108 / 0.399 / 1.478 (even);
 * 21 x 21 direct 0.146 / 0.514 / 1.935 against FFT 0.112 / 0.407 / 1.492.
 * (Before it, 15 x 15 took 0.110 ms at 2048^2 and the FFT won there above
 * 13 x 13.) */
#define DIRECT_MAX_TAPS 225 /* both backends (with FMA on the CPU) */

int sf_convolve_pick(const sf_kernel *k, int nx, int ny, int gpu)
{
    int sep = k->row && k->col;
    if (k->nx > SF_KERNEL_MAX || k->ny > SF_KERNEL_MAX)
        return SF_CONV_FFT; /* the direct methods do not take it */
    if (gpu)
        return sep || (long)k->nx * k->ny <= DIRECT_MAX_TAPS ? SF_CONV_DIRECT : SF_CONV_FFT;
    if (!sep && sf_simd_hw_level() >= SF_SIMD_AVX2_FMA)
        return (long)k->nx * k->ny <= DIRECT_MAX_TAPS ? SF_CONV_DIRECT : SF_CONV_FFT;
    double npix = (double)nx * ny;
    double p = (double)sf_fft_size(nx + k->nx - 1) * sf_fft_size(ny + k->ny - 1);
    double direct = sep ? (CPU_NS_TAP_SEP * (k->nx + k->ny) + CPU_NS_PIX_SEP) * npix
                        : (CPU_NS_TAP_2D * (double)k->nx * k->ny + CPU_NS_PIX_2D) * npix;
    double fft = CPU_NS_FFT * p * log2(p > 2 ? p : 2);
    return direct <= fft ? SF_CONV_DIRECT : SF_CONV_FFT;
}

/* ---- the stage ------------------------------------------------------------ */

sf_status sf_convolve_cpu(const sf_image *in, const sf_kernel *k, int method, int edge, int nan,
                          sf_image *out)
{
    uint8_t *flag = NULL;
    int nanmode = 0;
    sf_status s;
    if (!in || !k || !out || !in->data || !out->data || !k->w)
        return sf_fail(SF_ERR_PARAM, "convolve: missing image, kernel or output");
    if (in->loc != SF_HOST || out->loc != SF_HOST)
        return sf_fail(SF_ERR_PARAM, "sf_convolve_cpu needs host buffers");
    if (in->nx < 1 || in->ny < 1 || out->nx != in->nx || out->ny != in->ny)
        return sf_fail(SF_ERR_PARAM, "convolve: output %dx%d for image %dx%d", out->nx, out->ny,
                       in->nx, in->ny);
    if (in->stride < (size_t)in->nx || out->stride < (size_t)out->nx)
        return sf_fail(SF_ERR_PARAM, "convolve: row stride smaller than the width");
    if (out->data == in->data)
        return sf_fail(SF_ERR_PARAM, "convolve: the output must not be the input buffer");
    if (k->nx < 1 || k->ny < 1)
        return sf_fail(SF_ERR_PARAM, "convolve: kernel size %dx%d", k->nx, k->ny);
    if (edge < SF_EDGE_ZERO || edge > SF_EDGE_WRAP)
        return sf_fail(SF_ERR_PARAM, "convolve: edge mode %d is not zero, nearest, reflect or wrap", edge);
    if (nan < -1 || nan > 1)
        return sf_fail(SF_ERR_PARAM, "convolve: nan %d must be -1 (unknown), 0 or 1", nan);
    if (method == SF_CONV_AUTO)
        method = sf_convolve_pick(k, in->nx, in->ny, 0);
    if (method != SF_CONV_DIRECT && method != SF_CONV_FFT)
        return sf_fail(SF_ERR_PARAM, "convolve: method %d is not auto, direct or fft", method);
    if (method == SF_CONV_DIRECT && (k->nx > SF_KERNEL_MAX || k->ny > SF_KERNEL_MAX))
        return sf_fail(SF_ERR_PARAM, "convolve: kernel %dx%d is larger than %d, the most the "
                       "direct method takes (use method fft or auto)", k->nx, k->ny, SF_KERNEL_MAX);
    if (nan != 0) { /* NaN-normalised only when a NaN is there */
        int any = 0;
#pragma omp parallel for reduction(| : any) schedule(static)
        for (int y = 0; y < in->ny; y++) {
            const float *r = in->data + (size_t)y * in->stride;
            for (int x = 0; x < in->nx; x++)
                any |= isnan(r[x]);
        }
        nanmode = any;
    }
    if (nanmode) {
        if (!(flag = sf_host_alloc(sf_npix(in->nx, in->ny))))
            return sf_fail(SF_ERR_NOMEM, "convolve: out of memory (NaN flags of %dx%d)", in->nx, in->ny);
        if ((s = nan_footprint(in, k->nx, k->ny, edge, flag)) != SF_OK)
            goto done;
    }
    if (method == SF_CONV_FFT)
        s = conv_fft(in, k, edge, nanmode, flag, out);
    else if (k->row && k->col)
        s = direct_separable(in, k, edge, nanmode, flag, out);
    else
        s = direct_2d(in, k, edge, nanmode, flag, out);
done:
    sf_host_free(flag);
    return s;
}
