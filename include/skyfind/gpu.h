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
/* 1 once this process has made a GPU context (sf_gpu_create succeeded). */
int sf_gpu_used(void);

sf_status sf_gpu_create(sf_gpu **g, int device);
void sf_gpu_destroy(sf_gpu *g);
const char *sf_gpu_name(const sf_gpu *g);
sf_status sf_gpu_sync(sf_gpu *g);

/* Make sure at least `bytes` of scratch exist (the runner reserves the
 * largest need of a run once); sf_gpu_scratch returns it, growing it only if
 * a caller did not reserve enough. Stages carve their buffers from it. */
sf_status sf_gpu_reserve(sf_gpu *g, size_t bytes);
sf_status sf_gpu_scratch(sf_gpu *g, size_t bytes, void **ptr);

/* Device buffers kept by the context across runs, one per slot, grown (never
 * shrunk) when a run needs more: the runner's image, mask, labels, maps,
 * filtered image and catalogue, the deblending trees, the fit's pixel lists and
 * Jacobian rows, BANE's node grids (maps made later), convolve
 * noise=measured's sampled rows (of the image and of the filtered image),
 * and the batch engine's raw input slots, so a batch allocates once however many files it reads.
 * Freed by sf_gpu_destroy. */
enum {
    SF_GBUF_IMAGE, SF_GBUF_MASK, SF_GBUF_LABELS, SF_GBUF_FILT, SF_GBUF_BKG, SF_GBUF_RMS,
    SF_GBUF_SOURCES, SF_GBUF_DEBLEND, SF_GBUF_SAMPLE, SF_GBUF_FIT, SF_GBUF_FITJ, SF_GBUF_NODES,
    SF_GBUF_SAMPLE2,
    SF_GBUF_RAW0,
    SF_GBUF_NSLOTS = SF_GBUF_RAW0 + 4
};
sf_status sf_gpu_buffer(sf_gpu *g, int slot, size_t bytes, void **ptr);

/* The context's stream, as a void * (a cudaStream_t), for callers that order
 * their own copies against the stages (the batch engine). */
void *sf_gpu_stream(sf_gpu *g);
int sf_gpu_device(const sf_gpu *g);
/* Bytes of device memory free and in all (cudaMemGetInfo). */
sf_status sf_gpu_meminfo(sf_gpu *g, size_t *free_b, size_t *total_b);

/* Make the context's device current on the calling thread (each thread of
 * the batch engine that touches a context calls this first). */
sf_status sf_gpu_bind(sf_gpu *g);
/* Make device `device` current on the calling thread without a context of
 * skyfind's own (for a thread that only pins host memory). */
sf_status sf_gpu_use_device(int device);
/* 1 when the context's device has a sticky error (every later CUDA call on
 * it would fail: an illegal address, a launch failure); clears the error
 * otherwise. */
int sf_gpu_sticky_error(sf_gpu *g);


/* Host memory pinned for every device (cudaHostAllocPortable), for the batch
 * engine's buffer pool; plain malloc in a build without CUDA. */
sf_status sf_pinned_alloc(void **ptr, size_t bytes);
void sf_pinned_free(void *ptr);
/* Pin (and unpin) host memory that is already allocated, for every device
 * (cudaHostRegister, portable); the batch engine pins its reused buffers.
 * SF_ERR_NO_GPU in a build without CUDA. */
sf_status sf_host_register(void *ptr, size_t bytes);
void sf_host_unregister(void *ptr);

/* The copy lane: host-to-device copies on a second stream of the context, so
 * the next image goes up while the stages run on the first. Waits for the
 * copy, returns its device time (CUDA events) in *ms. Not counted in
 * sf_gpu_bytes (the batch engine counts them per file); may run on another
 * thread than the stages. */
sf_status sf_gpu_upload_lane(sf_gpu *g, void *dst, const void *src, size_t bytes, double *ms);

/* Raw device memory and counted copies (all on the context's stream). */
sf_status sf_gpu_malloc(sf_gpu *g, void **ptr, size_t bytes);
void sf_gpu_free(sf_gpu *g, void *ptr);
sf_status sf_gpu_host_malloc(sf_gpu *g, void **ptr, size_t bytes); /* pinned */
void sf_gpu_host_free(sf_gpu *g, void *ptr);
/* sf_gpu_to_device returns once src is read (the caller may reuse it); the
 * copy may still be on the stream, ahead of the work queued there after it. */
sf_status sf_gpu_to_device(sf_gpu *g, void *dst, const void *src, size_t bytes);
sf_status sf_gpu_to_host(sf_gpu *g, void *dst, const void *src, size_t bytes);
sf_status sf_gpu_memset(sf_gpu *g, void *dst, int value, size_t bytes);
/* Device to device on the context's stream; returns when the copy is done. */
sf_status sf_gpu_copy(sf_gpu *g, void *dst, const void *src, size_t bytes);
/* Flip the sign bit of n floats at dst (device memory), on the stream. */
sf_status sf_gpu_negate(sf_gpu *g, float *dst, size_t n);
/* The CUDA device that holds ptr (device or managed memory), or -1 (host
 * memory, or no CUDA). */
int sf_gpu_pointer_device(const void *ptr);
/* A caller's float32 image in device memory (rows row_bytes apart, on g's
 * device) copied into a new device image dst (sf_image_alloc on g), +-Inf
 * made NaN as the FITS reader makes them; the device is synchronised first,
 * so work the caller queued on its own streams is finished. */
sf_status sf_gpu_import_f32(sf_gpu *g, const void *src, long long row_bytes, int nx, int ny,
                            sf_image *dst);
/* Rows y0, y0 + step, ... of the device image `in`, copied one after the
 * other into the buffer SF_GBUF_SAMPLE: *out is that contiguous device image
 * (nx x the number of rows), valid until the slot is asked for again. */
sf_status sf_gpu_rows(sf_gpu *g, const sf_image *in, int y0, int step, sf_image *out);

void sf_gpu_bytes(const sf_gpu *g, uint64_t *h2d, uint64_t *d2h);
void sf_gpu_reset_bytes(sf_gpu *g);

/* Device-time measurement with CUDA events on the context's stream. */
typedef struct sf_gpu_timer sf_gpu_timer;
sf_status sf_gpu_timer_create(sf_gpu *g, sf_gpu_timer **t);
void sf_gpu_timer_destroy(sf_gpu_timer *t);
sf_status sf_gpu_timer_start(sf_gpu_timer *t);
sf_status sf_gpu_timer_stop(sf_gpu_timer *t, double *ms); /* waits for the stream */
/* sf_gpu_timer_stop in two halves: the stop recorded now, without waiting;
 * the time from start to that stop, waiting for it. */
sf_status sf_gpu_timer_lap(sf_gpu_timer *t);
sf_status sf_gpu_timer_read(sf_gpu_timer *t, double *ms);
/* Marks without waiting: event k (0 <= k < SF_GPU_TIMER_MARKS) recorded on
 * the stream now; the device time from mark k0 to mark k1, waiting for k1.
 * The pipeline runner marks each stage's end and reads the times after the
 * last, so the host queues a stage's work while the one before still runs. */
#define SF_GPU_TIMER_MARKS 40
sf_status sf_gpu_timer_mark(sf_gpu_timer *t, int k);
/* Marks 0 .. n-1 made now (sf_gpu_timer_mark makes a mark's event on its
 * first use, which would put cudaEventCreate between two stages). */
sf_status sf_gpu_timer_marks(sf_gpu_timer *t, int n);
sf_status sf_gpu_timer_between(sf_gpu_timer *t, int k0, int k1, double *ms);

/* The device's copy bandwidth: times cudaMemcpyAsync device-to-device of
 * `bytes` between two fresh buffers with events (a warm-up, then the median
 * of 7) and returns GB/s counting the bytes read plus the bytes written
 * (2*bytes per copy), the floor a memory-bound stage can reach. */
sf_status sf_gpu_copy_bandwidth(sf_gpu *g, size_t bytes, double *gbps);

#ifdef __cplusplus
}
#endif
#endif
