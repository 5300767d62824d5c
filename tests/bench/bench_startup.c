/* bench_startup: what starting CUDA costs a process on this machine, apart
 * from skyfind (it links only the CUDA runtime and driver, not skyfind or
 * cuFFT): the driver's start (cuInit), the primary context, the runtime's
 * attach to it, and the calls sf_gpu_create makes (device properties, a
 * stream, 64 kB of pinned memory), then a first 64 MB cudaMalloc and a 64 MB
 * cudaMallocHost. Run it a few times as separate processes and set its
 * numbers beside `skyfind run -v`'s "startup" line: what skyfind adds on top
 * of them is its own to cut. Wall clocks (CLOCK_MONOTONIC), milliseconds.
 *   bench_startup [DEVICE]     prints one line of key=value pairs */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#define CK(call)                                                                   \
    do {                                                                           \
        if ((call) != 0) {                                                         \
            fprintf(stderr, "bench_startup: %s failed at line %d\n", #call, __LINE__); \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int dev = argc > 1 ? atoi(argv[1]) : 0, n = 0;
    CUdevice cu;
    CUcontext ctx;
    cudaStream_t s;
    struct cudaDeviceProp prop;
    void *p, *h, *small;
    double t0 = now_ms(), t[9];
    CK(cuInit(0));
    t[0] = now_ms();
    CK(cuDeviceGetCount(&n));
    CK(cuDeviceGet(&cu, dev));
    CK(cuDevicePrimaryCtxRetain(&ctx, cu));
    CK(cuCtxSetCurrent(ctx));
    t[1] = now_ms();
    CK(cudaSetDevice(dev));
    CK(cudaFree(0));
    t[2] = now_ms();
    CK(cudaGetDeviceProperties(&prop, dev));
    t[3] = now_ms();
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMallocHost(&small, 1 << 16));
    t[4] = now_ms();
    CK(cudaMalloc(&p, 64u << 20));
    t[5] = now_ms();
    CK(cudaMallocHost(&h, 64u << 20));
    t[6] = now_ms();
    CK(cudaMemcpyAsync(p, h, 64u << 20, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    t[7] = now_ms();
    cudaFreeHost(h);
    cudaFreeHost(small);
    cudaFree(p);
    cudaStreamDestroy(s);
    t[8] = now_ms();
    printf("device=%d gpus=%d name=\"%s\" cuInit=%.1f primary_ctx=%.1f runtime_attach=%.1f "
           "properties=%.1f stream_and_pinned64k=%.1f malloc64M=%.1f mallochost64M=%.1f "
           "upload64M=%.1f frees=%.1f total=%.1f\n",
           dev, n, prop.name, t[0] - t0, t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3],
           t[5] - t[4], t[6] - t[5], t[7] - t[6], t[8] - t[7], t[8] - t0);
    return 0;
}
