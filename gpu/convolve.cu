// Stage `convolve`, GPU version (CPU twin: cpu/convolve.c). Definitions,
// edge modes and NaN handling in include/skyfind/convolve.h.
//
// direct: one block per 64 x 16 output tile; the tile and its halo (edge
// mode applied, NaN replaced by 0) in shared memory, the flipped weights in
// constant memory, each thread 4 adjacent outputs from float4 shared loads.
// Separable kernels take a fused row-then-column path: the row pass writes
// (tile + vertical halo) x 64 partial sums to shared memory and the column
// pass finishes them, so the image is read once and written once.
// A block whose tile holds a NaN also convolves the validity mask and
// renormalises; other blocks run the plain sums.
//
// fft: the edge-extended image zero-padded to a fast size (>= n + k - 1 per
// axis, so the cyclic product is the linear convolution), cuFFT R2C, a
// point-wise product with the kernel's spectrum, C2R, then the valid window.
// Plans and the spectrum are cached in the context (sf_gpu.conv) and reused
// for images of the same size and the same kernel.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "skyfind/convolve.h"
#include "convolve.cuh"

#define CW_MAX (SF_KERNEL_MAX * (SF_KERNEL_MAX + 1))
__constant__ float c_w[CW_MAX];

enum { DTW = 64, DTH = 16, STW = 64, NTHREADS = 256 };

struct sf_conv_cache {
    uint64_t cw_hash;          // what c_w holds (0: nothing)
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
    if (c->lx) {
        cufftDestroy(c->r2c);
        cufftDestroy(c->c2r);
    }
    cudaFree(c->spec);
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

// ---- direct, general 2-D -----------------------------------------------------

// Tile DTW x DTH outputs; shared: (DTH + ky - 1) x (DTW + kxp) floats, twice
// with NANS. c_w: flipped weights, ky rows of kxp (zero-padded).
template <bool NANS>
static __global__ void __launch_bounds__(NTHREADS)
direct2d_kernel(const float *__restrict__ in, size_t sin, float *__restrict__ out, size_t sout,
                int nx, int ny, int kx, int ky, int kxp, int cx, int cy, int edge, float wsum,
                int tx0, int ty0)
{
    extern __shared__ float4 smem4[];
    float *T = reinterpret_cast<float *>(smem4);
    const int rows = DTH + ky - 1, cols = DTW + kxp;
    float *M = NANS ? T + rows * cols : nullptr;
    const int x0 = (tx0 + blockIdx.x) * DTW, y0 = (ty0 + blockIdx.y) * DTH;
    // the interior fast path, measured on the H100: faster for kernels up
    // to 15 x 15, slower for larger 2-D kernels (21 x 21: 3.7 against 3.0 ms)
    const int renorm = load_tile(T, M, rows, cols, in, sin, nx, ny, x0 - (kx - 1 - cx),
                                 y0 - (ky - 1 - cy), edge, kx * ky <= 225);
    const int c0 = 4 * (threadIdx.x & 15), oy = threadIdx.x >> 4;
    // each kernel row is summed in float, the rows in double: float sums over
    // 63 x 63 taps would lose ~1e-6 of the result
    double acc[4] = {0, 0, 0, 0}, den[4] = {0, 0, 0, 0};
    for (int j = 0; j < ky; j++) {
        float r[4] = {0.f, 0.f, 0.f, 0.f};
        row_dot4(T + (oy + j) * cols + c0, c_w + j * kxp, kxp, r);
#pragma unroll
        for (int o = 0; o < 4; o++)
            acc[o] += r[o];
    }
    if (NANS && renorm)
        for (int j = 0; j < ky; j++) {
            float r[4] = {0.f, 0.f, 0.f, 0.f};
            row_dot4(M + (oy + j) * cols + c0, c_w + j * kxp, kxp, r);
#pragma unroll
            for (int o = 0; o < 4; o++)
                den[o] += r[o];
        }
    const int y = y0 + oy;
    if (y >= ny)
        return;
    float r[4];
#pragma unroll
    for (int o = 0; o < 4; o++) {
        const int x = x0 + c0 + o;
        r[o] = NANS && x < nx ? finish((float)acc[o], (float)den[o], __ldg(in + (size_t)y * sin + x),
                                       renorm, wsum)
                              : (float)acc[o];
    }
    float *dst = out + (size_t)y * sout + x0 + c0;
    if (x0 + c0 + 3 < nx && !(reinterpret_cast<uintptr_t>(dst) & 15)) {
        *reinterpret_cast<float4 *>(dst) = make_float4(r[0], r[1], r[2], r[3]);
    } else {
#pragma unroll
        for (int o = 0; o < 4; o++)
            if (x0 + c0 + o < nx)
                dst[o] = r[o];
    }
}

// ---- direct, separable --------------------------------------------------------

// c_w: flipped row weights (kxp, zero-padded) then flipped column weights
// at offset kxp (ky). Tile STW x th outputs; shared: T (th + ky - 1) x
// (STW + kxp), H (th + ky - 1) x STW, and M, HM with NANS.
template <bool NANS>
static __device__ void sep_rows(const float *T, float *H, int rows, int cols, int kxp)
{
    for (int g = threadIdx.x; g < rows * (STW / 4); g += blockDim.x) {
        const int r = g / (STW / 4), c0 = 4 * (g % (STW / 4));
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        row_dot4(T + r * cols + c0, c_w, kxp, acc);
        *reinterpret_cast<float4 *>(H + r * STW + c0) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    }
}

// acc[o] = sum_j wc[j] * H[(oy0 + o + j) * STW + x], o < 8; wc holds kyp
// weights (ky rounded up to 8, zero-padded) and H kyp + 8 finite rows past
// oy0, so the window of 16 values is indexed at compile time (registers).
static __device__ __forceinline__ void col_dot8(const float *H, int x, int oy0, const float *wc,
                                                int kyp, float acc[8])
{
    float v[16];
#pragma unroll
    for (int o = 0; o < 8; o++) {
        v[o] = H[(oy0 + o) * STW + x];
        acc[o] = 0.f;
    }
    for (int j0 = 0; j0 < kyp; j0 += 8) {
#pragma unroll
        for (int t = 0; t < 8; t++)
            v[8 + t] = H[(oy0 + j0 + 8 + t) * STW + x];
#pragma unroll
        for (int t = 0; t < 8; t++) {
            const float w = wc[j0 + t];
#pragma unroll
            for (int o = 0; o < 8; o++)
                acc[o] = fmaf(w, v[o + t], acc[o]);
        }
#pragma unroll
        for (int t = 0; t < 8; t++)
            v[t] = v[8 + t];
    }
}

template <bool NANS>
static __global__ void __launch_bounds__(NTHREADS)
sep_kernel(const float *__restrict__ in, size_t sin, float *__restrict__ out, size_t sout, int nx,
           int ny, int kx, int ky, int kxp, int cx, int cy, int th, int edge, float wsum)
{
    extern __shared__ float4 smem4[];
    const int rows = th + ky - 1, cols = STW + kxp, kyp = (ky + 7) & ~7, hrows = th + kyp + 8;
    float *T = reinterpret_cast<float *>(smem4);
    float *H = T + rows * cols;
    float *M = H + hrows * STW;
    float *HM = NANS ? M + rows * cols : nullptr;
    // rows of H past the row pass's: zeros, read by col_dot8 with zero weights
    for (int i = rows * STW + threadIdx.x; i < hrows * STW; i += blockDim.x) {
        H[i] = 0.f;
        if (NANS)
            HM[i] = 0.f;
    }
    const int x0 = blockIdx.x * STW, y0 = blockIdx.y * th;
    const int renorm = load_tile(T, NANS ? M : nullptr, rows, cols, in, sin, nx, ny,
                                 x0 - (kx - 1 - cx), y0 - (ky - 1 - cy), edge, true);
    sep_rows<NANS>(T, H, rows, cols, kxp);
    if (NANS && renorm)
        sep_rows<NANS>(M, HM, rows, cols, kxp);
    __syncthreads();
    const float *wc = c_w + kxp;
    for (int g = threadIdx.x; g < STW * (th / 8); g += blockDim.x) {
        const int x = g % STW, oy0 = 8 * (g / STW);
        float acc[8], den[8];
        col_dot8(H, x, oy0, wc, kyp, acc);
        if (NANS && renorm)
            col_dot8(HM, x, oy0, wc, kyp, den);
        if (x0 + x >= nx)
            continue;
#pragma unroll
        for (int o = 0; o < 8; o++) {
            const int y = y0 + oy0 + o;
            if (y < ny)
                out[(size_t)y * sout + x0 + x] =
                    NANS ? finish(acc[o], NANS && renorm ? den[o] : 0.f,
                                  __ldg(in + (size_t)y * sin + x0 + x), renorm, wsum)
                         : acc[o];
        }
    }
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

// The kernel on the padded grid, unflipped at the origin.
static __global__ void fft_kernel_grid(const float *__restrict__ w, int kx, int ky, int lx,
                                       float *__restrict__ K)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (s < lx)
        K[(size_t)t * lx + s] = (s < kx && t < ky) ? w[t * kx + s] : 0.f;
}

static __global__ void fft_product(cufftComplex *__restrict__ a, const cufftComplex *__restrict__ k,
                                   size_t n, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const cufftComplex x = a[i], y = k[i];
        a[i] = make_float2((x.x * y.x - x.y * y.y) * scale, (x.x * y.y + x.y * y.x) * scale);
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

static size_t direct2d_smem(const sf_kernel *k, int nans)
{
    return (size_t)(DTH + k->ny - 1) * (DTW + round4(k->nx)) * sizeof(float) * (nans ? 2 : 1);
}

// The general 2-D direct kernel on ntx x nty output tiles from tile (tx0, ty0).
static sf_status direct2d_tiles(sf_gpu *g, const sf_image *in, const sf_kernel *k, int edge, int nans,
                                sf_image *out, int tx0, int ty0, int ntx, int nty)
{
    sf_status st = SF_OK;
    const int kxp = round4(k->nx), cx = k->nx / 2, cy = k->ny / 2;
    const float wsum = (float)k->sum;
    const size_t smem = direct2d_smem(k, nans);
    if (smem > g->smem_optin)
        return sf_fail(SF_ERR_PARAM, "convolve: %dx%d kernel needs %zu B of shared memory", k->nx,
                       k->ny, smem);
    if (ntx < 1 || nty < 1)
        return SF_OK;
    SF_TRY(upload_weights(g, k, 0, kxp));
    {
        dim3 grid(ntx, nty);
        if (nans) {
            SF_CUDA(cudaFuncSetAttribute(direct2d_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            direct2d_kernel<true><<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data,
                out->stride, in->nx, in->ny, k->nx, k->ny, kxp, cx, cy, edge, wsum, tx0, ty0);
        } else {
            SF_CUDA(cudaFuncSetAttribute(direct2d_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            direct2d_kernel<false><<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data,
                out->stride, in->nx, in->ny, k->nx, k->ny, kxp, cx, cy, edge, wsum, tx0, ty0);
        }
        SF_LAUNCHED();
    }
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
    if (k->row && k->col) {
        int th = 64;
        while (th > 8 && sep_smem(th, k->ny, kxp, nans) > g->smem_optin)
            th /= 2;
        const size_t smem = sep_smem(th, k->ny, kxp, nans);
        if (smem > g->smem_optin)
            return sf_fail(SF_ERR_PARAM, "convolve: %dx%d kernel needs %zu B of shared memory",
                           k->nx, k->ny, smem);
        SF_TRY(upload_weights(g, k, 1, kxp));
        dim3 grid((in->nx + STW - 1) / STW, (in->ny + th - 1) / th);
        if (nans) {
            SF_CUDA(cudaFuncSetAttribute(sep_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            sep_kernel<true><<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data, out->stride,
                in->nx, in->ny, k->nx, k->ny, kxp, cx, cy, th, edge, wsum);
        } else {
            SF_CUDA(cudaFuncSetAttribute(sep_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            sep_kernel<false><<<grid, NTHREADS, smem, g->stream>>>(in->data, in->stride, out->data, out->stride,
                in->nx, in->ny, k->nx, k->ny, kxp, cx, cy, th, edge, wsum);
        }
        SF_LAUNCHED();
    } else {
        SF_TRY(direct2d_tiles(g, in, k, edge, nans, out, 0, 0, (in->nx + DTW - 1) / DTW,
                              (in->ny + DTH - 1) / DTH));
    }
fail:
    return st;
}

// Plans for an ly x lx padded grid (cached).
static sf_status fft_plans(sf_gpu *g, sf_conv_cache *c, int lx, int ly)
{
    sf_status st = SF_OK;
    if (c->lx == lx && c->ly == ly)
        return SF_OK;
    if (c->lx) {
        cufftDestroy(c->r2c);
        cufftDestroy(c->c2r);
        c->lx = c->ly = 0;
    }
    SF_CUFFT(cufftPlan2d(&c->r2c, ly, lx, CUFFT_R2C));
    if (cufftPlan2d(&c->c2r, ly, lx, CUFFT_C2R) != CUFFT_SUCCESS) {
        cufftDestroy(c->r2c);
        return sf_fail(SF_ERR_CUFFT, "cufftPlan2d(%d x %d, C2R) failed", ly, lx);
    }
    c->lx = lx;
    c->ly = ly;
    SF_CUFFT(cufftSetStream(c->r2c, g->stream));
    SF_CUFFT(cufftSetStream(c->c2r, g->stream));
fail:
    return st;
}

// The kernel's spectrum on the ly x lx grid (cached); K: real scratch.
static sf_status fft_spectrum(sf_gpu *g, sf_conv_cache *c, const sf_kernel *k, int lx, int ly,
                              float *K)
{
    sf_status st = SF_OK;
    const uint64_t hash = kernel_hash(k, 3, lx, ly);
    const size_t nc = (size_t)ly * (lx / 2 + 1);
    float *dw = NULL;
    if (c->spec && c->spec_hash == hash)
        return SF_OK;
    if (c->spec_bytes < nc * sizeof(cufftComplex)) {
        cudaFree(c->spec);
        c->spec = NULL;
        c->spec_bytes = 0;
        SF_TRY(sf_gpu_malloc(g, (void **)&c->spec, nc * sizeof(cufftComplex)));
        c->spec_bytes = nc * sizeof(cufftComplex);
    }
    c->spec_hash = 0;
    SF_TRY(sf_gpu_malloc(g, (void **)&dw, (size_t)k->nx * k->ny * sizeof(float)));
    SF_TRY(sf_gpu_to_device(g, dw, k->w, (size_t)k->nx * k->ny * sizeof(float)));
    fft_kernel_grid<<<dim3(sf_blocks(lx, 256), ly), 256, 0, g->stream>>>(dw, k->nx, k->ny, lx, K);
    SF_LAUNCHED();
    SF_CUFFT(cufftExecR2C(c->r2c, K, c->spec));
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
    const int cyclic = fft_cyclic(in->nx, in->ny, k) && direct2d_smem(k, nans) <= g->smem_optin;
    const int cx = k->nx / 2, cy = k->ny / 2;
    fft_layout(in->nx, in->ny, k, cyclic, &lx, &ly, &rb, &cb);
    const size_t nc = (size_t)ly * (lx / 2 + 1);
    SF_TRY(cache_get(g, &c));
    SF_TRY(sf_gpu_scratch(g, (rb + cb) * (nans ? 2 : 1), (void **)&base));
    {
        float *E = (float *)base, *V = nans ? (float *)(base + rb + cb) : NULL;
        cufftComplex *C = (cufftComplex *)(base + rb), *CV = nans ? (cufftComplex *)(base + 2 * rb + cb) : NULL;
        const float scale = 1.0f / ((float)lx * (float)ly);
        double asum = 0;
        for (size_t i = 0; i < (size_t)k->nx * k->ny; i++)
            asum += fabs(k->w[i]);
        SF_TRY(fft_plans(g, c, lx, ly));
        SF_TRY(fft_spectrum(g, c, k, lx, ly, E));
        if (cyclic)
            fft_pad_kernel<<<dim3(sf_blocks(lx, 256), ly), 256, 0, g->stream>>>(
                in->data, in->stride, in->nx, in->ny, 0, 0, in->nx, in->ny, edge, lx, ly, E, V);
        else
            fft_pad_kernel<<<dim3(sf_blocks(lx, 256), ly), 256, 0, g->stream>>>(
                in->data, in->stride, in->nx, in->ny, k->nx - 1 - cx, k->ny - 1 - cy,
                in->nx + k->nx - 1, in->ny + k->ny - 1, edge, lx, ly, E, V);
        SF_LAUNCHED();
        SF_CUFFT(cufftExecR2C(c->r2c, E, C));
        fft_product<<<sf_blocks(nc, 256) > 4096 ? 4096 : sf_blocks(nc, 256), 256, 0, g->stream>>>(C, c->spec, nc, scale);
        SF_LAUNCHED();
        SF_CUFFT(cufftExecC2R(c->c2r, C, E));
        if (nans) {
            SF_CUFFT(cufftExecR2C(c->r2c, V, CV));
            fft_product<<<sf_blocks(nc, 256) > 4096 ? 4096 : sf_blocks(nc, 256), 256, 0, g->stream>>>(CV, c->spec, nc, scale);
            SF_LAUNCHED();
            SF_CUFFT(cufftExecC2R(c->c2r, CV, V));
        }
        fft_extract<<<dim3(sf_blocks(in->nx, 256), in->ny), 256, 0, g->stream>>>(
            E, V, in->data, in->stride, in->nx, in->ny, cyclic ? cx : k->nx - 1,
            cyclic ? cy : k->ny - 1, lx, ly, (float)k->sum, (float)(1e-6 * asum), out->data,
            out->stride);
        SF_LAUNCHED();
        if (cyclic) { // the bands the wrap-around spoils: direct tiles over them
            const int ntx = (in->nx + DTW - 1) / DTW, nty = (in->ny + DTH - 1) / DTH;
            const int top = (k->ny - 1 - cy + DTH - 1) / DTH, bot = (in->ny - cy) / DTH;
            const int left = (k->nx - 1 - cx + DTW - 1) / DTW, right = (in->nx - cx) / DTW;
            SF_TRY(direct2d_tiles(g, in, k, edge, nans, out, 0, 0, ntx, top));
            SF_TRY(direct2d_tiles(g, in, k, edge, nans, out, 0, bot, ntx, nty - bot));
            SF_TRY(direct2d_tiles(g, in, k, edge, nans, out, 0, top, left, bot - top));
            SF_TRY(direct2d_tiles(g, in, k, edge, nans, out, right, top, ntx - right, bot - top));
        }
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
        return 256;
    fft_layout(nx, ny, k, 0, &lx, &ly, &rb, &cb); // the linear layout: the larger
    return 2 * (rb + cb) + 256;
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
