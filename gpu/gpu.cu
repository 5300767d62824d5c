// The per-run GPU context: stream, scratch memory, pinned staging buffer,
// counted host<->device copies and event timers. GPU version only (the
// CPU-only build uses src/core/gpu_stub.c). In this file, in order: device
// count, the context's creation and teardown; device buffers kept across
// runs; pinned and registered host memory; the staged copies of large
// pageable buffers (stage_take, h2d, d2h) and the copy lane; scratch and
// allocation bookkeeping; counted copies, memset, negate, the raw import,
// the side streams (sf_gpu_fork, sf_gpu_fork_hi), kernels' shared-memory
// limits (sf_gpu_smem_max), sampled rows (rows_kernel: sf_gpu_rows,
// sf_gpu_rows_view, sf_gpu_rows_on); event timers and the copy-bandwidth probe; cuFFT, opened
// on first use.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "common.cuh"
#include "copy.h" /* src/calc: sf_copy_parallel */

// Staged uploads (h2d below): a chunk's bytes (SF_STAGE_N of them,
// common.cuh), the smallest upload staged.
#define SF_STAGE_CHUNK ((size_t)8 << 20)
#define SF_STAGE_MIN ((size_t)32 << 20)

struct sf_gpu_timer {
    sf_gpu *g;
    cudaEvent_t a, b;
    cudaEvent_t mk[SF_GPU_TIMER_MARKS]; // sf_gpu_timer_mark's, made on first use
};

// launchers

extern "C" int sf_gpu_compiled(void) { return 1; }

static int gpu_used; // a context was made (written once, read at exit)
extern "C" int sf_gpu_used(void) { return __atomic_load_n(&gpu_used, __ATOMIC_ACQUIRE); }

extern "C" int sf_gpu_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" sf_status sf_gpu_create(sf_gpu **out, int device)
{
    sf_status st = SF_OK;
    cudaDeviceProp prop;
    sf_gpu *g = (sf_gpu *)calloc(1, sizeof *g);
    *out = NULL;
    if (!g)
        return sf_fail(SF_ERR_NOMEM, "allocating the GPU context");
    if (sf_gpu_count() <= device) {
        free(g);
        return sf_fail(SF_ERR_NO_GPU, "no CUDA device %d (found %d)", device, sf_gpu_count());
    }
    g->device = device;
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_init(&g->stage_lock, NULL);
    SF_CUDA(cudaSetDevice(device));
    SF_CUDA(cudaGetDeviceProperties(&prop, device));
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    g->sm_count = prop.multiProcessorCount;
    g->smem_optin = prop.sharedMemPerBlockOptin;
    SF_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    if (getenv("SKYFIND_GPU_MEMLIMIT")) { // a smaller card, for tests of running out of memory
        char *end;
        double v = strtod(getenv("SKYFIND_GPU_MEMLIMIT"), &end);
        if (*end == 'k' || *end == 'K') v *= 1e3;
        else if (*end == 'M' || *end == 'm') v *= 1e6;
        else if (*end == 'G' || *end == 'g') v *= 1e9;
        g->memlimit = v > 0 ? (size_t)v : 0;
    }
    g->pinned_bytes = 1 << 16;
    SF_CUDA(cudaMallocHost(&g->pinned, g->pinned_bytes));
    __atomic_store_n(&gpu_used, 1, __ATOMIC_RELEASE);
    *out = g;
    return SF_OK;
fail:
    sf_gpu_destroy(g);
    return st;
}

extern "C" void sf_gpu_destroy(sf_gpu *g)
{
    if (!g)
        return;
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    sf_conv_cache_free(g);
    for (int i = 0; i < SF_GBUF_NSLOTS; i++)
        if (g->buf[i])
            cudaFree(g->buf[i]);
    if (g->scratch)
        cudaFree(g->scratch);
    if (g->pinned)
        cudaFreeHost(g->pinned);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    if (g->lane) {
        cudaStreamDestroy(g->lane);
        cudaEventDestroy(g->lane_ev[0]);
        cudaEventDestroy(g->lane_ev[1]);
    }
    if (g->aux[0]) {
        for (int i = 0; i < SF_GPU_NAUX; i++) {
            cudaStreamDestroy(g->aux[i]);
            cudaEventDestroy(g->join_ev[i]);
        }
        cudaEventDestroy(g->fork_ev);
    }
    if (g->stage) {
        cudaFreeHost(g->stage);
        for (int i = 0; i < SF_STAGE_N; i++)
            cudaEventDestroy(g->stage_ev[i]);
    }
    pthread_mutex_destroy(&g->stage_lock);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

extern "C" const char *sf_gpu_name(const sf_gpu *g) { return g ? g->name : "none"; }

extern "C" sf_status sf_gpu_sync(sf_gpu *g)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaStreamSynchronize(g->stream));
fail:
    return st;
}

// cudaMalloc within the context's SKYFIND_GPU_MEMLIMIT, with the one message
// for running out of device memory.
static sf_status dev_alloc(sf_gpu *g, void **ptr, size_t bytes, const char *what)
{
    cudaError_t e;
    *ptr = NULL;
    if (g->memlimit && g->allocated + bytes > g->memlimit)
        return sf_fail(SF_ERR_GPU_NOMEM,
                       "out of GPU memory: %s needs %.1f MB, %.1f MB of the %.1f MB allowed "
                       "(SKYFIND_GPU_MEMLIMIT) are in use",
                       what, bytes / 1e6, g->allocated / 1e6, g->memlimit / 1e6);
    e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        cudaGetLastError();
        *ptr = NULL;
        return sf_fail(SF_ERR_GPU_NOMEM, "out of GPU memory: cudaMalloc of %.1f MB for %s failed "
                       "(%.1f MB free of %.1f MB): %s", bytes / 1e6, what, fr / 1e6, tot / 1e6,
                       cudaGetErrorString(e));
    }
    g->allocated += bytes;
    return SF_OK;
}

extern "C" sf_status sf_gpu_buffer(sf_gpu *g, int slot, size_t bytes, void **ptr)
{
    sf_status st = SF_OK;
    *ptr = NULL;
    if (slot < 0 || slot >= SF_GBUF_NSLOTS)
        return sf_fail(SF_ERR_INTERNAL, "sf_gpu_buffer: no slot %d", slot);
    pthread_mutex_lock(&g->lock);
    if (bytes > g->buf_bytes[slot]) {
        if (g->buf[slot]) {
            SF_CUDA(cudaStreamSynchronize(g->stream));
            cudaFree(g->buf[slot]);
            g->allocated -= g->buf_bytes[slot];
            g->buf[slot] = NULL;
            g->buf_bytes[slot] = 0;
        }
        SF_TRY(dev_alloc(g, &g->buf[slot], bytes, "a run buffer"));
        g->buf_bytes[slot] = bytes;
    }
    *ptr = g->buf[slot];
fail:
    pthread_mutex_unlock(&g->lock);
    return st;
}

extern "C" sf_status sf_gpu_bind(sf_gpu *g)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaSetDevice(g->device));
fail:
    return st;
}

extern "C" sf_status sf_gpu_use_device(int device)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaSetDevice(device));
fail:
    return st;
}

extern "C" int sf_gpu_sticky_error(sf_gpu *g)
{
    cudaError_t e;
    if (!g)
        return 1;
    cudaSetDevice(g->device);
    e = cudaDeviceSynchronize();
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    // a sticky error stays: a second query still reports it
    {
        void *probe = NULL;
        int sticky = cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess ||
                     cudaMalloc(&probe, 256) != cudaSuccess;
        if (probe)
            cudaFree(probe);
        cudaGetLastError();
        return sticky;
    }
}

extern "C" sf_status sf_pinned_alloc(void **ptr, size_t bytes)
{
    cudaError_t e = cudaHostAlloc(ptr, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *ptr = NULL;
        return sf_fail(SF_ERR_NOMEM, "cudaHostAlloc of %.1f MB of pinned memory failed: %s",
                       bytes / 1e6, cudaGetErrorString(e));
    }
    return SF_OK;
}

extern "C" void sf_pinned_free(void *ptr)
{
    if (ptr)
        cudaFreeHost(ptr);
}

extern "C" sf_status sf_host_register(void *ptr, size_t bytes)
{
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return sf_fail(SF_ERR_CUDA, "cudaHostRegister of %.1f MB failed: %s", bytes / 1e6,
                       cudaGetErrorString(e));
    }
    return SF_OK;
}

extern "C" void sf_host_unregister(void *ptr)
{
    if (ptr && cudaHostUnregister(ptr) != cudaSuccess)
        cudaGetLastError();
}

// A host-to-device copy on stream s, finished when it returns. A pageable
// source of SF_STAGE_MIN bytes or more goes through the context's pinned
// chunks: a team of host threads copies a chunk in (sf_copy_parallel) while
// the copy engine takes the one before. The driver's own pageable copy
// stages through its buffers on one thread: 268 MB took about 30 ms on the
// H100 machine (9 GB/s), against 5 ms from pinned memory; pinning the
// image itself (cudaMallocHost, cudaHostRegister) costs more than that
// for one use (tests/bench/RESULTS.md). Pinned or registered host memory,
// small copies, and a copy while another one holds the chunks (an upload on
// the batch engine's copy lane beside a download of the compute thread's
// maps) go directly; so does every copy with SKYFIND_UPLOAD_STAGED=0.
static int host_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeHost;
}

// SKYFIND_UPLOAD_STAGED=0 (a developer knob, for before/after timings):
// the driver's plain copy for every copy, both ways.
static int staging_on(void)
{
    const char *v = getenv("SKYFIND_UPLOAD_STAGED");
    return !(v && !strcmp(v, "0"));
}

// Takes the context's pinned chunks for one staged copy of bytes with the
// host side at host: 1 with stage_lock held and the chunks made, 0 for a
// plain copy (small, pinned host memory, the knob, chunks in use or not
// to be had).
static int stage_take(sf_gpu *g, const void *host, size_t bytes)
{
    if (bytes < SF_STAGE_MIN || !staging_on() || host_pinned(host) ||
        pthread_mutex_trylock(&g->stage_lock) != 0)
        return 0;
    if (!g->stage && !g->stage_failed) {
        int n = 0;
        if (cudaMallocHost(&g->stage, SF_STAGE_N * SF_STAGE_CHUNK) == cudaSuccess) {
            for (; n < SF_STAGE_N; n++)
                if (cudaEventCreateWithFlags(&g->stage_ev[n], cudaEventDisableTiming) != cudaSuccess)
                    break;
        }
        if (n < SF_STAGE_N) { /* no pinned chunks: plain copies from now on */
            cudaGetLastError();
            while (n > 0)
                cudaEventDestroy(g->stage_ev[--n]);
            if (g->stage)
                cudaFreeHost(g->stage);
            g->stage = NULL;
            g->stage_failed = 1;
        }
    }
    if (!g->stage) {
        pthread_mutex_unlock(&g->stage_lock);
        return 0;
    }
    return 1;
}

// Gives the chunks back after a staged copy; after a failure, once nothing
// on s can still be copying into or out of them.
static void stage_give(sf_gpu *g, cudaStream_t s, sf_status st)
{
    if (st)
        cudaStreamSynchronize(s);
    pthread_mutex_unlock(&g->stage_lock);
}

// The bytes of the chunk that starts at off.
static size_t stage_len(size_t bytes, size_t off)
{
    return bytes - off < SF_STAGE_CHUNK ? bytes - off : SF_STAGE_CHUNK;
}

// The copy without the chunks (the driver's), finished when it returns.
static sf_status plain_copy(cudaStream_t s, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s));
    SF_CUDA(cudaStreamSynchronize(s));
fail:
    return st;
}

static sf_status h2d(sf_gpu *g, cudaStream_t s, void *dst, const void *src, size_t bytes)
{
    sf_status st = SF_OK;
    if (!stage_take(g, src, bytes))
        return plain_copy(s, dst, src, bytes, cudaMemcpyHostToDevice);
    for (size_t k = 0, off = 0; off < bytes; k++, off += SF_STAGE_CHUNK) {
        const int slot = (int)(k % SF_STAGE_N);
        char *chunk = (char *)g->stage + (size_t)slot * SF_STAGE_CHUNK;
        /* the chunk's previous copy (this upload's, or an earlier one's)
         * has left it */
        SF_CUDA(cudaEventSynchronize(g->stage_ev[slot]));
        sf_copy_parallel(chunk, (const char *)src + off, stage_len(bytes, off));
        SF_CUDA(cudaMemcpyAsync((char *)dst + off, chunk, stage_len(bytes, off), cudaMemcpyHostToDevice, s));
        SF_CUDA(cudaEventRecord(g->stage_ev[slot], s));
    }
    /* no wait for the last chunks: src is read, the copies are on s ahead
     * of whatever the caller queues there, and the next user of a chunk
     * waits for its event (here, and in d2h) */
fail:
    stage_give(g, s, st);
    return st;
}

// A small download on the context's stream (the stages' counts and totals)
// lands in the last SF_BOUNCE bytes of the pinned buffer, then is copied
// out: a pageable destination made the driver stage the copy itself, a few
// microseconds more a call, while the device waited. Other threads' copies
// (the batch engine's lanes) use their own streams and do not come here;
// the stages that use the pinned buffer themselves read it back before
// their next download. SKYFIND_D2H_BOUNCE=0 (a developer knob, for A/B
// runs): the plain copy, as before.
#define SF_BOUNCE 4096
static int bounce_on(void)
{
    const char *v = getenv("SKYFIND_D2H_BOUNCE");
    return !(v && !strcmp(v, "0"));
}

static sf_status d2h_bounce(sf_gpu *g, cudaStream_t s, void *dst, const void *src, size_t bytes)
{
    sf_status st = SF_OK;
    char *b = (char *)g->pinned + g->pinned_bytes - SF_BOUNCE;
    SF_CUDA(cudaMemcpyAsync(b, src, bytes, cudaMemcpyDeviceToHost, s));
    SF_CUDA(cudaStreamSynchronize(s));
    memcpy(dst, b, bytes);
fail:
    return st;
}

// The download's mirror of h2d: the copy engine fills the pinned chunks
// (up to SF_STAGE_N ahead) while host threads empty each one into dst
// (stage maps and check images of 268 MB at 8192^2); small ones bounce
// (above).
static sf_status d2h(sf_gpu *g, cudaStream_t s, void *dst, const void *src, size_t bytes)
{
    sf_status st = SF_OK;
    const size_t nk = (bytes + SF_STAGE_CHUNK - 1) / SF_STAGE_CHUNK;
    if (bytes <= SF_BOUNCE && s == g->stream && g->pinned && g->pinned_bytes >= 2 * SF_BOUNCE &&
        bounce_on())
        return d2h_bounce(g, s, dst, src, bytes);
    if (!stage_take(g, dst, bytes))
        return plain_copy(s, dst, src, bytes, cudaMemcpyDeviceToHost);
    for (size_t k = 0; k < nk + SF_STAGE_N; k++) {
        if (k >= SF_STAGE_N) { /* chunk j = k - SF_STAGE_N is down: out of its slot */
            const size_t off = (k - SF_STAGE_N) * SF_STAGE_CHUNK;
            const int slot = (int)((k - SF_STAGE_N) % SF_STAGE_N);
            SF_CUDA(cudaEventSynchronize(g->stage_ev[slot]));
            sf_copy_parallel((char *)dst + off, (char *)g->stage + (size_t)slot * SF_STAGE_CHUNK,
                             stage_len(bytes, off));
        }
        if (k < nk) { /* chunk k into the slot just emptied */
            const size_t off = k * SF_STAGE_CHUNK;
            const int slot = (int)(k % SF_STAGE_N);
            if (k < SF_STAGE_N) /* an upload's last chunks may still be leaving it */
                SF_CUDA(cudaEventSynchronize(g->stage_ev[slot]));
            SF_CUDA(cudaMemcpyAsync((char *)g->stage + (size_t)slot * SF_STAGE_CHUNK, (const char *)src + off,
                                    stage_len(bytes, off), cudaMemcpyDeviceToHost, s));
            SF_CUDA(cudaEventRecord(g->stage_ev[slot], s));
        }
    }
fail:
    stage_give(g, s, st);
    return st;
}

extern "C" sf_status sf_gpu_upload_lane(sf_gpu *g, void *dst, const void *src, size_t bytes,
                                        double *ms)
{
    sf_status st = SF_OK;
    float f = 0;
    if (!g->lane) {
        SF_CUDA(cudaStreamCreateWithFlags(&g->lane, cudaStreamNonBlocking));
        SF_CUDA(cudaEventCreate(&g->lane_ev[0]));
        SF_CUDA(cudaEventCreate(&g->lane_ev[1]));
    }
    SF_CUDA(cudaEventRecord(g->lane_ev[0], g->lane));
    SF_TRY(h2d(g, g->lane, dst, src, bytes));
    SF_CUDA(cudaEventRecord(g->lane_ev[1], g->lane));
    SF_CUDA(cudaEventSynchronize(g->lane_ev[1]));
    SF_CUDA(cudaEventElapsedTime(&f, g->lane_ev[0], g->lane_ev[1]));
    if (ms)
        *ms = f;
fail:
    return st;
}

extern "C" void *sf_gpu_stream(sf_gpu *g) { return g ? (void *)g->stream : NULL; }
extern "C" int sf_gpu_device(const sf_gpu *g) { return g ? g->device : -1; }

extern "C" sf_status sf_gpu_meminfo(sf_gpu *g, size_t *free_b, size_t *total_b)
{
    sf_status st = SF_OK;
    *free_b = *total_b = 0;
    SF_CUDA(cudaMemGetInfo(free_b, total_b));
    if (g && g->memlimit) {
        *total_b = g->memlimit;
        *free_b = g->memlimit > g->allocated ? g->memlimit - g->allocated : 0;
    }
fail:
    return st;
}

extern "C" sf_status sf_gpu_reserve(sf_gpu *g, size_t bytes)
{
    sf_status st = SF_OK;
    if (bytes <= g->scratch_bytes)
        return SF_OK;
    pthread_mutex_lock(&g->lock);
    if (g->scratch) {
        SF_CUDA(cudaStreamSynchronize(g->stream));
        cudaFree(g->scratch);
        g->allocated -= g->scratch_bytes;
        g->scratch = NULL;
        g->scratch_bytes = 0;
    }
    SF_TRY(dev_alloc(g, &g->scratch, bytes, "scratch"));
    g->scratch_bytes = bytes;
fail:
    pthread_mutex_unlock(&g->lock);
    return st;
}

extern "C" sf_status sf_gpu_scratch(sf_gpu *g, size_t bytes, void **ptr)
{
    sf_status st = sf_gpu_reserve(g, bytes ? bytes : 256);
    *ptr = st == SF_OK ? g->scratch : NULL;
    return st;
}

// Blocks from sf_gpu_malloc are few (the FFT spectrum, a kernel's weights):
// their sizes are kept so SKYFIND_GPU_MEMLIMIT counts them.
extern "C" sf_status sf_gpu_malloc(sf_gpu *g, void **ptr, size_t bytes)
{
    sf_status st;
    pthread_mutex_lock(&g->lock);
    st = dev_alloc(g, ptr, bytes, "a stage buffer");
    if (st == SF_OK) {
        int k;
        for (k = 0; k < SF_GPU_NBLOCKS && g->blk[k]; k++)
            ;
        if (k < SF_GPU_NBLOCKS) {
            g->blk[k] = *ptr;
            g->blk_bytes[k] = bytes;
        } else {
            g->allocated -= bytes; // not tracked: not counted against the limit
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

extern "C" void sf_gpu_free(sf_gpu *g, void *ptr)
{
    if (!ptr)
        return;
    if (g)
        pthread_mutex_lock(&g->lock);
    for (int k = 0; g && k < SF_GPU_NBLOCKS; k++)
        if (g->blk[k] == ptr) {
            g->allocated -= g->blk_bytes[k];
            g->blk[k] = NULL;
            g->blk_bytes[k] = 0;
        }
    if (g)
        pthread_mutex_unlock(&g->lock);
    cudaFree(ptr);
}

extern "C" sf_status sf_gpu_host_malloc(sf_gpu *g, void **ptr, size_t bytes)
{
    cudaError_t e = cudaMallocHost(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *ptr = NULL;
        return sf_fail(SF_ERR_NOMEM, "cudaMallocHost of %.1f MB failed: %s", bytes / 1e6,
                       cudaGetErrorString(e));
    }
    return SF_OK;
}

extern "C" void sf_gpu_host_free(sf_gpu *g, void *ptr)
{
    if (ptr)
        cudaFreeHost(ptr);
}

extern "C" sf_status sf_gpu_to_device(sf_gpu *g, void *dst, const void *src, size_t bytes)
{
    sf_status st = SF_OK;
    SF_TRY(h2d(g, g->stream, dst, src, bytes));
    g->h2d += bytes;
fail:
    return st;
}

extern "C" sf_status sf_gpu_to_host(sf_gpu *g, void *dst, const void *src, size_t bytes)
{
    sf_status st = SF_OK;
    SF_TRY(d2h(g, g->stream, dst, src, bytes));
    g->d2h += bytes;
fail:
    return st;
}

extern "C" sf_status sf_gpu_copy(sf_gpu *g, void *dst, const void *src, size_t bytes)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g->stream));
    SF_CUDA(cudaStreamSynchronize(g->stream));
fail:
    return st;
}

extern "C" sf_status sf_gpu_memset(sf_gpu *g, void *dst, int value, size_t bytes)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaMemsetAsync(dst, value, bytes, g->stream));
fail:
    return st;
}

static __global__ void negate_kernel(uint32_t *__restrict__ p, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] ^= 0x80000000u;
}

extern "C" sf_status sf_gpu_negate(sf_gpu *g, float *dst, size_t n)
{
    sf_status st = SF_OK;
    unsigned blocks = sf_blocks(n, 256);
    if (n == 0)
        return SF_OK;
    if (blocks > (unsigned)g->sm_count * 16)
        blocks = (unsigned)g->sm_count * 16;
    negate_kernel<<<blocks, 256, 0, g->stream>>>(reinterpret_cast<uint32_t *>(dst), n);
    SF_LAUNCHED();
fail:
    return st;
}

extern "C" int sf_gpu_pointer_device(const void *ptr)
{
    cudaPointerAttributes a;
    if (!ptr || cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

static __global__ void import_kernel(const char *__restrict__ src, long long row_bytes, int nx, int ny,
                                     float *__restrict__ dst, size_t dstride)
{
    const size_t n = (size_t)nx * ny;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t y = i / nx, x = i % nx;
        dst[y * dstride + x] = sf_pixel_clean(((const float *)(src + y * row_bytes))[x]);
    }
}

extern "C" sf_status sf_gpu_import_f32(sf_gpu *g, const void *src, long long row_bytes, int nx, int ny,
                                       sf_image *dst)
{
    sf_status st = SF_OK;
    unsigned blocks = sf_blocks(sf_npix(nx, ny), 256);
    if (blocks > (unsigned)g->sm_count * 16)
        blocks = (unsigned)g->sm_count * 16;
    memset(dst, 0, sizeof *dst);
    if (row_bytes % (long long)sizeof(float))
        return sf_fail(SF_ERR_PARAM, "a device image's rows must be a whole number of floats apart "
                       "(%lld bytes)", row_bytes);
    SF_CUDA(cudaDeviceSynchronize()); // the caller's streams (CuPy's) are done with the array
    SF_TRY(sf_image_alloc(dst, nx, ny, SF_DEVICE, g));
    import_kernel<<<blocks, 256, 0, g->stream>>>((const char *)src, row_bytes, nx, ny, dst->data,
                                                 dst->stride);
    SF_LAUNCHED();
    return SF_OK;
fail:
    sf_image_free(dst, g);
    return st;
}

// The side streams, made on first use: aux[0..1] at the main stream's
// priority, aux[2..3] (sf_gpu_fork_hi) at the highest, so that the block
// scheduler starts their blocks before more of the main stream's
// (sf_convolve_noise_gpu's clippings beside the convolution; the
// deblending's side launches were no faster with it: tests/bench/
// RESULTS.md). SKYFIND_AUX_PRIORITY=0 makes all four the main stream's,
// for A/B runs.
static sf_status aux_make(sf_gpu *g)
{
    sf_status st = SF_OK;
    int least = 0, greatest = 0;
    const char *e = getenv("SKYFIND_AUX_PRIORITY");
    SF_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    if (e && atoi(e) == 0)
        greatest = least;
    for (int i = 0; i < SF_GPU_NAUX; i++) {
        SF_CUDA(cudaStreamCreateWithPriority(&g->aux[i], cudaStreamNonBlocking, i < 2 ? least : greatest));
        SF_CUDA(cudaEventCreateWithFlags(&g->join_ev[i], cudaEventDisableTiming));
    }
    SF_CUDA(cudaEventCreateWithFlags(&g->fork_ev, cudaEventDisableTiming));
fail:
    return st;
}

static sf_status fork_range(sf_gpu *g, int first, int n)
{
    sf_status st = SF_OK;
    if (!g->fork_ev)
        SF_TRY(aux_make(g));
    SF_CUDA(cudaEventRecord(g->fork_ev, g->stream));
    for (int i = first; i < first + n && i < first + 2; i++)
        SF_CUDA(cudaStreamWaitEvent(g->aux[i], g->fork_ev, 0));
fail:
    return st;
}

static sf_status join_range(sf_gpu *g, int first, int n)
{
    sf_status st = SF_OK;
    for (int i = first; i < first + n && i < first + 2; i++) {
        SF_CUDA(cudaEventRecord(g->join_ev[i], g->aux[i]));
        SF_CUDA(cudaStreamWaitEvent(g->stream, g->join_ev[i], 0));
    }
fail:
    return st;
}

sf_status sf_gpu_fork(sf_gpu *g, int n) { return fork_range(g, 0, n); }
sf_status sf_gpu_join(sf_gpu *g, int n) { return join_range(g, 0, n); }
sf_status sf_gpu_fork_hi(sf_gpu *g, int n) { return fork_range(g, 2, n); }
sf_status sf_gpu_join_hi(sf_gpu *g, int n) { return join_range(g, 2, n); }

sf_status sf_gpu_smem_max(sf_gpu *g, const void *fn, size_t bytes)
{
    sf_status st = SF_OK;
    int i = 0;
    while (i < SF_GPU_NATTR && g->attr_fn[i] && g->attr_fn[i] != fn)
        i++;
    if (i < SF_GPU_NATTR && g->attr_fn[i] == fn && g->attr_smem[i] >= bytes)
        return SF_OK;
    SF_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    if (i < SF_GPU_NATTR) { // else (a full table) ask every time
        g->attr_fn[i] = fn;
        g->attr_smem[i] = bytes;
    }
fail:
    return st;
}

// Every step-th row from y0 into a compact image (a block a row). A kernel
// rather than cudaMemcpy2DAsync: the 2-D copy's call took about 30 us of the
// host's time for 1024 rows of 8192 pixels (sftrace), twice a radio run,
// with the GPU idle; this launch takes a few.
static __global__ void rows_kernel(const float *__restrict__ src, size_t pitch, int nx,
                                   float *__restrict__ dst)
{
    const float *s = src + (size_t)blockIdx.x * pitch;
    float *d = dst + (size_t)blockIdx.x * nx;
    for (int x = threadIdx.x; x < nx; x += blockDim.x)
        d[x] = s[x];
}

// A compact device image of the rows y0, y0 + step, ... of in, in the
// context's buffer `slot` (nothing copied yet).
sf_status sf_gpu_rows_view(sf_gpu *g, const sf_image *in, int y0, int step, int slot, sf_image *out)
{
    sf_status st = SF_OK;
    void *d = NULL;
    int rows = y0 >= 0 && y0 < in->ny && step >= 1 ? (in->ny - 1 - y0) / step + 1 : 0;
    memset(out, 0, sizeof *out);
    if (rows < 1 || in->loc != SF_DEVICE)
        return sf_fail(SF_ERR_INTERNAL, "sf_gpu_rows: rows from %d by %d of a %d-row %s image", y0, step,
                       in->ny, in->loc == SF_DEVICE ? "device" : "host");
    SF_TRY(sf_gpu_buffer(g, slot, (size_t)in->nx * rows * sizeof(float), &d));
    out->nx = in->nx;
    out->ny = rows;
    out->stride = (size_t)in->nx;
    out->data = (float *)d;
    out->loc = SF_DEVICE;
fail:
    return st;
}

// The rows into such a view, on stream s.
sf_status sf_gpu_rows_on(cudaStream_t s, const sf_image *in, int y0, int step, sf_image *out)
{
    sf_status st = SF_OK;
    rows_kernel<<<out->ny, 256, 0, s>>>(in->data + (size_t)y0 * in->stride, in->stride * step, in->nx,
                                        out->data);
    SF_LAUNCHED();
fail:
    return st;
}

extern "C" sf_status sf_gpu_rows(sf_gpu *g, const sf_image *in, int y0, int step, sf_image *out)
{
    sf_status st = sf_gpu_rows_view(g, in, y0, step, SF_GBUF_SAMPLE, out);
    return st ? st : sf_gpu_rows_on(g->stream, in, y0, step, out);
}

extern "C" void sf_gpu_bytes(const sf_gpu *g, uint64_t *h2d, uint64_t *d2h)
{
    if (h2d)
        *h2d = g ? g->h2d : 0;
    if (d2h)
        *d2h = g ? g->d2h : 0;
}

extern "C" void sf_gpu_reset_bytes(sf_gpu *g)
{
    g->h2d = g->d2h = 0;
}

extern "C" sf_status sf_gpu_timer_create(sf_gpu *g, sf_gpu_timer **out)
{
    sf_status st = SF_OK;
    sf_gpu_timer *t = (sf_gpu_timer *)calloc(1, sizeof *t);
    *out = NULL;
    if (!t)
        return sf_fail(SF_ERR_NOMEM, "allocating a timer");
    t->g = g;
    SF_CUDA(cudaEventCreate(&t->a));
    SF_CUDA(cudaEventCreate(&t->b));
    *out = t;
    return SF_OK;
fail:
    sf_gpu_timer_destroy(t);
    return st;
}

extern "C" void sf_gpu_timer_destroy(sf_gpu_timer *t)
{
    if (!t)
        return;
    if (t->a)
        cudaEventDestroy(t->a);
    if (t->b)
        cudaEventDestroy(t->b);
    for (int k = 0; k < SF_GPU_TIMER_MARKS; k++)
        if (t->mk[k])
            cudaEventDestroy(t->mk[k]);
    free(t);
}

extern "C" sf_status sf_gpu_timer_mark(sf_gpu_timer *t, int k)
{
    sf_status st = SF_OK;
    if (k < 0 || k >= SF_GPU_TIMER_MARKS)
        return sf_fail(SF_ERR_INTERNAL, "timer mark %d of %d", k, SF_GPU_TIMER_MARKS);
    if (!t->mk[k])
        SF_CUDA(cudaEventCreate(&t->mk[k]));
    SF_CUDA(cudaEventRecord(t->mk[k], t->g->stream));
fail:
    return st;
}

extern "C" sf_status sf_gpu_timer_marks(sf_gpu_timer *t, int n)
{
    sf_status st = SF_OK;
    for (int k = 0; k < n && k < SF_GPU_TIMER_MARKS; k++)
        if (!t->mk[k])
            SF_CUDA(cudaEventCreate(&t->mk[k]));
fail:
    return st;
}

extern "C" sf_status sf_gpu_timer_between(sf_gpu_timer *t, int k0, int k1, double *ms)
{
    sf_status st = SF_OK;
    float f = 0;
    if (k0 < 0 || k1 < 0 || k0 >= SF_GPU_TIMER_MARKS || k1 >= SF_GPU_TIMER_MARKS || !t->mk[k0] ||
        !t->mk[k1])
        return sf_fail(SF_ERR_INTERNAL, "timer marks %d and %d not recorded", k0, k1);
    SF_CUDA(cudaEventSynchronize(t->mk[k1]));
    SF_CUDA(cudaEventElapsedTime(&f, t->mk[k0], t->mk[k1]));
    *ms = f;
fail:
    return st;
}

extern "C" sf_status sf_gpu_timer_start(sf_gpu_timer *t)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaEventRecord(t->a, t->g->stream));
fail:
    return st;
}

extern "C" sf_status sf_gpu_timer_lap(sf_gpu_timer *t)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaEventRecord(t->b, t->g->stream));
fail:
    return st;
}

extern "C" sf_status sf_gpu_timer_read(sf_gpu_timer *t, double *ms)
{
    sf_status st = SF_OK;
    float f = 0;
    SF_CUDA(cudaEventSynchronize(t->b));
    SF_CUDA(cudaEventElapsedTime(&f, t->a, t->b));
    *ms = f;
fail:
    return st;
}

extern "C" sf_status sf_gpu_timer_stop(sf_gpu_timer *t, double *ms)
{
    sf_status st = sf_gpu_timer_lap(t);
    return st ? st : sf_gpu_timer_read(t, ms);
}

extern "C" sf_status sf_gpu_copy_bandwidth(sf_gpu *g, size_t bytes, double *gbps)
{
    sf_status st = SF_OK;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float ms[7];
    *gbps = 0;
    SF_CUDA(cudaMalloc(&a, bytes));
    SF_CUDA(cudaMalloc(&b, bytes));
    SF_CUDA(cudaMemsetAsync(a, 0, bytes, g->stream));
    SF_CUDA(cudaEventCreate(&e0));
    SF_CUDA(cudaEventCreate(&e1));
    SF_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g->stream)); // warm-up
    for (int i = 0; i < 7; i++) {
        SF_CUDA(cudaEventRecord(e0, g->stream));
        SF_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g->stream));
        SF_CUDA(cudaEventRecord(e1, g->stream));
        SF_CUDA(cudaEventSynchronize(e1));
        SF_CUDA(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    for (int i = 1; i < 7; i++) // insertion sort for the median
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
            float t = ms[j];
            ms[j] = ms[j - 1];
            ms[j - 1] = t;
        }
    *gbps = 2.0 * (double)bytes / (ms[3] * 1e6);
fail:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (a)
        cudaFree(a);
    if (b)
        cudaFree(b);
    return st;
}

// ---- cuFFT, opened on first use ---------------------------------------------

const sf_cufft_fns *sf_cufft = NULL;
static sf_cufft_fns cufft_fns;
static pthread_once_t cufft_once = PTHREAD_ONCE_INIT;
static char cufft_why[512];

#define SF_STR2(x) #x
#define SF_STR(x) SF_STR2(x)

static void cufft_open(void)
{
    // the soname of the toolkit built against, then the toolkit's own folder
    // (its lib64 is not on the loader's path everywhere)
    const char *names[] = {"libcufft.so." SF_STR(CUFFT_VER_MAJOR),
#ifdef SKYFIND_CUDA_LIBDIR
                           SKYFIND_CUDA_LIBDIR "/libcufft.so." SF_STR(CUFFT_VER_MAJOR),
#endif
                           "libcufft.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cufft_why, sizeof cufft_why, "cuFFT (%s) could not be loaded: %s", names[0],
                 dlerror());
        return;
    }
    cufft_fns.plan2d = (cufftResult(*)(cufftHandle *, int, int, cufftType))dlsym(h, "cufftPlan2d");
    cufft_fns.destroy = (cufftResult(*)(cufftHandle))dlsym(h, "cufftDestroy");
    cufft_fns.set_stream = (cufftResult(*)(cufftHandle, cudaStream_t))dlsym(h, "cufftSetStream");
    cufft_fns.exec_r2c =
        (cufftResult(*)(cufftHandle, cufftReal *, cufftComplex *))dlsym(h, "cufftExecR2C");
    cufft_fns.exec_c2r =
        (cufftResult(*)(cufftHandle, cufftComplex *, cufftReal *))dlsym(h, "cufftExecC2R");
    if (!cufft_fns.plan2d || !cufft_fns.destroy || !cufft_fns.set_stream || !cufft_fns.exec_r2c ||
        !cufft_fns.exec_c2r) {
        snprintf(cufft_why, sizeof cufft_why, "cuFFT (%s) lacks a function skyfind calls", names[0]);
        return;
    }
    sf_cufft = &cufft_fns;
}

extern "C" const sf_cufft_fns *sf_cufft_load(void)
{
    pthread_once(&cufft_once, cufft_open);
    if (!sf_cufft)
        sf_fail(SF_ERR_CUFFT, "%s", cufft_why);
    return sf_cufft;
}

extern "C" const char *sf_cufft_name(cufftResult r)
{
    switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "unknown cuFFT error";
    }
}
