// The per-run GPU context: stream, scratch memory, pinned staging buffer,
// counted host<->device copies and event timers. GPU version only (the
// CPU-only build uses src/gpu_stub.c).
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "common.cuh"

struct sf_gpu_timer {
    sf_gpu *g;
    cudaEvent_t a, b;
};

// launchers

extern "C" int sf_gpu_compiled(void) { return 1; }

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
    SF_CUDA(cudaSetDevice(device));
    SF_CUDA(cudaGetDeviceProperties(&prop, device));
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    g->sm_count = prop.multiProcessorCount;
    g->smem_optin = prop.sharedMemPerBlockOptin;
    SF_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    g->pinned_bytes = 1 << 16;
    SF_CUDA(cudaMallocHost(&g->pinned, g->pinned_bytes));
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
    if (g->scratch)
        cudaFree(g->scratch);
    if (g->pinned)
        cudaFreeHost(g->pinned);
    if (g->stream)
        cudaStreamDestroy(g->stream);
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

extern "C" sf_status sf_gpu_reserve(sf_gpu *g, size_t bytes)
{
    sf_status st = SF_OK;
    if (bytes <= g->scratch_bytes)
        return SF_OK;
    if (g->scratch) {
        SF_CUDA(cudaStreamSynchronize(g->stream));
        cudaFree(g->scratch);
        g->scratch = NULL;
        g->scratch_bytes = 0;
    }
    {
        cudaError_t e = cudaMalloc(&g->scratch, bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();
            g->scratch = NULL;
            return sf_fail(SF_ERR_GPU_NOMEM, "cudaMalloc of %.1f MB of scratch failed: %s",
                           bytes / 1e6, cudaGetErrorString(e));
        }
    }
    g->scratch_bytes = bytes;
fail:
    return st;
}

extern "C" sf_status sf_gpu_scratch(sf_gpu *g, size_t bytes, void **ptr)
{
    sf_status st = sf_gpu_reserve(g, bytes ? bytes : 256);
    *ptr = st == SF_OK ? g->scratch : NULL;
    return st;
}

extern "C" sf_status sf_gpu_malloc(sf_gpu *g, void **ptr, size_t bytes)
{
    cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *ptr = NULL;
        return sf_fail(SF_ERR_GPU_NOMEM, "cudaMalloc of %.1f MB failed: %s", bytes / 1e6,
                       cudaGetErrorString(e));
    }
    return SF_OK;
}

extern "C" void sf_gpu_free(sf_gpu *g, void *ptr)
{
    if (ptr)
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
    SF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g->stream));
    SF_CUDA(cudaStreamSynchronize(g->stream));
    g->h2d += bytes;
fail:
    return st;
}

extern "C" sf_status sf_gpu_to_host(sf_gpu *g, void *dst, const void *src, size_t bytes)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g->stream));
    SF_CUDA(cudaStreamSynchronize(g->stream));
    g->d2h += bytes;
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
    free(t);
}

extern "C" sf_status sf_gpu_timer_start(sf_gpu_timer *t)
{
    sf_status st = SF_OK;
    SF_CUDA(cudaEventRecord(t->a, t->g->stream));
fail:
    return st;
}

extern "C" sf_status sf_gpu_timer_stop(sf_gpu_timer *t, double *ms)
{
    sf_status st = SF_OK;
    float f = 0;
    SF_CUDA(cudaEventRecord(t->b, t->g->stream));
    SF_CUDA(cudaEventSynchronize(t->b));
    SF_CUDA(cudaEventElapsedTime(&f, t->a, t->b));
    *ms = f;
fail:
    return st;
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
