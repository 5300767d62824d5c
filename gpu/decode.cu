// Raw FITS pixels to float32 on the device: the GPU version of cpu/decode.c.
// The big-endian bytes of a plane go up as they lie in the file; the byte
// swap, BSCALE/BZERO and BLANK -> NaN happen here (sf_decode_pixel, shared
// with the twin), so the host only reads the file.
#include <stdlib.h>
#include "common.cuh"
#include "skyfind/decode.h"

// kernels

// Each thread decodes 4 consecutive pixels per step (one 16-byte load for
// 32-bit data); blank pixels are counted per block, one atomic per block.
template <int W>
static __global__ void decode_kernel(const unsigned char *__restrict__ raw, sf_raw_layout l,
                                     int scaled, float *__restrict__ out, size_t stride,
                                     unsigned long long *nblank)
{
    const size_t n = (size_t)l.nx * l.ny;
    const size_t nq = (n + 3) / 4;
    unsigned long long nb = 0;
    for (size_t q = blockIdx.x * (size_t)blockDim.x + threadIdx.x; q < nq;
         q += (size_t)gridDim.x * blockDim.x) {
        unsigned char b[4 * W];
        const size_t i0 = q * 4;
        const int cnt = n - i0 < 4 ? (int)(n - i0) : 4;
        if (cnt == 4 && (W == 4 || W == 8)) {
            const uint4 *src = reinterpret_cast<const uint4 *>(raw + i0 * W);
#pragma unroll
            for (int k = 0; k < W / 4; k++)
                *reinterpret_cast<uint4 *>(b + 16 * k) = src[k];
        } else if (cnt == 4 && W == 2) {
            *reinterpret_cast<uint2 *>(b) = *reinterpret_cast<const uint2 *>(raw + i0 * W);
        } else {
            for (int k = 0; k < cnt * W; k++)
                b[k] = raw[i0 * W + k];
        }
        for (int k = 0; k < cnt; k++) {
            const size_t i = i0 + k;
            const float v = sf_decode_pixel(b + k * W, &l, scaled);
            const size_t y = i / (size_t)l.nx, x = i - y * (size_t)l.nx;
            out[y * stride + x] = v;
            nb += isnan(v) ? 1 : 0;
        }
    }
    for (int o = 16; o > 0; o >>= 1)
        nb += __shfl_down_sync(0xffffffffu, nb, o);
    __shared__ unsigned long long part[32];
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = nb;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long t = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++)
            t += part[w];
        if (t)
            atomicAdd(nblank, t);
    }
}

// SKYFIND_GPU_FAULT=N: the N-th decode of the process writes through a bad
// pointer, a sticky error (cudaErrorIllegalAddress) for the tests of the
// batch engine's recovery (tests/gpu/faults.sh).
static __global__ void fault_kernel(float *bad) { bad[threadIdx.x] = 1.0f; }

// launchers

extern "C" sf_status sf_decode_gpu(sf_gpu *g, const void *raw, const sf_raw_layout *l,
                                   sf_image *out, long long *nblank)
{
    sf_status st = sf_raw_check(l);
    unsigned long long *dcount = NULL;
    const int scaled = sf_raw_scaled(l);
    const size_t nq = (sf_npix(l->nx, l->ny) + 3) / 4;
    const unsigned threads = 256;
    unsigned blocks;
    if (st)
        return st;
    if (out->loc != SF_DEVICE || out->nx != l->nx || out->ny != l->ny)
        return sf_fail(SF_ERR_INTERNAL, "sf_decode_gpu: output %dx%d on the %s for a %dx%d plane",
                       out->nx, out->ny, out->loc == SF_HOST ? "host" : "device", l->nx, l->ny);
    if ((uintptr_t)raw % 16)
        return sf_fail(SF_ERR_INTERNAL, "sf_decode_gpu: raw buffer not 16-byte aligned");
    blocks = sf_blocks(nq, threads);
    if (blocks > (unsigned)g->sm_count * 16)
        blocks = (unsigned)g->sm_count * 16;
    {
        static int fault_at = -1, calls;
        if (fault_at < 0)
            fault_at = getenv("SKYFIND_GPU_FAULT") ? atoi(getenv("SKYFIND_GPU_FAULT")) : 0;
        if (fault_at > 0 && __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) == fault_at) {
            fault_kernel<<<1, 32, 0, g->stream>>>((float *)(uintptr_t)0x10);
            SF_LAUNCHED();
            SF_CUDA(cudaStreamSynchronize(g->stream));
        }
    }
    SF_TRY(sf_gpu_scratch(g, sizeof *dcount, (void **)&dcount));
    SF_CUDA(cudaMemsetAsync(dcount, 0, sizeof *dcount, g->stream));
    switch (l->bitpix) {
    case 8:
        decode_kernel<1><<<blocks, threads, 0, g->stream>>>((const unsigned char *)raw, *l, scaled, out->data, out->stride, dcount);
        break;
    case 16:
        decode_kernel<2><<<blocks, threads, 0, g->stream>>>((const unsigned char *)raw, *l, scaled, out->data, out->stride, dcount);
        break;
    case 64: case -64:
        decode_kernel<8><<<blocks, threads, 0, g->stream>>>((const unsigned char *)raw, *l, scaled, out->data, out->stride, dcount);
        break;
    default: // 32, -32, native float
        decode_kernel<4><<<blocks, threads, 0, g->stream>>>((const unsigned char *)raw, *l, scaled, out->data, out->stride, dcount);
        break;
    }
    SF_LAUNCHED();
    if (nblank) {
        unsigned long long *h = (unsigned long long *)g->pinned;
        SF_CUDA(cudaMemcpyAsync(h, dcount, sizeof *h, cudaMemcpyDeviceToHost, g->stream));
        SF_CUDA(cudaStreamSynchronize(g->stream));
        g->d2h += sizeof *h;
        *nblank = (long long)*h;
    }
fail:
    return st;
}
