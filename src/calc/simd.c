/* Which build of the hot loops runs (simd.h). */
#include <stdlib.h>
#include "skyfind/pipeline.h"
#include "simd.h"

int sf_simd_avx2(void)
{
#if SF_SIMD_DISPATCH
    /* decided once; relaxed atomics: every thread that races here computes
     * the same value */
    static int on = -1;
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("SKYFIND_SIMD");
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && !(e && e[0] == '0' && !e[1]);
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}

const char *sf_simd_name(void) { return sf_simd_avx2() ? "avx2" : "baseline"; }
