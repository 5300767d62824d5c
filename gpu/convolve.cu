// Stage `convolve`, GPU version (CPU twin: cpu/convolve.c). Definitions,
// edge modes and NaN handling in include/skyfind/convolve.h; the direct
// kernels in convolve_kernels.cuh.
//
// direct: general kernels up to 24 columns wide, over the whole image:
// direct2d_rb, one block per 64 x 64 output tile, the tile and its halo
// (edge mode applied, NaN replaced by 0) and the flipped weights in shared
// memory, each thread 4 adjacent outputs in 4 rows, every tile row it reads
// loaded into registers once and used for each output row it belongs to;
// the taps of the padding (its width rounded up to 4) are not summed (rb_exact).
// Wider kernels, and the FFT's border bands: direct2d_kernel, one block per
// 64 x (16 x RPT) tile, the weights in constant memory (in shared memory
// above 225 taps, which overflow the constant cache), each thread 4
// adjacent outputs in RPT rows from float4 shared loads. Separable kernels: short ones take a fused
// row-then-column kernel (the image read once and written once); from
// SEP2_MIN rows on, and without NaN, a row pass into scratch and a column
// pass, which costs a second trip through memory but no row sums over the
// tile's vertical halo. A block whose tile holds a NaN also convolves the
// validity mask and renormalises; other blocks run the plain sums.
//
// Rows alone (sf_convolve_rows_gpu): direct2d_rb_rows, the same sums for
// every y0 + i step-th row; convolve noise=measured's clippings of those
// rows and of the image's run beside the whole convolution
// (sf_convolve_noise_gpu, at the end: two side streams of the highest
// priority).
//
// fft: cyclic on the image's own fast size when the kernel fits the direct
// method (the border bands the wrap-around spoils are redone by direct
// tiles), else linear: the edge-extended image zero-padded to >= n + k - 1
// per axis. The kernel's spectrum has its centre at the origin and 1/(lx ly)
// folded in, so the product needs no shift; when the image is its own
// padded grid (no NaN, rows contiguous) R2C reads it and C2R writes the
// output directly. Plans and the spectrum are cached in the context
// (sf_gpu.conv) and reused for images of the same size and the same kernel.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "skyfind/convolve.h"
#include "convolve_kernels.cuh"

struct sf_conv_cache {
    uint64_t cw_hash;          // what c_w holds (0: nothing)
    const float *cw_global;    // c_w's address, for kernels that copy it to shared memory
    int lx, ly;                // the plans' padded size (0: none)
    cufftHandle r2c, c2r;
    uint64_t spec_hash;        // kernel + padded size of spec
    cufftComplex *spec;
    size_t spec_bytes;
};

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t kernel_hash(const sf_kernel *k, int tag, int a, int b)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    int hdr[5] = {k->nx, k->ny, tag, a, b};
    h = hash_bytes(h, hdr, sizeof hdr);
    h = hash_bytes(h, k->w, (size_t)k->nx * k->ny * sizeof(float));
    return h ? h : 1;
}

void sf_conv_cache_free(sf_gpu *g)
{
    sf_conv_cache *c = g ? g->conv : NULL;
    if (!c)
        return;
    if (c->lx) { // plans exist: cuFFT is loaded
        sf_cufft->destroy(c->r2c);
        sf_cufft->destroy(c->c2r);
    }
    sf_gpu_free(g, c->spec);
    free(c);
    g->conv = NULL;
}

static sf_status cache_get(sf_gpu *g, sf_conv_cache **out)
{
    if (!g->conv && !(g->conv = (sf_conv_cache *)calloc(1, sizeof(sf_conv_cache))))
        return sf_fail(SF_ERR_NOMEM, "allocating the convolution cache");
    *out = g->conv;
    return SF_OK;
}

// ---- fft -----------------------------------------------------------------------

// E (ly x lx): the extended image shifted by the kernel's reach, zero beyond
// ny + ky - 1 rows and nx + kx - 1 columns; V: its validity (with NANS).
// E[t][s] = the extended image at (s - ox, t - oy) for t < ey, s < ex, else 0.
static __global__ void fft_pad_kernel(const float *__restrict__ in, size_t sin, int nx, int ny,
                                      int ox, int oy, int ex, int ey, int edge, int lx, int ly,
                                      float *__restrict__ E, float *__restrict__ V)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (s >= lx)
        return;
    float v = 0.f, ok = 0.f;
    if (t < ey && s < ex) {
        bool bad;
        v = ext_value(in, sin, nx, ny, s - ox, t - oy, edge, &bad);
        ok = bad ? 0.f : 1.f;
    }
    E[(size_t)t * lx + s] = v;
    if (V)
        V[(size_t)t * lx + s] = ok;
}

// The kernel on the padded grid times `scale`, unflipped, its pixel (cx, cy)
// at the origin: K[(j - cy) mod ly][(i - cx) mod lx] = scale * w[j][i].
static __global__ void fft_kernel_grid(const float *__restrict__ w, int kx, int ky, int cx, int cy,
                                       float scale, int lx, int ly, float *__restrict__ K)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (s >= lx)
        return;
    const int i = s + cx < lx ? s + cx : s + cx - lx, j = t + cy < ly ? t + cy : t + cy - ly;
    K[(size_t)t * lx + s] = (i < kx && j < ky) ? scale * w[j * kx + i] : 0.f;
}

// a[i] *= k[i] over n complex values, two per 16-byte load.
static __global__ void fft_product(cufftComplex *__restrict__ a, const cufftComplex *__restrict__ k,
                                   size_t n)
{
    const size_t n2 = n / 2, step = (size_t)gridDim.x * blockDim.x;
    float4 *a4 = reinterpret_cast<float4 *>(a);
    const float4 *k4 = reinterpret_cast<const float4 *>(k);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n2; i += step) {
        const float4 x = a4[i], y = __ldg(k4 + i);
        a4[i] = make_float4(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x, x.z * y.z - x.w * y.w,
                            x.z * y.w + x.w * y.z);
    }
    if (n % 2 && blockIdx.x == 0 && threadIdx.x == 0) {
        const cufftComplex x = a[n - 1], y = k[n - 1];
        a[n - 1] = make_float2(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
    }
}

// out[y][x] = R[(y + dy) mod ly][(x + dx) mod lx] (renormalised with RV).
static __global__ void fft_extract(const float *__restrict__ R, const float *__restrict__ RV,
                                   const float *__restrict__ in, size_t sin, int nx, int ny, int dx,
                                   int dy, int lx, int ly, float wsum, float tiny,
                                   float *__restrict__ out, size_t sout)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= nx)
        return;
    const size_t q = (size_t)((y + dy) % ly) * lx + (x + dx) % lx;
    float r = R[q];
    if (RV) {
        const float v = __ldg(in + (size_t)y * sin + x), d = RV[q];
        r = isnan(v) ? v : fabsf(d) > tiny ? r / d * wsum : __int_as_float(0x7fc00000);
    }
    out[(size_t)y * sout + x] = r;
}

static __global__ void any_nan_kernel(const float *__restrict__ in, size_t sin, int nx, int ny,
                                      int *flag)
{
    int bad = 0;
    const size_t n = (size_t)nx * ny;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        bad |= isnan(__ldg(in + (i / nx) * sin + i % nx));
    if (__syncthreads_or(bad) && threadIdx.x == 0)
        atomicOr(flag, 1);
}

// ---- launchers -------------------------------------------------------------------

static int round4(int n) { return (n + 3) & ~3; }

// Shared bytes of the separable kernel for tile height th.
static size_t sep_smem(int th, int ky, int kxp, bool nans)
{
    size_t rows = th + ky - 1, cols = STW + kxp, hrows = th + ((ky + 7) & ~7) + 8;
    size_t b = rows * cols + hrows * STW;
    if (nans)
        b += rows * cols + hrows * STW;
    return b * sizeof(float);
}

// Upload the flipped weights for `sep` (row then column) or the 2-D layout,
// unless c_w already holds them.
static sf_status upload_weights(sf_gpu *g, const sf_kernel *k, int sep, int kxp)
{
    sf_status st = SF_OK;
    sf_conv_cache *c = NULL;
    float *h = NULL;
    size_t n = sep ? (size_t)kxp + ((k->ny + 7) & ~7) : (size_t)k->ny * kxp;
    uint64_t hash = kernel_hash(k, sep ? 1 : 2, kxp, 0);
    SF_TRY(cache_get(g, &c));
    if (c->cw_hash == hash)
        return SF_OK;
    if (!(h = (float *)calloc(n, sizeof(float))))
        return sf_fail(SF_ERR_NOMEM, "convolution weights");
    if (sep) {
        for (int i = 0; i < k->nx; i++)
            h[i] = k->row[k->nx - 1 - i];
        for (int j = 0; j < k->ny; j++)
            h[kxp + j] = k->col[k->ny - 1 - j];
    } else {
        for (int j = 0; j < k->ny; j++)
            for (int i = 0; i < k->nx; i++)
                h[(size_t)j * kxp + i] = k->w[(size_t)(k->ny - 1 - j) * k->nx + (k->nx - 1 - i)];
    }
    SF_CUDA(cudaMemcpyToSymbolAsync(c_w, h, n * sizeof(float), 0, cudaMemcpyHostToDevice, g->stream));
    g->h2d += n * sizeof(float);
    c->cw_hash = hash;
fail:
    free(h);
    return st;
}

// The refusal of a kernel whose tiles need more shared memory than the GPU has.
static sf_status smem_fail(const sf_kernel *k, size_t bytes)
{
    return sf_fail(SF_ERR_PARAM, "convolve: %dx%d kernel needs %zu B of shared memory", k->nx,
                   k->ny, bytes);
}

// Shared bytes of the 2-D kernel with tiles tw wide: the tile (twice with
// NaN) and, with sw, the weights.
static size_t direct2d_smem(const sf_kernel *k, int nans, int rpt, int sw, int tw)
{
    size_t b = (size_t)(4 * NTHREADS / tw * rpt + k->ny - 1) * (tw + round4(k->nx)) * (nans ? 2 : 1);
    if (sw)
        b += (size_t)k->ny * round4(k->nx);
    return b * sizeof(float);
}

typedef void (*direct2d_fn)(const float *, size_t, float *, size_t, int, int, int, int, int, int,
                            int, int, float, tile_map, const float *);

template <bool NANS, int RPT, int TW>
static direct2d_fn direct2d_pick(int dbl, int sw)
{
    return sw ? direct2d_kernel<NANS, RPT, true, true, TW>
               : dbl ? direct2d_kernel<NANS, RPT, true, false, TW>
                     : direct2d_kernel<NANS, RPT, false, false, TW>;
}

// Developer knobs for A/B runs of the benchmark (unset: the measured
// defaults): SKYFIND_CONV_RPT=1|2|4 output rows per thread of the 2-D
// kernel; SKYFIND_CONV_SEP=fused|two separable path; SKYFIND_CONV_TH2=32|64|128
// output rows per block of the two-pass column kernel.
static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

// Output rows per thread of the 2-D direct kernel over a whole image.
static int direct2d_rpt(const sf_kernel *k)
{
    int r = env_int("SKYFIND_CONV_RPT", k->ny <= 9 ? 4 : 2);
    return r == 4 || r == 2 ? r : 1;
}

// The 2-D layout of the weights in c_w, and c_w's address (*wg) for the
// kernels that copy them to shared memory.
static sf_status weights_2d(sf_gpu *g, const sf_kernel *k, int kxp, const float **wg)
{
    sf_status st = SF_OK;
    SF_TRY(upload_weights(g, k, 0, kxp));
    if (!g->conv->cw_global)
        SF_CUDA(cudaGetSymbolAddress((void **)&g->conv->cw_global, c_w));
    *wg = g->conv->cw_global;
fail:
    return st;
}

typedef void (*direct2d_rb_fn)(const float *, size_t, float *, size_t, int, int, int, int, int,
                               int, int, float, const float *);

template <int KXP, int TAPS>
static direct2d_rb_fn direct2d_rb_pick2(int nans, int dbl)
{
    return nans ? (dbl ? direct2d_rb<true, KXP, 4, true, TAPS> : direct2d_rb<true, KXP, 4, false, TAPS>)
                : (dbl ? direct2d_rb<false, KXP, 4, true, TAPS> : direct2d_rb<false, KXP, 4, false, TAPS>);
}

// pad: the padded columns summed as zero taps (KXP - the kernel's width, or 0
// with SKYFIND_CONV_EXACT=0)
template <int KXP>
static direct2d_rb_fn direct2d_rb_pick(int nans, int dbl, int pad)
{
    switch (pad) {
    case 3: return direct2d_rb_pick2<KXP, KXP - 3>(nans, dbl);
    case 2: return direct2d_rb_pick2<KXP, KXP - 2>(nans, dbl);
    case 1: return direct2d_rb_pick2<KXP, KXP - 1>(nans, dbl);
    default: return direct2d_rb_pick2<KXP, KXP>(nans, dbl);
    }
}

// Shared bytes of direct2d_rb: the tile (twice with NaN) and the weights.
static size_t direct2d_rb_smem(const sf_kernel *k, int nans)
{
    const size_t kxp = round4(k->nx);
    return ((size_t)(RBT * 4 + k->ny - 1) * (RBW + kxp) * (nans ? 2 : 1) + k->ny * kxp) * sizeof(float);
}

// The padding direct2d_rb and direct2d_rb_rows leave out of the sums: they
// sum the kernel's own columns only (its width rounded up to 4 less this).
// SKYFIND_CONV_EXACT=0 (a developer knob, for A/B runs) sums the padding's
// zero taps too, as before.
static int rb_exact(const sf_kernel *k);

// Whether direct2d_rb takes the kernel (SKYFIND_CONV_RB=0: never).
static int rb_fits(const sf_gpu *g, const sf_kernel *k, int nans)
{
    return round4(k->nx) <= 24 && direct2d_rb_smem(k, nans) <= g->smem_optin &&
           env_int("SKYFIND_CONV_RB", 1);
}

// Whether the 2-D kernels add their rows' float partials in double: over
// 225 taps (float over 63 x 63 taps would lose ~1e-6 of the result); up to
// 225 in float (test_convolve holds both within 1e-6 relative L2 of the CPU's
// double sums), which makes direct2d_rb at 15 x 15 10% faster: no
// float-to-double conversion and double add per row per output (H200,
// 8192^2: 0.88 -> 0.79 ms).
// SKYFIND_CONV_ROWS_DOUBLE=1 (developer knob, for A/B runs): in double from
// 10 rows, as before.
static int rows_double(const sf_kernel *k)
{
    return k->nx * k->ny > SF_CONV_FLOAT_ROWS_MAX || (k->ny > 9 && env_int("SKYFIND_CONV_ROWS_DOUBLE", 0));
}

// Its sums in double (direct2d_run's choice: the same sums).
static int rb_dbl(const sf_kernel *k) { return rows_double(k); }

static int rb_exact(const sf_kernel *k)
{
    return env_int("SKYFIND_CONV_EXACT", 1) ? round4(k->nx) - k->nx : 0;
}

// The register-blocked 2-D kernel over the whole image, for kernels of up to
// 24 columns whose tile fits (SKYFIND_CONV_RB=0 takes direct2d_kernel
// instead, for A/B runs). *done stays 0 (nothing launched) where it does not
// apply.
static sf_status direct2d_rb_run(sf_gpu *g, const sf_image *in, const sf_kernel *k, int edge,
                                 int nans, sf_image *out, int *done)
{
    sf_status st = SF_OK;
    const int kxp = round4(k->nx), cx = k->nx / 2, cy = k->ny / 2;
    const size_t smem = direct2d_rb_smem(k, nans);
    const int dbl = rb_dbl(k), ex = rb_exact(k);
    direct2d_rb_fn fn = NULL;
    const float *wg = NULL;
    *done = 0;
    if (!rb_fits(g, k, nans))
        return SF_OK;
    switch (kxp) {
    case 4: fn = direct2d_rb_pick<4>(nans, dbl, ex); break;
    case 8: fn = direct2d_rb_pick<8>(nans, dbl, ex); break;
    case 12: fn = direct2d_rb_pick<12>(nans, dbl, ex); break;
    case 16: fn = direct2d_rb_pick<16>(nans, dbl, ex); break;
    case 20: fn = direct2d_rb_pick<20>(nans, dbl, ex); break;
    default: fn = direct2d_rb_pick<24>(nans, dbl, ex); break;
    }
    SF_TRY(weights_2d(g, k, kxp, &wg));
    SF_TRY(sf_gpu_smem_max(g, (const void *)fn, smem));
    {
        const dim3 grid((in->nx + RBW - 1) / RBW, (in->ny + RBT * 4 - 1) / (RBT * 4));
        fn<<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data, out->stride, in->nx,
                                                in->ny, k->nx, k->ny, cx, cy, edge, (float)k->sum, wg);
        SF_LAUNCHED();
    }
    *done = 1;
fail:
    return st;
}

typedef void (*direct2d_rb_rows_fn)(const float *, size_t, float *, size_t, int, int, int, int, int,
                                    int, int, const float *, int, int);

template <int KXP, int TAPS>
static direct2d_rb_rows_fn direct2d_rb_rows_pick2(int dbl)
{
    return dbl ? direct2d_rb_rows<KXP, true, TAPS> : direct2d_rb_rows<KXP, false, TAPS>;
}

template <int KXP>
static direct2d_rb_rows_fn direct2d_rb_rows_pick(int dbl, int pad)
{
    switch (pad) {
    case 3: return direct2d_rb_rows_pick2<KXP, KXP - 3>(dbl);
    case 2: return direct2d_rb_rows_pick2<KXP, KXP - 2>(dbl);
    case 1: return direct2d_rb_rows_pick2<KXP, KXP - 1>(dbl);
    default: return direct2d_rb_rows_pick2<KXP, KXP>(dbl);
    }
}

#define RB_ROWS_THREADS 128 // direct2d_rb_rows: 512 outputs of a row a block
#define RB_ROWS_MAX 65535   // rows (the grid's y): more are declined

// Shared bytes of direct2d_rb_rows: ky input rows and the weights.
static size_t rb_rows_smem(const sf_kernel *k)
{
    const size_t kxp = round4(k->nx);
    return ((size_t)k->ny * (4 * RB_ROWS_THREADS + kxp) + (size_t)k->ny * kxp) * sizeof(float);
}

static int sep_two_pass(const sf_kernel *k, int nans);

// Whether conv_direct filters an image without NaN by direct2d_rb (the
// branches it takes before: the separable kernels), so that its rows are
// direct2d_rb_rows' too.
static int rb_applies(const sf_gpu *g, const sf_kernel *k, int method, int nx, int ny)
{
    if (method == SF_CONV_AUTO)
        method = sf_convolve_pick(k, nx, ny, 1);
    return method == SF_CONV_DIRECT && k->nx <= SF_KERNEL_MAX && k->ny <= SF_KERNEL_MAX &&
           !sep_two_pass(k, 0) && !(k->row && k->col) && rb_fits(g, k, 0) &&
           rb_rows_smem(k) <= g->smem_optin;
}

// Rows y0, y0 + step, ... of the filtered image into out (nx x rows,
// compact), on stream s.
static sf_status rb_rows_run(sf_gpu *g, cudaStream_t s, const sf_image *in, const sf_kernel *k,
                             int edge, int y0, int step, sf_image *out)
{
    sf_status st = SF_OK;
    const int kxp = round4(k->nx), cx = k->nx / 2, cy = k->ny / 2, w = 4 * RB_ROWS_THREADS;
    const int dbl = rb_dbl(k), ex = rb_exact(k);
    const size_t smem = rb_rows_smem(k);
    direct2d_rb_rows_fn fn = NULL;
    const float *wg = NULL;
    switch (kxp) {
    case 4: fn = direct2d_rb_rows_pick<4>(dbl, ex); break;
    case 8: fn = direct2d_rb_rows_pick<8>(dbl, ex); break;
    case 12: fn = direct2d_rb_rows_pick<12>(dbl, ex); break;
    case 16: fn = direct2d_rb_rows_pick<16>(dbl, ex); break;
    case 20: fn = direct2d_rb_rows_pick<20>(dbl, ex); break;
    default: fn = direct2d_rb_rows_pick<24>(dbl, ex); break;
    }
    SF_TRY(weights_2d(g, k, kxp, &wg));
    SF_TRY(sf_gpu_smem_max(g, (const void *)fn, smem));
    fn<<<dim3((in->nx + w - 1) / w, out->ny), RB_ROWS_THREADS, smem, s>>>(
        in->data, in->stride, out->data, out->stride, in->nx, in->ny, k->nx, k->ny, cx, cy, edge, wg,
        y0, step);
    SF_LAUNCHED();
fail:
    return st;
}

// The general 2-D direct kernel: over the whole image in tiles DTW x DTH *
// rpt (bands 0), or over the bands a cyclic FFT result spoils (bands 1) in
// NTW x NTH tiles, one launch.
static sf_status direct2d_run(sf_gpu *g, const sf_image *in, const sf_kernel *k, int edge, int nans,
                              sf_image *out, int rpt, int bands)
{
    sf_status st = SF_OK;
    const int kxp = round4(k->nx), cx = k->nx / 2, cy = k->ny / 2, tw = bands ? NTW : DTW;
    const float wsum = (float)k->sum;
    if (bands)
        rpt = 1;
    while (rpt > 1 && direct2d_smem(k, nans, rpt, 0, tw) > g->smem_optin)
        rpt /= 2;
    const int sw = k->nx * k->ny > 225 && direct2d_smem(k, nans, rpt, 1, tw) <= g->smem_optin;
    const int dbl = sw || rows_double(k), th = 4 * NTHREADS / tw * rpt;
    const size_t smem = direct2d_smem(k, nans, rpt, sw, tw);
    const float *wg = NULL;
    tile_map m = {0, 0, 0, 0, 0, 0};
    dim3 grid((in->nx + tw - 1) / tw, (in->ny + th - 1) / th);
    direct2d_fn fn;
    if (smem > g->smem_optin)
        return smem_fail(k, smem);
    if (bands) {
        const int t = k->ny - 1 - cy, l = k->nx - 1 - cx;
        m.nbx = (in->nx + tw - 1) / tw;
        m.top = (t + th - 1) / th;
        m.bot = (cy + th - 1) / th;
        m.left = (l + tw - 1) / tw;
        m.right = (cx + tw - 1) / tw;
        m.nmid = (in->ny - cy - t + th - 1) / th;
        grid = dim3(m.nbx * (m.top + m.bot) + (m.left + m.right) * m.nmid, 1);
    }
    if (grid.x < 1 || grid.y < 1)
        return SF_OK;
    SF_TRY(weights_2d(g, k, kxp, &wg));
    if (bands)
        fn = nans ? direct2d_pick<true, 1, NTW>(dbl, sw) : direct2d_pick<false, 1, NTW>(dbl, sw);
    else if (rpt == 4)
        fn = nans ? direct2d_pick<true, 4, DTW>(dbl, sw) : direct2d_pick<false, 4, DTW>(dbl, sw);
    else if (rpt == 2)
        fn = nans ? direct2d_pick<true, 2, DTW>(dbl, sw) : direct2d_pick<false, 2, DTW>(dbl, sw);
    else
        fn = nans ? direct2d_pick<true, 1, DTW>(dbl, sw) : direct2d_pick<false, 1, DTW>(dbl, sw);
    SF_TRY(sf_gpu_smem_max(g, (const void *)fn, smem));
    fn<<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data, out->stride, in->nx,
                                            in->ny, k->nx, k->ny, kxp, cx, cy, edge, wsum, m, wg);
    SF_LAUNCHED();
fail:
    return st;
}

// The separable kernel in two passes (no NaN): rows into H (scratch), then
// columns; for long kernels, where the fused kernel's row pass over the
// tile's vertical halo costs more than a second trip through memory.
static int sep_two_pass(const sf_kernel *k, int nans)
{
    const char *v = getenv("SKYFIND_CONV_SEP");
    if (nans || !k->row)
        return 0;
    if (v && *v)
        return !strcmp(v, "two");
    return k->ny >= SEP2_MIN;
}

static size_t sep_h_bytes(int nx, int ny) { return sf_align256((size_t)round4(nx) * ny * sizeof(float)); }

static sf_status conv_sep2(sf_gpu *g, const sf_image *in, const sf_kernel *k, int edge, sf_image *out)
{
    sf_status st = SF_OK;
    const int kxp = round4(k->nx), cx = k->nx / 2, cy = k->ny / 2;
    const int t2 = env_int("SKYFIND_CONV_TH2", 64), th = t2 == 128 || t2 == 32 ? t2 : 64;
    const size_t sh = (size_t)round4(in->nx);
    const size_t smr = (size_t)RH * (RW + kxp) * sizeof(float);
    const size_t smc = (size_t)(th + ((k->ny + 7) & ~7) + 8) * STW * sizeof(float);
    float *H;
    if (smr > g->smem_optin || smc > g->smem_optin)
        return smem_fail(k, smr > smc ? smr : smc);
    SF_TRY(sf_gpu_scratch(g, sep_h_bytes(in->nx, in->ny), (void **)&H));
    SF_TRY(upload_weights(g, k, 1, kxp));
    SF_TRY(sf_gpu_smem_max(g, (const void *)seprow_kernel, smr));
    SF_TRY(sf_gpu_smem_max(g, (const void *)sepcol_kernel, smc));
    seprow_kernel<<<dim3((in->nx + RW - 1) / RW, (in->ny + RH - 1) / RH), NTHREADS, smr, g->stream>>>(
        in->data, in->stride, H, sh, in->nx, in->ny, k->nx, kxp, cx, edge);
    SF_LAUNCHED();
    sepcol_kernel<<<dim3((in->nx + STW - 1) / STW, (in->ny + th - 1) / th), NTHREADS, smc, g->stream>>>(
        H, sh, out->data, out->stride, in->nx, in->ny, k->ny, kxp, cy, th, edge);
    SF_LAUNCHED();
fail:
    return st;
}

static sf_status conv_direct(sf_gpu *g, const sf_image *in, const sf_kernel *k, int edge, int nans,
                             sf_image *out)
{
    sf_status st = SF_OK;
    const int kxp = round4(k->nx), cx = k->nx / 2, cy = k->ny / 2;
    const float wsum = (float)k->sum;
    if (k->nx > SF_KERNEL_MAX || k->ny > SF_KERNEL_MAX)
        return sf_fail(SF_ERR_PARAM, "convolve: a %dx%d kernel is larger than the direct method's %d "
                       "pixels: use method=fft", k->nx, k->ny, SF_KERNEL_MAX);
    if (sep_two_pass(k, nans)) {
        SF_TRY(conv_sep2(g, in, k, edge, out));
    } else if (k->row && k->col) {
        int th = 64;
        while (th > 8 && sep_smem(th, k->ny, kxp, nans) > g->smem_optin)
            th /= 2;
        const size_t smem = sep_smem(th, k->ny, kxp, nans);
        if (smem > g->smem_optin)
            return smem_fail(k, smem);
        SF_TRY(upload_weights(g, k, 1, kxp));
        dim3 grid((in->nx + STW - 1) / STW, (in->ny + th - 1) / th);
        if (nans) {
            SF_TRY(sf_gpu_smem_max(g, (const void *)sep_kernel<true>, smem));
            sep_kernel<true><<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data, out->stride,
                in->nx, in->ny, k->nx, k->ny, kxp, cx, cy, th, edge, wsum);
        } else {
            SF_TRY(sf_gpu_smem_max(g, (const void *)sep_kernel<false>, smem));
            sep_kernel<false><<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data, out->stride,
                in->nx, in->ny, k->nx, k->ny, kxp, cx, cy, th, edge, wsum);
        }
        SF_LAUNCHED();
    } else {
        const int rpt = direct2d_rpt(k);
        int done = 0;
        SF_TRY(direct2d_rb_run(g, in, k, edge, nans, out, &done));
        if (!done)
            SF_TRY(direct2d_run(g, in, k, edge, nans, out, rpt, 0));
    }
fail:
    return st;
}

// Plans for an ly x lx padded grid (cached).
static sf_status plan_fail(cufftResult r, int ly, int lx, const char *kind)
{
    size_t fr = 0, tot = 0;
    cudaGetLastError();
    if (r == CUFFT_ALLOC_FAILED) {
        cudaMemGetInfo(&fr, &tot);
        cudaGetLastError();
        return sf_fail(SF_ERR_GPU_NOMEM, "out of GPU memory: the cuFFT %s plan of %d x %d could not "
                       "allocate its work area (%.1f MB free of %.1f MB)", kind, ly, lx, fr / 1e6, tot / 1e6);
    }
    return sf_fail(SF_ERR_CUFFT, "cufftPlan2d(%d x %d, %s): %s", ly, lx, kind, sf_cufft_name(r));
}

static sf_status fft_plans(sf_gpu *g, sf_conv_cache *c, int lx, int ly)
{
    sf_status st = SF_OK;
    cufftResult r;
    if (c->lx == lx && c->ly == ly)
        return SF_OK;
    if (!sf_cufft_load())
        return SF_ERR_CUFFT;
    if (c->lx) {
        sf_cufft->destroy(c->r2c);
        sf_cufft->destroy(c->c2r);
        c->lx = c->ly = 0;
    }
    // a plan's work area is device memory: a plan that cannot have it is
    // the image's want of GPU memory (SF_ERR_GPU_NOMEM, one file fails or
    // goes to the CPU twin), not a broken GPU
    if ((r = sf_cufft->plan2d(&c->r2c, ly, lx, CUFFT_R2C)) != CUFFT_SUCCESS)
        return plan_fail(r, ly, lx, "R2C");
    if ((r = sf_cufft->plan2d(&c->c2r, ly, lx, CUFFT_C2R)) != CUFFT_SUCCESS) {
        sf_cufft->destroy(c->r2c);
        return plan_fail(r, ly, lx, "C2R");
    }
    c->lx = lx;
    c->ly = ly;
    SF_CUFFT(sf_cufft->set_stream(c->r2c, g->stream));
    SF_CUFFT(sf_cufft->set_stream(c->c2r, g->stream));
fail:
    return st;
}

// The kernel's spectrum on the ly x lx grid (cached), its pixel (cx, cy) at
// the origin and 1 / (lx ly) folded in; K: real scratch.
static sf_status fft_spectrum(sf_gpu *g, sf_conv_cache *c, const sf_kernel *k, int lx, int ly,
                              int cx, int cy, float *K)
{
    sf_status st = SF_OK;
    const uint64_t hash = kernel_hash(k, 3, lx, ly) ^ ((uint64_t)(cx + 1) << 40) ^ ((uint64_t)(cy + 1) << 20);
    const size_t nc = (size_t)ly * (lx / 2 + 1);
    float *dw = NULL;
    if (c->spec && c->spec_hash == hash)
        return SF_OK;
    if (c->spec_bytes < nc * sizeof(cufftComplex)) {
        sf_gpu_free(g, c->spec);
        c->spec = NULL;
        c->spec_bytes = 0;
        SF_TRY(sf_gpu_malloc(g, (void **)&c->spec, nc * sizeof(cufftComplex)));
        c->spec_bytes = nc * sizeof(cufftComplex);
    }
    c->spec_hash = 0;
    SF_TRY(sf_gpu_malloc(g, (void **)&dw, (size_t)k->nx * k->ny * sizeof(float)));
    SF_TRY(sf_gpu_to_device(g, dw, k->w, (size_t)k->nx * k->ny * sizeof(float)));
    fft_kernel_grid<<<dim3(sf_blocks(lx, 256), ly), 256, 0, g->stream>>>(
        dw, k->nx, k->ny, cx, cy, 1.0f / ((float)lx * (float)ly), lx, ly, K);
    SF_LAUNCHED();
    SF_CUFFT(sf_cufft->exec_r2c(c->r2c, K, c->spec));
    SF_CUDA(cudaStreamSynchronize(g->stream)); // dw is freed next
    c->spec_hash = hash;
fail:
    sf_gpu_free(g, dw);
    return st;
}

// The padded grid: cyclic (the image's own fast size; the border bands the
// wrap-around spoils are redone by the direct kernel) when the kernel fits
// the direct method and the image is at least twice the kernel, else
// linear (>= n + k - 1 per axis).
static int fft_cyclic(int nx, int ny, const sf_kernel *k)
{
    return k->nx <= SF_KERNEL_MAX && k->ny <= SF_KERNEL_MAX && nx >= 2 * k->nx && ny >= 2 * k->ny;
}

static void fft_layout(int nx, int ny, const sf_kernel *k, int cyclic, int *lx, int *ly,
                       size_t *real, size_t *cplx)
{
    *lx = sf_fft_size(cyclic ? nx : nx + k->nx - 1);
    *ly = sf_fft_size(cyclic ? ny : ny + k->ny - 1);
    *real = sf_align256((size_t)*lx * *ly * sizeof(float));
    *cplx = sf_align256((size_t)*ly * (*lx / 2 + 1) * sizeof(cufftComplex));
}

static sf_status conv_fft(sf_gpu *g, const sf_image *in, const sf_kernel *k, int edge, int nans,
                          sf_image *out)
{
    sf_status st = SF_OK;
    sf_conv_cache *c = NULL;
    int lx, ly;
    size_t rb, cb;
    char *base;
    const int cyclic = fft_cyclic(in->nx, in->ny, k) && direct2d_smem(k, nans, 1, 0, DTW) <= g->smem_optin &&
                       direct2d_smem(k, nans, 1, 0, NTW) <= g->smem_optin;
    const int cx = k->nx / 2, cy = k->ny / 2;
    fft_layout(in->nx, in->ny, k, cyclic, &lx, &ly, &rb, &cb);
    // the image is its own padded grid (cyclic, a fast size, no NaN, rows
    // contiguous): R2C reads it and C2R writes the output, no copies
    const int io = cyclic && !nans && lx == in->nx && ly == in->ny && in->stride == (size_t)lx &&
                   out->stride == (size_t)lx;
    const size_t nc = (size_t)ly * (lx / 2 + 1);
    const int pb = (int)sf_blocks(nc / 2 + 1, 256), pblocks = pb < 8 * g->sm_count ? pb : 8 * g->sm_count;
    SF_TRY(cache_get(g, &c));
    SF_TRY(sf_gpu_scratch(g, (rb + cb) * (nans ? 2 : 1), (void **)&base));
    {
        float *E = (float *)base, *V = nans ? (float *)(base + rb + cb) : NULL;
        cufftComplex *C = (cufftComplex *)(base + rb), *CV = nans ? (cufftComplex *)(base + 2 * rb + cb) : NULL;
        SF_TRY(fft_plans(g, c, lx, ly));
        // cyclic: the kernel's centre at the origin, so the product is the
        // output with no shift; linear: the kernel's corner, shifted back by
        // the extract
        SF_TRY(fft_spectrum(g, c, k, lx, ly, cyclic ? cx : 0, cyclic ? cy : 0, E));
        if (io) {
            SF_CUFFT(sf_cufft->exec_r2c(c->r2c, in->data, C)); // out of place: the input is kept
            fft_product<<<pblocks, 256, 0, g->stream>>>(C, c->spec, nc);
            SF_LAUNCHED();
            SF_CUFFT(sf_cufft->exec_c2r(c->c2r, C, out->data));
        } else {
            // the edge-extended image at (ox, oy) of the grid, ex x ey (cyclic:
            // the image itself), then the image and its validity transformed
            const int ox = cyclic ? 0 : k->nx - 1 - cx, oy = cyclic ? 0 : k->ny - 1 - cy;
            const int ex = cyclic ? in->nx : in->nx + k->nx - 1, ey = cyclic ? in->ny : in->ny + k->ny - 1;
            double asum = 0;
            for (size_t i = 0; i < (size_t)k->nx * k->ny; i++)
                asum += fabs(k->w[i]);
            fft_pad_kernel<<<dim3(sf_blocks(lx, 256), ly), 256, 0, g->stream>>>(
                in->data, in->stride, in->nx, in->ny, ox, oy, ex, ey, edge, lx, ly, E, V);
            SF_LAUNCHED();
            for (int p = 0; p < (nans ? 2 : 1); p++) {
                float *R = p ? V : E;
                cufftComplex *S = p ? CV : C;
                SF_CUFFT(sf_cufft->exec_r2c(c->r2c, R, S));
                fft_product<<<pblocks, 256, 0, g->stream>>>(S, c->spec, nc);
                SF_LAUNCHED();
                SF_CUFFT(sf_cufft->exec_c2r(c->c2r, S, R));
            }
            fft_extract<<<dim3(sf_blocks(in->nx, 256), in->ny), 256, 0, g->stream>>>(
                E, V, in->data, in->stride, in->nx, in->ny, cyclic ? 0 : k->nx - 1,
                cyclic ? 0 : k->ny - 1, lx, ly, (float)k->sum, (float)(1e-6 * asum), out->data,
                out->stride);
            SF_LAUNCHED();
        }
        if (cyclic) // the bands the wrap-around spoils, redone by direct tiles
            SF_TRY(direct2d_run(g, in, k, edge, nans, out, 1, 1));
    }
fail:
    return st;
}

extern "C" size_t sf_convolve_gpu_scratch(int nx, int ny, const sf_kernel *k, int method)
{
    int lx, ly;
    size_t rb, cb;
    if (method == SF_CONV_AUTO)
        method = sf_convolve_pick(k, nx, ny, 1);
    if (method != SF_CONV_FFT)
        return sep_two_pass(k, 0) ? sep_h_bytes(nx, ny) + 256 : 256;
    fft_layout(nx, ny, k, 0, &lx, &ly, &rb, &cb); // the linear layout: the larger
    return 2 * (rb + cb) + 256;
}

extern "C" sf_status sf_convolve_rows_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                                          int edge, int y0, int step, sf_image *out, int *done)
{
    sf_status st = SF_OK;
    *done = 0;
    if (!g || in->loc != SF_DEVICE || out->loc != SF_DEVICE || !k || !k->w || step < 1 || y0 < 0 ||
        y0 >= in->ny || out->nx != in->nx || out->ny != (in->ny - 1 - y0) / step + 1)
        return sf_fail(SF_ERR_INTERNAL, "sf_convolve_rows_gpu: rows from %d by %d of a %dx%d image "
                       "into %dx%d", y0, step, in->nx, in->ny, out->nx, out->ny);
    if (!rb_applies(g, k, method, in->nx, in->ny) || out->ny > RB_ROWS_MAX)
        return SF_OK;
    SF_TRY(rb_rows_run(g, g->stream, in, k, edge, y0, step, out));
    *done = 1;
fail:
    return st;
}

// Blocks of each of sf_convolve_noise_gpu's two clippings (SKYFIND_NOISE_BLOCKS):
// a 2^20-pixel clipping is bound by its barriers and takes about as long
// in 16 blocks as in 128 (SKYFIND_BKG_PROFILE), and the SMs it holds are
// the convolution's.
#define NOISE_BLOCKS 16

extern "C" sf_status sf_convolve_noise_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k,
                                           int method, int edge, int nan, int y0, int step,
                                           const sf_bkg_params *bp, sf_image *out, sf_bkg_stats *sa,
                                           sf_bkg_stats *sb, sf_status *sta, sf_status *stb,
                                           int *done)
{
    sf_status st = SF_OK;
    const int rows = step >= 1 && y0 >= 0 && y0 < in->ny ? (in->ny - 1 - y0) / step + 1 : 0;
    const size_t n = (size_t)in->nx * (size_t)rows;
    const int most = env_int("SKYFIND_NOISE_BLOCKS", NOISE_BLOCKS);
    size_t ca, cb;
    char *base = NULL;
    const float *wg = NULL;
    const int aside = env_int("SKYFIND_NOISE_ASIDE", 1);
    char *res = (char *)g->pinned + 4096; // sf_gpu_to_host's bytes are below
    sf_image ra, rf;
    int forked = 0;
    *done = 0;
    *sta = *stb = SF_OK;
    if (nan != 0 || step < 2 || rows < 1 || rows > RB_ROWS_MAX || in->loc != SF_DEVICE ||
        out->loc != SF_DEVICE || in->data == out->data || out->nx != in->nx || out->ny != in->ny ||
        g->pinned_bytes < 4096 + 2 * SF_BKG_CLIP_RES || env_int("SKYFIND_NOISE_SERIAL", 0) ||
        !rb_applies(g, k, method, in->nx, in->ny))
        return SF_OK;
    ca = sf_align256(sf_bkg_clip_bytes(g, n, most));
    cb = ca;
    if (!ca)
        return SF_ERR_CUDA;
    SF_TRY(sf_gpu_scratch(g, ca + cb, (void **)&base));
    // the rows of the image (SF_GBUF_SAMPLE) and of the filtered image
    // (SF_GBUF_SAMPLE2, made from the image's rows around them), on the
    // side streams (SKYFIND_NOISE_ASIDE=0: on g->stream before them), then
    // both clippings there, beside the whole convolution
    SF_TRY(sf_gpu_rows_view(g, in, y0, step, SF_GBUF_SAMPLE, &ra));
    SF_TRY(sf_gpu_rows_view(g, in, y0, step, SF_GBUF_SAMPLE2, &rf));
    SF_TRY(weights_2d(g, k, round4(k->nx), &wg)); // on g->stream, before the fork
    if (!aside) {
        SF_TRY(sf_gpu_rows_on(g->stream, in, y0, step, &ra));
        SF_TRY(rb_rows_run(g, g->stream, in, k, edge, y0, step, &rf));
    }
    SF_TRY(sf_gpu_fork_hi(g, 2));
    forked = 1;
    if (aside) {
        SF_TRY(sf_gpu_rows_on(g->aux[2], in, y0, step, &ra));
        SF_TRY(rb_rows_run(g, g->aux[3], in, k, edge, y0, step, &rf));
    }
    SF_TRY(sf_bkg_clip_launch(g, g->aux[2], &ra, bp, most, base, res));
    SF_TRY(sf_bkg_clip_launch(g, g->aux[3], &rf, bp, most, base + ca, res + SF_BKG_CLIP_RES));
    SF_TRY(conv_direct(g, in, k, edge, 0, out));
    forked = 0;
    SF_TRY(sf_gpu_join_hi(g, 2));
    SF_CUDA(cudaStreamSynchronize(g->stream));
    *sta = sf_bkg_clip_stats(res, &ra, sa);
    *stb = sf_bkg_clip_stats(res + SF_BKG_CLIP_RES, &rf, sb);
    *done = 1;
fail:
    if (forked) { // the side streams' work done before their buffers are reused
        (void)sf_gpu_join_hi(g, 2);
        cudaStreamSynchronize(g->stream);
    }
    return st;
}

extern "C" sf_status sf_convolve_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                                     int edge, int nan, sf_image *out)
{
    sf_status st = SF_OK;
    if (!g || in->loc != SF_DEVICE || out->loc != SF_DEVICE)
        return sf_fail(SF_ERR_INTERNAL, "sf_convolve_gpu takes device images and a GPU context");
    if (in->nx != out->nx || in->ny != out->ny || in->data == out->data)
        return sf_fail(SF_ERR_INTERNAL, "convolve: output must have the input's shape and not alias it");
    if (!k || !k->w || k->nx < 1 || k->ny < 1)
        return sf_fail(SF_ERR_PARAM, "convolve: no kernel");
    if (edge < SF_EDGE_ZERO || edge > SF_EDGE_WRAP)
        return sf_fail(SF_ERR_PARAM, "convolve: unknown edge mode %d", edge);
    if (method == SF_CONV_AUTO)
        method = sf_convolve_pick(k, in->nx, in->ny, 1);
    if (method == SF_CONV_FFT && nan < 0) {
        // is there a NaN? (a 4-byte answer; callers that know pass nan = 0 or 1)
        int *flag, *h = (int *)g->pinned;
        SF_TRY(sf_gpu_scratch(g, sf_convolve_gpu_scratch(in->nx, in->ny, k, method), (void **)&flag));
        flag = (int *)((char *)flag + g->scratch_bytes - 256);
        SF_CUDA(cudaMemsetAsync(flag, 0, sizeof(int), g->stream));
        any_nan_kernel<<<g->sm_count * 8, 256, 0, g->stream>>>(in->data, in->stride, in->nx, in->ny, flag);
        SF_LAUNCHED();
        SF_TRY(sf_gpu_to_host(g, h, flag, sizeof(int)));
        nan = *h;
    }
    if (method == SF_CONV_FFT)
        st = conv_fft(g, in, k, edge, nan != 0, out);
    else
        st = conv_direct(g, in, k, edge, nan != 0, out);
fail:
    return st;
}
