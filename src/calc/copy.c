/* A memcpy on several host threads (see copy.h). */
#include "copy.h"
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void sf_copy_parallel(void *dst, const void *src, size_t n)
{
    int nth = 1;
#ifdef _OPENMP
    nth = omp_get_max_threads() < 8 ? omp_get_max_threads() : 8;
#endif
    const size_t piece = ((n / (size_t)nth + 4095) / 4096) * 4096;
    if (nth < 2 || n < ((size_t)1 << 20) || piece == 0) {
        memcpy(dst, src, n);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(nth)
    for (int t = 0; t < nth; t++) {
        const size_t a = (size_t)t * piece, b = a + piece < n ? a + piece : n;
        if (a < b)
            memcpy((char *)dst + a, (const char *)src + a, b - a);
    }
}
