// Direct-method kernels of the convolve stage (gpu/convolve.cu, which
// includes this once): the general 2-D tile kernel, the fused separable
// kernel and the two-pass separable kernels, with the weights in constant
// memory (c_w).
#ifndef SKYFIND_GPU_CONVOLVE_KERNELS_CUH
#define SKYFIND_GPU_CONVOLVE_KERNELS_CUH

#include <type_traits>
#include "convolve.cuh"

#define CW_MAX (SF_KERNEL_MAX * (SF_KERNEL_MAX + 1))
__constant__ float c_w[CW_MAX];

enum { DTW = 64, DTH = 16, NTW = 32, NTH = 32, STW = 64, RW = 256, RH = 16, NTHREADS = 256 };
// separable kernels of at least this many rows take the two-pass path
#define SEP2_MIN 21

// ---- direct, general 2-D -----------------------------------------------------

// Four adjacent outputs from their sums (columns x .. x+3 of row `row` of the
// input; finish() for those before xhi with NANS, the plain sums otherwise).
template <bool NANS, class acc_t>
static __device__ __forceinline__ void finish4(const acc_t acc[4], const acc_t den[4], bool renorm,
                                               const float *__restrict__ row, int x, int xhi,
                                               float wsum, float r[4])
{
#pragma unroll
    for (int o = 0; o < 4; o++)
        r[o] = NANS && x + o < xhi ? finish((float)acc[o], renorm ? (float)den[o] : 0.f,
                                            __ldg(row + x + o), renorm, wsum)
                                   : (float)acc[o];
}

// dst[0 .. min(4, n)) = r: one 16-byte store when all four are in and dst
// is aligned.
static __device__ __forceinline__ void store4(float *dst, const float r[4], int n)
{
    if (n >= 4 && !(reinterpret_cast<uintptr_t>(dst) & 15)) {
        *reinterpret_cast<float4 *>(dst) = make_float4(r[0], r[1], r[2], r[3]);
        return;
    }
#pragma unroll
    for (int o = 0; o < 4; o++)
        if (o < n)
            dst[o] = r[o];
}

// Where the blocks' tiles lie: the whole image (nbx 0, grid x by y), or
// (nbx tiles across the image) the four bands of a cyclic FFT result that
// the wrap-around spoils, one list of tiles (grid x): top rows [0, t) (top
// tile rows), bottom rows [ny - cy, ny) (bot), and of rows [t, ny - cy)
// (nmid tile rows) the left columns [0, l) (left tile columns) and the right
// ones [nx - cx, nx) (right), t = ky - 1 - cy, l = kx - 1 - cx; each tile
// writes only its band's pixels.
struct tile_map {
    int nbx, top, bot, left, right, nmid;
};

// Tile TW x (th = 4 NTHREADS / TW * RPT) outputs: each thread 4 adjacent
// outputs in RPT rows th / RPT apart (TW 64: whole images; TW 32: the FFT's
// bands); shared: (th + ky - 1) x (TW + kxp) floats, twice with NANS, then
// with SW the weights (ky x kxp, copied from wg). Weights: c_w or, with SW,
// shared memory (kernels over 225 taps: their weights overflow the constant
// cache). Each kernel row is summed in float, the rows in double with DBL
// (float sums over 63 x 63 taps would lose ~1e-6 of the result).
// sum[o] += the row_dot4 of each of ky rows of S (stride cols) with its row
// of W (kxp weights each), one float partial per row: the direct kernel's
// image sums (T) and weight sums (M).
template <class acc_t>
static __device__ __forceinline__ void rows_dot4(const float *S, int cols, const float *W, int ky,
                                                 int kxp, acc_t sum[4])
{
    for (int j = 0; j < ky; j++) {
        float r[4] = {0.f, 0.f, 0.f, 0.f};
        row_dot4(S + j * cols, W + j * kxp, kxp, r);
#pragma unroll
        for (int o = 0; o < 4; o++)
            sum[o] += r[o];
    }
}

template <bool NANS, int RPT, bool DBL, bool SW, int TW>
static __global__ void __launch_bounds__(NTHREADS)
direct2d_kernel(const float *__restrict__ in, size_t sin, float *__restrict__ out, size_t sout,
                int nx, int ny, int kx, int ky, int kxp, int cx, int cy, int edge, float wsum,
                tile_map m, const float *__restrict__ wg)
{
    typedef typename std::conditional<DBL, double, float>::type acc_t;
    constexpr int TPR = TW / 4, RR = NTHREADS / TPR; // threads per row, rows per pass
    extern __shared__ float4 smem4[];
    float *T = reinterpret_cast<float *>(smem4);
    const int th = RR * RPT, rows = th + ky - 1, cols = TW + kxp;
    float *M = NANS ? T + rows * cols : nullptr;
    float *Ws = T + (size_t)rows * cols * (NANS ? 2 : 1);
    if (SW) // load_tile's closing barrier publishes them
        for (int i = threadIdx.x; i < ky * kxp; i += blockDim.x)
            Ws[i] = __ldg(wg + i);
    int x0, y0, xhi = nx, yhi = ny; // the tile's origin and write limits
    if (!m.nbx) {
        x0 = blockIdx.x * TW;
        y0 = blockIdx.y * th;
    } else {
        const int t = ky - 1 - cy, ntop = m.nbx * m.top, nbot = m.nbx * m.bot, nl = m.left * m.nmid;
        int b = blockIdx.x;
        if (b < ntop) {
            x0 = b % m.nbx * TW, y0 = b / m.nbx * th, yhi = t;
        } else if ((b -= ntop) < nbot) {
            x0 = b % m.nbx * TW, y0 = ny - cy + b / m.nbx * th;
        } else if ((b -= nbot) < nl) {
            x0 = b % m.left * TW, y0 = t + b / m.left * th, xhi = kx - 1 - cx, yhi = ny - cy;
        } else {
            b -= nl;
            x0 = nx - cx + b % m.right * TW, y0 = t + b / m.right * th, yhi = ny - cy;
        }
    }
    // the interior fast path, measured on the H100: faster for kernels up
    // to 15 x 15, slower for larger 2-D kernels (21 x 21: 3.7 against 3.0 ms)
    const int renorm = load_tile(T, M, rows, cols, in, sin, nx, ny, x0 - (kx - 1 - cx),
                                 y0 - (ky - 1 - cy), edge, kx * ky <= 225);
    const float *W = SW ? Ws : c_w;
    const int c0 = 4 * (threadIdx.x % TPR);
#pragma unroll
    for (int q = 0; q < RPT; q++) {
        const int oy = threadIdx.x / TPR + RR * q;
        acc_t acc[4] = {0, 0, 0, 0}, den[4] = {0, 0, 0, 0};
        rows_dot4(T + oy * cols + c0, cols, W, ky, kxp, acc);
        if (NANS && renorm)
            rows_dot4(M + oy * cols + c0, cols, W, ky, kxp, den);
        const int y = y0 + oy;
        if (y >= yhi)
            break;
        float r[4];
        finish4<NANS>(acc, den, NANS && renorm, in + (size_t)y * sin, x0 + c0, xhi, wsum, r);
        store4(out + (size_t)y * sout + x0 + c0, r, xhi - (x0 + c0));
    }
}

// ---- direct, general 2-D, register-blocked ------------------------------------

// The 2-D direct sum over a whole image for kernels up to 24 columns (KXP, a
// multiple of 4, is their padded width): the same sums as direct2d_kernel
// (each kernel row's float partial with its taps in order, the rows added in
// order, in double with DBL), so the same bits wherever both kernels' tiles
// agree on renormalising (a tile holding a NaN renormalises all its pixels;
// these tiles are 64 rows high, direct2d_kernel's 32 for kernels over 9
// rows, so next to NaN a pixel can differ in its last bit), with the work
// arranged so that
// each shared-memory read serves more outputs. A thread computes 4 adjacent
// outputs in each of RB consecutive rows: it walks the RB + ky - 1 tile rows
// those outputs read, loading each row's 4 + KXP values into registers once,
// and adds that row's partial to every output row it belongs to (kernel row
// j - r of output row r). The weights sit in shared memory (float4
// broadcasts); with KXP a compile-time constant the taps are unrolled. On
// the H100 the 2-D kernel was bound by instruction issue (85% busy, 3.2
// instructions per tap: a constant load per weight, loop control, the
// double conversion per row per output); here each tap is about one FMA.
// TAPS: the kernel's columns (KXP - 3 .. KXP): the taps past them, whose
// weights are the padding's zeros, are not summed (a zero weight adds +0 to
// a finite partial: the same sums, with one FMA in 16 fewer at 15 columns
// and 3 in 16 at 13; and a non-finite pixel beside the footprint no longer
// turns the output NaN through 0 * inf). Tile 64 x (16 RB)
// outputs; shared: (16 RB + ky - 1) x (64 + KXP) floats, twice with NANS,
// then the weights (ky x KXP).
enum { RBW = 64, RBT = 16 }; // tile width; thread rows of a block (256 / 16)

template <int KXP, int RB, int TAPS, class acc_t>
static __device__ __forceinline__ void rb_sums(const float *S, int cols, const float *W, int ky,
                                               acc_t sum[RB][4])
{
#pragma unroll
    for (int r = 0; r < RB; r++)
#pragma unroll
        for (int o = 0; o < 4; o++)
            sum[r][o] = 0;
    for (int j = 0; j < RB + ky - 1; j++) {
        float v[KXP + 4];
#pragma unroll
        for (int q = 0; q < KXP / 4 + 1; q++) {
            const float4 a = *reinterpret_cast<const float4 *>(S + j * cols + 4 * q);
            v[4 * q] = a.x, v[4 * q + 1] = a.y, v[4 * q + 2] = a.z, v[4 * q + 3] = a.w;
        }
#pragma unroll
        for (int r = 0; r < RB; r++) {
            const int kr = j - r; // the kernel row that row j is for output row r
            if (kr < 0 || kr >= ky)
                continue;
            float p[4] = {0.f, 0.f, 0.f, 0.f};
            const float *w = W + kr * KXP;
#pragma unroll
            for (int q = 0; q < KXP / 4; q++) {
                const float4 b = *reinterpret_cast<const float4 *>(w + 4 * q);
                const float wq[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
                for (int t = 0; t < 4; t++)
                    if (4 * q + t < TAPS)
#pragma unroll
                        for (int o = 0; o < 4; o++)
                            p[o] = fmaf(wq[t], v[o + 4 * q + t], p[o]);
            }
#pragma unroll
            for (int o = 0; o < 4; o++)
                sum[r][o] += p[o];
        }
    }
}

template <bool NANS, int KXP, int RB, bool DBL, int TAPS>
static __global__ void __launch_bounds__(NTHREADS)
direct2d_rb(const float *__restrict__ in, size_t sin, float *__restrict__ out, size_t sout, int nx,
            int ny, int kx, int ky, int cx, int cy, int edge, float wsum,
            const float *__restrict__ wg)
{
    typedef typename std::conditional<DBL, double, float>::type acc_t;
    extern __shared__ float4 smem4[];
    float *T = reinterpret_cast<float *>(smem4);
    constexpr int cols = RBW + KXP, th = RBT * RB;
    const int rows = th + ky - 1;
    float *M = NANS ? T + rows * cols : nullptr;
    float *Ws = T + (size_t)rows * cols * (NANS ? 2 : 1);
    for (int i = threadIdx.x; i < ky * KXP; i += blockDim.x) // published by load_tile's barrier
        Ws[i] = __ldg(wg + i);
    const int x0 = blockIdx.x * RBW, y0 = blockIdx.y * th;
    const int renorm = load_tile(T, M, rows, cols, in, sin, nx, ny, x0 - (kx - 1 - cx),
                                 y0 - (ky - 1 - cy), edge, kx * ky <= 225);
    const int c0 = 4 * (threadIdx.x % (RBW / 4)), oy = RB * (threadIdx.x / (RBW / 4));
    acc_t acc[RB][4], den[RB][4];
    rb_sums<KXP, RB, TAPS>(T + oy * cols + c0, cols, Ws, ky, acc);
    if (NANS && renorm)
        rb_sums<KXP, RB, TAPS>(M + oy * cols + c0, cols, Ws, ky, den);
#pragma unroll
    for (int r = 0; r < RB; r++) {
        const int y = y0 + oy + r;
        if (y >= ny)
            break;
        float o4[4];
        finish4<NANS>(acc[r], den[r], NANS && renorm, in + (size_t)y * sin, x0 + c0, nx, wsum, o4);
        store4(out + (size_t)y * sout + x0 + c0, o4, nx - (x0 + c0));
    }
}

// Rows y0, y0 + ystep, ... of direct2d_rb's output over an image without
// NaN, into a compact image (row i of out): block (bx, i) makes the
// 4 blockDim.x outputs of its row from column bx 4 blockDim.x, from a tile
// of the ky input rows they read. Each output is rb_sums' with one row: its
// kernel rows in the same order, each a float partial of the same taps, so
// the same bits as the whole image's (convolve noise=measured's filtered
// rows, sf_convolve_rows_gpu). Shared: ky x (4 blockDim.x + KXP) floats,
// then the weights.
template <int KXP, bool DBL, int TAPS>
static __global__ void __launch_bounds__(128)
direct2d_rb_rows(const float *__restrict__ in, size_t sin, float *__restrict__ out, size_t sout,
                 int nx, int ny, int kx, int ky, int cx, int cy, int edge,
                 const float *__restrict__ wg, int y0, int ystep)
{
    typedef typename std::conditional<DBL, double, float>::type acc_t;
    extern __shared__ float4 smem4[];
    float *T = reinterpret_cast<float *>(smem4);
    const int w = 4 * blockDim.x, cols = w + KXP;
    float *Ws = T + (size_t)ky * cols;
    for (int i = threadIdx.x; i < ky * KXP; i += blockDim.x) // published by load_tile's barrier
        Ws[i] = __ldg(wg + i);
    const int x0 = blockIdx.x * w, y = y0 + blockIdx.y * ystep, c0 = 4 * threadIdx.x;
    (void)load_tile(T, nullptr, ky, cols, in, sin, nx, ny, x0 - (kx - 1 - cx), y - (ky - 1 - cy),
                    edge, kx * ky <= 225);
    acc_t acc[1][4];
    rb_sums<KXP, 1, TAPS>(T + c0, cols, Ws, ky, acc);
    float o4[4];
#pragma unroll
    for (int o = 0; o < 4; o++)
        o4[o] = (float)acc[0][o];
    store4(out + (size_t)blockIdx.y * sout + x0 + c0, o4, nx - (x0 + c0));
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
        window_fma<8, 8>(v, wc + j0, acc);
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

// ---- direct, separable in two passes (no NaN) --------------------------------

// Rows: H (pitch sh) = each image row convolved with the row weights c_w[0,
// kxp), the edge mode along x; RH rows x RW columns per block.
static __global__ void __launch_bounds__(NTHREADS)
seprow_kernel(const float *__restrict__ in, size_t sin, float *__restrict__ H, size_t sh, int nx,
              int ny, int kx, int kxp, int cx, int edge)
{
    extern __shared__ float4 smem4[];
    float *T = reinterpret_cast<float *>(smem4);
    const int cols = RW + kxp, x0 = blockIdx.x * RW, y0 = blockIdx.y * RH;
    load_tile(T, nullptr, RH, cols, in, sin, nx, ny, x0 - (kx - 1 - cx), y0, edge, true);
    for (int g = threadIdx.x; g < RH * (RW / 8); g += blockDim.x) {
        const int r = g / (RW / 8), c0 = 8 * (g % (RW / 8)), y = y0 + r, x = x0 + c0;
        if (y >= ny || x >= nx)
            continue;
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        row_dot8(T + r * cols + c0, c_w, kxp, acc);
        float *dst = H + (size_t)y * sh + x; // sh and x multiples of 4: 16-byte aligned
        *reinterpret_cast<float4 *>(dst) = make_float4(acc[0], acc[1], acc[2], acc[3]);
        if (x + 4 < nx)
            *reinterpret_cast<float4 *>(dst + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
}

// Columns: out = H convolved along y with the column weights c_w + kxp, the
// edge mode along y (the row pass commutes with it); STW x th per block.
static __global__ void __launch_bounds__(NTHREADS)
sepcol_kernel(const float *__restrict__ H, size_t sh, float *__restrict__ out, size_t sout, int nx,
              int ny, int ky, int kxp, int cy, int th, int edge)
{
    extern __shared__ float4 smem4[];
    float *T = reinterpret_cast<float *>(smem4);
    const int rows = th + ky - 1, kyp = (ky + 7) & ~7, hrows = th + kyp + 8;
    for (int i = rows * STW + threadIdx.x; i < hrows * STW; i += blockDim.x)
        T[i] = 0.f; // read by col_dot8 with zero weights
    const int x0 = blockIdx.x * STW, y0 = blockIdx.y * th;
    load_tile(T, nullptr, rows, STW, H, sh, nx, ny, x0, y0 - (ky - 1 - cy), edge, true);
    for (int g = threadIdx.x; g < STW * (th / 8); g += blockDim.x) {
        const int x = g % STW, oy0 = 8 * (g / STW);
        float acc[8];
        col_dot8(T, x, oy0, c_w + kxp, kyp, acc);
        if (x0 + x >= nx)
            continue;
#pragma unroll
        for (int o = 0; o < 8; o++)
            if (y0 + oy0 + o < ny)
                out[(size_t)(y0 + oy0 + o) * sout + x0 + x] = acc[o];
    }
}

#endif
