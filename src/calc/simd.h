/* Two builds of a CPU twin's hot loop, picked when it runs.
 *
 * skyfind is built for the x86-64 baseline (SSE2), so that one binary runs
 * on any 64-bit PC; the loops that vectorise (decoding, thresholding, the
 * direct convolution's taps, the background maps' pixel rows, ...) are also
 * compiled for AVX2 and take that build where the CPU has it. The AVX2
 * build has no FMA (target "avx2" leaves it out), so every sum and product
 * rounds as in the baseline build and the same operations come in the same
 * order: the two builds give the same bits (tests/cli/test_simd.sh runs the
 * pipelines both ways and compares the catalogues and maps byte for byte).
 *
 * A kernel is written once, as NAME_body (SF_SIMD_BODY: inlined into each
 * build), and SF_SIMD_KERNEL(ret, NAME, (params), (args)) (or
 * SF_SIMD_KERNEL_VOID(NAME, ...) for a body that returns nothing) makes
 * NAME, which calls the AVX2 or the baseline copy. OpenMP regions stay outside the
 * bodies (a region is outlined before inlining, in the baseline build):
 * the dispatch is per row or per block, one well-predicted branch.
 *
 * One kernel is different: the general 2-D direct convolution's sums
 * (cpu/convolve_fma.c) are chains of fused multiply-adds, the GPU's, which
 * its AVX-512, AVX2 + FMA and scalar fmaf() builds all compute exactly, so
 * they too give the same bits whichever runs; it picks by sf_simd_level.
 *
 * SKYFIND_SIMD=0 in the environment keeps the baseline build everywhere
 * (sf_simd_level, simd.c), for that comparison and for timing the two;
 * SKYFIND_SIMD=avx2 stops at AVX2 + FMA (the FMA kernel's AVX2 build, for
 * the same comparison on a CPU with AVX-512). */
#ifndef SKYFIND_CALC_SIMD_H
#define SKYFIND_CALC_SIMD_H

enum { SF_SIMD_BASE = 0, SF_SIMD_AVX2 = 1, SF_SIMD_AVX2_FMA = 2, SF_SIMD_AVX512 = 3 };
/* What this CPU has, capped by SKYFIND_SIMD: SF_SIMD_AVX512 with AVX-512F and
 * FMA, SF_SIMD_AVX2_FMA with AVX2 and FMA, SF_SIMD_AVX2 with AVX2 alone. */
int sf_simd_level(void);
/* The same for the CPU alone, whatever SKYFIND_SIMD says: for choices that
 * change the output (sf_convolve_pick), which must not follow the variable. */
int sf_simd_hw_level(void);
/* 1 when the AVX2 copies run: the CPU has AVX2 and SKYFIND_SIMD is not 0. */
int sf_simd_avx2(void);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define SF_SIMD_DISPATCH 1
#define SF_SIMD_BODY static inline __attribute__((always_inline))
#define SF_SIMD_KERNEL(ret, name, params, args)                                     \
    __attribute__((target("avx2"))) static ret name##_avx2 params                  \
    {                                                                             \
        return name##_body args;                                                  \
    }                                                                             \
    static ret name##_base params { return name##_body args; }                   \
    static inline ret name params { return sf_simd_avx2() ? name##_avx2 args : name##_base args; }
#define SF_SIMD_KERNEL_VOID(name, params, args)                                     \
    __attribute__((target("avx2"))) static void name##_avx2 params { name##_body args; } \
    static void name##_base params { name##_body args; }                         \
    static inline void name params                                                \
    {                                                                             \
        if (sf_simd_avx2())                                                       \
            name##_avx2 args;                                                     \
        else                                                                      \
            name##_base args;                                                     \
    }
#else
#define SF_SIMD_DISPATCH 0
#define SF_SIMD_BODY static inline
#define SF_SIMD_KERNEL(ret, name, params, args) \
    static inline ret name params { return name##_body args; }
#define SF_SIMD_KERNEL_VOID(name, params, args) \
    static inline void name params { name##_body args; }
#endif

#endif
