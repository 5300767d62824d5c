/* A memcpy on several host threads, for the GPU's staged copies
 * (gpu/gpu.cu): one thread copies pageable memory at a fraction of the
 * memory's speed. C with OpenMP (copy.c), callable from CUDA. */
#ifndef SKYFIND_COPY_H
#define SKYFIND_COPY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[0..n) = src[0..n) (not overlapping), by up to 8 threads of the
 * caller's OpenMP team size, in pieces of whole 4 KB pages; one thread
 * below 1 MB. */
void sf_copy_parallel(void *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif
#endif
