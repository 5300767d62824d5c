// Exclusive sums of the short tables of the deblend and fit stages (a
// count an island: a few thousand values) in one launch of one block,
// where cub::DeviceScan takes two kernels and asks the device for its
// occupancy first: after the stages' waits for a count the host is the
// slower side, and each scan's launches left the device idle 10-12 us.
// Longer tables (over SF_SCAN_SMALL_MAX values) go to cub as before, and
// every table with SKYFIND_SCAN_CUB=1 (a developer knob, for A/B runs).
// Included by gpu/deblend.cu and gpu/fit.cu, after cub.
#ifndef SKYFIND_GPU_SCAN_SMALL_CUH
#define SKYFIND_GPU_SCAN_SMALL_CUH

#include <stdlib.h>
#include <cub/cub.cuh>
#include "common.cuh"

#define SF_SCAN_SMALL_THREADS 1024
#define SF_SCAN_SMALL_ITEMS 1 // tiles of 1024: the 1689 islands of the 8192^2 sky take two
#define SF_SCAN_SMALL_MAX 65536 // 64 tiles at most

// out[i] = in[0] + ... + in[i - 1] for i < n (out[0] = 0), tile by tile
// with the running total carried; in and out may be the same array.
template <typename T>
static __global__ void __launch_bounds__(SF_SCAN_SMALL_THREADS)
    sf_scan_small_kernel(const T *in, T *out, int n)
{
    typedef cub::BlockScan<T, SF_SCAN_SMALL_THREADS> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    T carry = 0; // the same in every thread
    for (int base = 0; base < n; base += SF_SCAN_SMALL_THREADS * SF_SCAN_SMALL_ITEMS) {
        T v[SF_SCAN_SMALL_ITEMS], total;
        const int i0 = base + (int)threadIdx.x * SF_SCAN_SMALL_ITEMS;
#pragma unroll
        for (int q = 0; q < SF_SCAN_SMALL_ITEMS; q++)
            v[q] = i0 + q < n ? in[i0 + q] : (T)0;
        scan_t(tmp).ExclusiveSum(v, v, total);
#pragma unroll
        for (int q = 0; q < SF_SCAN_SMALL_ITEMS; q++)
            if (i0 + q < n)
                out[i0 + q] = carry + v[q];
        carry += total;
        __syncthreads(); // tmp is reused by the next tile
    }
}

// The exclusive sum of n values of in into out on stream s: one block for
// short tables, else cub::DeviceScan with its temporary storage (tmp,
// *bytes as sized by the caller's cub query).
template <typename T>
static sf_status sf_scan_excl(cudaStream_t s, const T *in, T *out, int n, void *tmp, size_t bytes)
{
    sf_status st = SF_OK;
    if (n <= 0)
        return SF_OK;
    if (n <= SF_SCAN_SMALL_MAX && !getenv("SKYFIND_SCAN_CUB")) {
        sf_scan_small_kernel<T><<<1, SF_SCAN_SMALL_THREADS, 0, s>>>(in, out, n);
        SF_LAUNCHED();
    } else {
        SF_CUDA(cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, n, s));
    }
fail:
    return st;
}

#endif
