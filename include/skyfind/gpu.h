/* The per-run GPU context: one CUDA stream, scratch memory reused by every
 * stage, and counters of the bytes moved host-to-device and device-to-host.
 * In a build without CUDA every function returns SF_ERR_NO_GPU and
 * sf_gpu_count() returns 0. */
#ifndef SKYFIND_GPU_H
#define SKYFIND_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "skyfind/image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices (0 without CUDA, a driver or a device). */
int sf_gpu_count(void);
/* 1 if this build has the CUDA stages compiled in. */
int sf_gpu_compiled(void);

sf_status sf_gpu_create(sf_gpu **g, int device);
void sf_gpu_destroy(sf_gpu *g);
const char *sf_gpu_name(const sf_gpu *g);
sf_status sf_gpu_sync(sf_gpu *g);

/* Make sure at least `bytes` of scratch exist (the runner reserves the
 * largest need of a run once); sf_gpu_scratch returns it, growing it only if
 * a caller did not reserve enough. Stages carve their buffers from it. */
sf_status sf_gpu_reserve(sf_gpu *g, size_t bytes);
sf_status sf_gpu_scratch(sf_gpu *g, size_t bytes, void **ptr);

/* Raw device memory and counted copies (all on the context's stream). */
sf_status sf_gpu_malloc(sf_gpu *g, void **ptr, size_t bytes);
void sf_gpu_free(sf_gpu *g, void *ptr);
sf_status sf_gpu_host_malloc(sf_gpu *g, void **ptr, size_t bytes); /* pinned */
void sf_gpu_host_free(sf_gpu *g, void *ptr);
sf_status sf_gpu_to_device(sf_gpu *g, void *dst, const void *src, size_t bytes);
sf_status sf_gpu_to_host(sf_gpu *g, void *dst, const void *src, size_t bytes);
sf_status sf_gpu_memset(sf_gpu *g, void *dst, int value, size_t bytes);

void sf_gpu_bytes(const sf_gpu *g, uint64_t *h2d, uint64_t *d2h);
void sf_gpu_reset_bytes(sf_gpu *g);

/* Device-time measurement with CUDA events on the context's stream. */
typedef struct sf_gpu_timer sf_gpu_timer;
sf_status sf_gpu_timer_create(sf_gpu *g, sf_gpu_timer **t);
void sf_gpu_timer_destroy(sf_gpu_timer *t);
sf_status sf_gpu_timer_start(sf_gpu_timer *t);
sf_status sf_gpu_timer_stop(sf_gpu_timer *t, double *ms); /* waits for the stream */

/* The device's copy bandwidth: times cudaMemcpyAsync device-to-device of
 * `bytes` between two fresh buffers with events (a warm-up, then the median
 * of 7) and returns GB/s counting the bytes read plus the bytes written
 * (2*bytes per copy), the floor a memory-bound stage can reach. */
sf_status sf_gpu_copy_bandwidth(sf_gpu *g, size_t bytes, double *gbps);

#ifdef __cplusplus
}
#endif
#endif
