// Device helpers of the convolve stage (gpu/convolve.cu): edge modes, the
// tile loader (the extended image with its halo into shared memory), the
// 4-wide row dot product and the NaN-renormalised result. Included once.
#ifndef SKYFIND_GPU_CONVOLVE_CUH
#define SKYFIND_GPU_CONVOLVE_CUH

#include "common.cuh"
#include "skyfind/convolve.h"

// ---- device helpers --------------------------------------------------------

// Index of pixel i of an axis of n pixels under an edge mode; -1: a zero.
static __device__ __forceinline__ int edge_index(int i, int n, int edge)
{
    if ((unsigned)i < (unsigned)n)
        return i;
    switch (edge) {
    case SF_EDGE_NEAREST:
        return i < 0 ? 0 : n - 1;
    case SF_EDGE_WRAP: {
        int m = i % n;
        return m < 0 ? m + n : m;
    }
    case SF_EDGE_REFLECT: {
        int p = 2 * n, m = i % p;
        if (m < 0)
            m += p;
        return m < n ? m : p - 1 - m;
    }
    default:
        return -1;
    }
}

// The extended image at (x, y): value (NaN replaced by 0) and validity.
static __device__ __forceinline__ float ext_value(const float *__restrict__ in, size_t stride,
                                                  int nx, int ny, int x, int y, int edge,
                                                  bool *bad)
{
    int xi = edge_index(x, nx, edge), yi = edge_index(y, ny, edge);
    float v = (xi < 0 || yi < 0) ? 0.f : __ldg(in + (size_t)yi * stride + xi);
    *bad = isnan(v);
    return *bad ? 0.f : v;
}

// Fill T (and M, the validity, when given) with rows x cols of the extended
// image from (x_org, y_org); pitch `cols`. Returns, to every thread, whether
// the tile holds a NaN.
static __device__ int load_tile(float *T, float *M, int rows, int cols, const float *__restrict__ in,
                                size_t stride, int nx, int ny, int x_org, int y_org, int edge,
                                bool fast)
{
    int nan = 0;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (fast && x_org >= 0 && y_org >= 0 && x_org + cols <= nx && y_org + rows <= ny) {
        // inside the image (most tiles): no edge mode, 8 loads in flight
        const float *src = in + (size_t)y_org * stride + x_org;
        for (int r0 = warp; r0 < rows; r0 += 2 * nw)
            for (int c0 = lane; c0 < cols; c0 += 128) {
                float v[8];
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    const int r = r0 + (q >> 2) * nw, c = c0 + (q & 3) * 32;
                    v[q] = r < rows && c < cols ? __ldg(src + (size_t)r * stride + c) : 0.f;
                }
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    const int r = r0 + (q >> 2) * nw, c = c0 + (q & 3) * 32;
                    if (r < rows && c < cols) {
                        const bool bad = isnan(v[q]);
                        nan |= bad;
                        T[r * cols + c] = bad ? 0.f : v[q];
                        if (M)
                            M[r * cols + c] = bad ? 0.f : 1.f;
                    }
                }
            }
        return __syncthreads_or(nan);
    }
    // 4 rows per warp in flight: the loads are issued before the stores, so
    // enough bytes are on their way to cover the memory latency
    for (int r0 = warp; r0 < rows; r0 += 4 * nw)
        for (int c = lane; c < cols; c += 32) {
            float v[4];
            bool bad[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int r = r0 + q * nw;
                v[q] = r < rows ? ext_value(in, stride, nx, ny, x_org + c, y_org + r, edge, &bad[q]) : 0.f;
                bad[q] = r < rows && bad[q];
            }
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int r = r0 + q * nw;
                if (r < rows) {
                    nan |= bad[q];
                    T[r * cols + c] = v[q];
                    if (M)
                        M[r * cols + c] = bad[q] ? 0.f : 1.f;
                }
            }
        }
    return __syncthreads_or(nan);
}

// acc[o] += sum_i w[i] * R[o + i], o = 0..3, i < kxp (a multiple of 4);
// R 16-byte aligned, w in constant memory.
static __device__ __forceinline__ void row_dot4(const float *__restrict__ R, const float *w, int kxp,
                                                float acc[4])
{
    float4 a = *reinterpret_cast<const float4 *>(R);
    for (int i = 0; i < kxp; i += 4) {
        const float4 b = *reinterpret_cast<const float4 *>(R + i + 4);
        const float w0 = w[i], w1 = w[i + 1], w2 = w[i + 2], w3 = w[i + 3];
        acc[0] = fmaf(w3, a.w, fmaf(w2, a.z, fmaf(w1, a.y, fmaf(w0, a.x, acc[0]))));
        acc[1] = fmaf(w3, b.x, fmaf(w2, a.w, fmaf(w1, a.z, fmaf(w0, a.y, acc[1]))));
        acc[2] = fmaf(w3, b.y, fmaf(w2, b.x, fmaf(w1, a.w, fmaf(w0, a.z, acc[2]))));
        acc[3] = fmaf(w3, b.z, fmaf(w2, b.y, fmaf(w1, b.x, fmaf(w0, a.w, acc[3]))));
        a = b;
    }
}

// acc[o] += sum_t w[t] * v[o + t], o < NO, t < NT, the taps in order with each
// weight loaded once: the sliding-window step of row_dot8 and col_dot8.
template <int NO, int NT>
static __device__ __forceinline__ void window_fma(const float *v, const float *w, float *acc)
{
#pragma unroll
    for (int t = 0; t < NT; t++) {
        const float wt = w[t];
#pragma unroll
        for (int o = 0; o < NO; o++)
            acc[o] = fmaf(wt, v[o + t], acc[o]);
    }
}

// acc[o] += sum_i w[i] * R[o + i], o = 0..7, i < kxp (a multiple of 4):
// each weight loaded once for 8 outputs. R 16-byte aligned.
static __device__ __forceinline__ void row_dot8(const float *__restrict__ R, const float *w, int kxp,
                                                float acc[8])
{
    float4 a = *reinterpret_cast<const float4 *>(R), b = *reinterpret_cast<const float4 *>(R + 4);
    for (int i = 0; i < kxp; i += 4) {
        const float4 c = *reinterpret_cast<const float4 *>(R + i + 8);
        const float v[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, c.x, c.y, c.z, c.w};
        window_fma<8, 4>(v, w + i, acc);
        a = b;
        b = c;
    }
}

// The output pixel from its sums: NaN where the input is NaN; renormalised
// over valid pixels when the tile held a NaN.
static __device__ __forceinline__ float finish(float num, float den, float v, bool renorm, float wsum)
{
    if (isnan(v))
        return v;
    if (!renorm)
        return num;
    return den != 0.f ? num / den * wsum : __int_as_float(0x7fc00000);
}

#endif
