// 128-bit fixed-point sums (src/calc/fixsum.h) accumulated by atomics, shared by
// the measure and deblend stages.
#ifndef SKYFIND_GPU_FIX_ATOMIC_CUH
#define SKYFIND_GPU_FIX_ATOMIC_CUH

#include "fixsum.h"

// 128-bit atomic add of a into the pair (w[0] = lo, w[1] = hi).
// atomicAdd on the low word returns the exact value it added to (old), so
// this addition wrapped past 2^64 iff old + a.lo < old, i.e. carry = 1. Each
// addition of a 64-bit value wraps the low word at most once, so over all
// threads, in whatever order, the carries add up to exactly the number of
// times the low word went past 2^64: floor((lo0 + sum a.lo) / 2^64). Adding
// a.hi + carry to the high word (also an atomic, commutative add mod 2^64)
// therefore leaves hi*2^64 + lo = initial + sum of all a, mod 2^128. While
// the kernel runs the pair may be momentarily inconsistent (the high word
// lagging its carry), so nobody reads it before the kernel (or, for sums of
// one block, the block's next __syncthreads) has finished.
static __device__ __forceinline__ void sf_atomic_add128(unsigned long long *w, sf_fix128 a)
{
    if (sf_fix_is_zero(a))
        return;
    const unsigned long long old = atomicAdd(&w[0], (unsigned long long)a.lo);
    const unsigned long long carry = old + (unsigned long long)a.lo < old;
    const unsigned long long hi = (unsigned long long)a.hi + carry;
    if (hi)
        atomicAdd(&w[1], hi);
}

static __device__ __forceinline__ sf_fix128 sf_fix_load(const unsigned long long *w)
{
    sf_fix128 r;
    r.lo = w[0];
    r.hi = (int64_t)w[1];
    return r;
}

#endif
