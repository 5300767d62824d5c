/* Which build of the hot loops runs (simd.h). */
#include <stdlib.h>
#include <string.h>
#include "skyfind/pipeline.h"
#include "simd.h"

int sf_simd_hw_level(void)
{
#if SF_SIMD_DISPATCH
    /* decided once; relaxed atomics: every thread that races here computes
     * the same value */
    static int level = -1;
    int v = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = !__builtin_cpu_supports("avx2")  ? SF_SIMD_BASE
            : !__builtin_cpu_supports("fma") ? SF_SIMD_AVX2
            : __builtin_cpu_supports("avx512f") ? SF_SIMD_AVX512
                                                : SF_SIMD_AVX2_FMA;
        __atomic_store_n(&level, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return SF_SIMD_BASE;
#endif
}

int sf_simd_level(void)
{
    static int level = -1;
    int v = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("SKYFIND_SIMD");
        v = sf_simd_hw_level();
        if (e && !strcmp(e, "0"))
            v = SF_SIMD_BASE;
        else if (e && !strcmp(e, "avx2") && v > SF_SIMD_AVX2_FMA)
            v = SF_SIMD_AVX2_FMA;
        __atomic_store_n(&level, v, __ATOMIC_RELAXED);
    }
    return v;
}

int sf_simd_avx2(void) { return sf_simd_level() >= SF_SIMD_AVX2; }

const char *sf_simd_name(void)
{
    static const char *const name[] = {"baseline", "avx2", "avx2+fma", "avx512"};
    return name[sf_simd_level()];
}
