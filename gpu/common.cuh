// Private helpers shared by the GPU stages: the context's layout, the CUDA
// and cuFFT checking macros (they record call, file and line into
// sf_errdetail and jump to the function's `fail:` label), launch checks.
#ifndef SKYFIND_GPU_COMMON_CUH
#define SKYFIND_GPU_COMMON_CUH

#include <cuda_runtime.h>
#include <cufft.h>
#include <stdint.h>
#include <pthread.h>
#include "skyfind/gpu.h"
#include "skyfind/status.h"
#include "skyfind/background.h" // sf_bkg_params, sf_bkg_stats (sf_bkg_clip_launch)

struct sf_gpu {
    int device;
    cudaStream_t stream;
    char name[256];
    int sm_count;
    size_t smem_optin;        // largest dynamic shared memory a block may ask for
    void *scratch;
    size_t scratch_bytes;
    void *pinned;             // small pinned buffer for scalar downloads
    size_t pinned_bytes;
    uint64_t h2d, d2h;        // bytes moved each way
    struct sf_conv_cache *conv; // convolve: cuFFT plans, the kernel's spectrum (gpu/convolve.cu)
    void *buf[SF_GBUF_NSLOTS];  // buffers kept across runs (sf_gpu_buffer)
    size_t buf_bytes[SF_GBUF_NSLOTS];
    size_t memlimit;          // SKYFIND_GPU_MEMLIMIT: refuse allocations past this many bytes (0: none)
    size_t allocated;         // bytes held through sf_gpu_malloc/sf_gpu_buffer/scratch, for memlimit
#define SF_GPU_NBLOCKS 16
    void *blk[SF_GPU_NBLOCKS];  // sf_gpu_malloc's live blocks and their sizes
    size_t blk_bytes[SF_GPU_NBLOCKS];
    cudaStream_t lane;        // the copy lane (sf_gpu_upload_lane), created on first use
    cudaEvent_t lane_ev[2];
#define SF_GPU_NAUX 4
    cudaStream_t aux[SF_GPU_NAUX]; // side streams for a stage's independent launches (sf_gpu_fork,
                                   // sf_gpu_fork_hi: aux[2..3], the highest priority)
    cudaEvent_t fork_ev, join_ev[SF_GPU_NAUX];
    pthread_mutex_t lock;     // the allocation bookkeeping above, shared by the lane's thread
    // Staged copies of large pageable buffers (h2d and d2h in gpu/gpu.cu):
    // SF_STAGE_N pinned chunks of SF_STAGE_CHUNK bytes, made on the first
    // such copy, and the event of each chunk's last copy; one copy at a time.
#define SF_STAGE_N 3
    void *stage;
    cudaEvent_t stage_ev[SF_STAGE_N];
    int stage_failed;         // the pinned chunks could not be made: plain copies
    pthread_mutex_t stage_lock;
    // The largest dynamic shared memory each kernel has been allowed
    // (sf_gpu_smem_max), so that a run asks the driver once.
#define SF_GPU_NATTR 16
    const void *attr_fn[SF_GPU_NATTR];
    size_t attr_smem[SF_GPU_NATTR];
};

// Let fn launch with bytes of dynamic shared memory (cudaFuncSetAttribute's
// MaxDynamicSharedMemorySize), calling the driver only when bytes is more
// than fn was allowed before on this context: the call took 9-14 us of the
// host's time, with the GPU idle, at each of radio.pipe's stages (sftrace).
sf_status sf_gpu_smem_max(sf_gpu *g, const void *fn, size_t bytes);

// Independent launches of one stage side by side: sf_gpu_fork(g, n) lets
// g->aux[0..n-1] (n <= 2, created on first use) start after the work queued
// so far on g->stream; sf_gpu_join(g, n) makes g->stream wait for what was
// queued on them since. Stage timings (events on g->stream) include it.
sf_status sf_gpu_fork(sf_gpu *g, int n);
sf_status sf_gpu_join(sf_gpu *g, int n);
// The same with g->aux[2..2+n-1], streams of the highest priority: the
// block scheduler starts their blocks before more of g->stream's.
sf_status sf_gpu_fork_hi(sf_gpu *g, int n);
sf_status sf_gpu_join_hi(sf_gpu *g, int n);
// sf_gpu_rows in two steps: the compact view of the rows in the context's
// buffer `slot`, then the copy into it on stream s.
sf_status sf_gpu_rows_view(sf_gpu *g, const sf_image *in, int y0, int step, int slot, sf_image *out);
sf_status sf_gpu_rows_on(cudaStream_t s, const sf_image *in, int y0, int step, sf_image *out);

// method=global's clipping launched on a stream of the caller's (gpu/
// background.cu), so that two run side by side with other work
// (sf_convolve_noise_gpu): sf_bkg_clip_bytes is the scratch for n pixels in
// at most `most` blocks (0: as many as the clipping takes alone);
// sf_bkg_clip_launch queues it on s over a contiguous device image, its
// result record copied to `res` (host memory of SF_BKG_CLIP_RES bytes,
// pinned); sf_bkg_clip_stats reads that record once s is synchronised
// (sf_background_gpu's statistics and errors).
#define SF_BKG_CLIP_RES 256
extern "C" size_t sf_bkg_clip_bytes(sf_gpu *g, size_t n, int most);
extern "C" sf_status sf_bkg_clip_launch(sf_gpu *g, cudaStream_t s, const sf_image *img,
                                        const sf_bkg_params *p, int most, void *scratch, void *res);
extern "C" sf_status sf_bkg_clip_stats(const void *res, const sf_image *img, sf_bkg_stats *out);

// Frees the convolve cache of a context (sf_gpu_destroy calls it).
void sf_conv_cache_free(sf_gpu *g);

extern "C" const char *sf_cufft_name(cufftResult r);

// cuFFT, opened on first use (dlopen; gpu/gpu.cu): mapping and relocating the
// library cost every process start 4 ms on the dev VM, CPU runs and GPU
// runs without an FFT included. sf_cufft_load() returns the functions, or
// NULL with the reason set by sf_fail (SF_ERR_CUFFT); after it succeeded,
// sf_cufft is them.
struct sf_cufft_fns {
    cufftResult (*plan2d)(cufftHandle *, int, int, cufftType);
    cufftResult (*destroy)(cufftHandle);
    cufftResult (*set_stream)(cufftHandle, cudaStream_t);
    cufftResult (*exec_r2c)(cufftHandle, cufftReal *, cufftComplex *);
    cufftResult (*exec_c2r)(cufftHandle, cufftComplex *, cufftReal *);
};
extern "C" const sf_cufft_fns *sf_cufft_load(void);
extern const sf_cufft_fns *sf_cufft;

// Every function using these declares `sf_status st = SF_OK;` and a `fail:` label.
#define SF_CUDA(call)                                                              \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            st = sf_fail(e_ == cudaErrorMemoryAllocation ? SF_ERR_GPU_NOMEM       \
                                                         : SF_ERR_CUDA,           \
                         "%s: %s (%s:%d)", #call, cudaGetErrorString(e_),          \
                         __FILE__, __LINE__);                                      \
            goto fail;                                                             \
        }                                                                          \
    } while (0)

#define SF_CUFFT(call)                                                             \
    do {                                                                           \
        cufftResult r_ = (call);                                                   \
        if (r_ != CUFFT_SUCCESS) {                                                 \
            st = sf_fail(SF_ERR_CUFFT, "%s: %s (%s:%d)", #call, sf_cufft_name(r_), \
                         __FILE__, __LINE__);                                      \
            goto fail;                                                             \
        }                                                                          \
    } while (0)

// After every kernel launch.
#define SF_LAUNCHED() SF_CUDA(cudaGetLastError())

// Propagate an sf_status from a helper.
#define SF_TRY(expr)                                                               \
    do {                                                                           \
        st = (expr);                                                               \
        if (st != SF_OK)                                                           \
            goto fail;                                                             \
    } while (0)

static inline unsigned sf_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b ? b : 1);
}

// Round a scratch offset up so sub-buffers stay 256-byte aligned.
static inline size_t sf_align256(size_t n) { return (n + 255) & ~(size_t)255; }

// A scratch layout, walked twice: with p NULL to measure it (off ends as
// the bytes it needs), then with p the scratch to carve the same pieces, so
// the size and the pointers come from one list of sf_take calls.
struct sf_carve {
    char *p;
    size_t off;
};
template <typename T> static inline T *sf_take(sf_carve *c, size_t n)
{
    T *r = (T *)(c->p ? c->p + c->off : NULL);
    c->off += sf_align256(n * sizeof(T));
    return r;
}

// The warp's inclusive scan of x (every lane of the warp takes part).
template <typename T> static __device__ __forceinline__ T sf_warp_scan_incl(T x, int lane)
{
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o)
            x += y;
    }
    return x;
}

#endif
