/* Allocation and host<->device transfer of images, masks and label maps.
 * Device buffers and counted copies go through the GPU context (gpu.h). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#include "skyfind/image.h"
#include "skyfind/gpu.h"

/* Large host blocks (image-sized buffers and scratch):
 * - aligned to 2 MB and, on Linux, advised for transparent huge pages
 *   (MADV_HUGEPAGE), so that the first touch of a 16 MB map costs 8 page
 *   faults instead of 4096 (on the development VM, THP "madvise", the faults
 *   were a third of a one-thread run of sextractor.pipe at 2048^2);
 * - kept when freed (sf_host_free), up to SF_CACHE_MAX blocks and
 *   SF_CACHE_BYTES in all, and handed out again for a block of the same
 *   rounded size: the next stage or the next image of a batch then writes
 *   memory that is already mapped instead of memory the kernel must zero
 *   (the zeroing was 30% of a one-thread batch of sextractor.pipe).
 * The live blocks' sizes are kept in a small table, so sf_host_free knows
 * them; a block the table had no room for is simply freed.
 * SKYFIND_HUGEPAGES=0 turns the advice off. */
#define SF_BIG_MIN ((size_t)4 << 20)
#define SF_HUGE ((size_t)2 << 20)
#define SF_PAGE ((size_t)4096)
#define SF_CACHE_MAX 16
#define SF_CACHE_BYTES ((size_t)1 << 30)
#define SF_LIVE_MAX 256
static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t n;
} big_live[SF_LIVE_MAX], big_cache[SF_CACHE_MAX];
static int n_live, n_cache;
static size_t cache_bytes;

static int hugepages_on(void)
{
    static int on = -1; /* read once; a benign race gives the same value */
    if (on < 0) {
        const char *e = getenv("SKYFIND_HUGEPAGES");
        on = !(e && e[0] == '0' && !e[1]);
    }
    return on;
}

void *sf_host_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes < SF_BIG_MIN) /* page-aligned, as every block (SIMD, FFTW, cudaHostRegister) */
        return posix_memalign(&p, SF_PAGE, bytes ? bytes : 1) ? NULL : p;
    bytes = (bytes + SF_HUGE - 1) / SF_HUGE * SF_HUGE;
    pthread_mutex_lock(&big_lock);
    for (int i = n_cache - 1; i >= 0; i--) /* the most recently freed first */
        if (big_cache[i].n == bytes) {
            p = big_cache[i].p;
            cache_bytes -= bytes;
            big_cache[i] = big_cache[--n_cache];
            break;
        }
    pthread_mutex_unlock(&big_lock);
    if (!p) {
        if (posix_memalign(&p, SF_HUGE, bytes))
            return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (hugepages_on())
            (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice only: refused, the pages stay small */
#endif
    }
    pthread_mutex_lock(&big_lock);
    if (n_live < SF_LIVE_MAX) {
        big_live[n_live].p = p;
        big_live[n_live++].n = bytes;
    }
    pthread_mutex_unlock(&big_lock);
    return p;
}

void sf_host_free(void *p)
{
    size_t n = 0;
    if (!p)
        return;
    pthread_mutex_lock(&big_lock);
    for (int i = 0; i < n_live; i++)
        if (big_live[i].p == p) {
            n = big_live[i].n;
            big_live[i] = big_live[--n_live];
            break;
        }
    if (n && n_cache < SF_CACHE_MAX && cache_bytes + n <= SF_CACHE_BYTES) {
        big_cache[n_cache].p = p;
        big_cache[n_cache++].n = n;
        cache_bytes += n;
        p = NULL;
    }
    pthread_mutex_unlock(&big_lock);
    free(p);
}

void sf_host_cache_release(void)
{
    pthread_mutex_lock(&big_lock);
    while (n_cache > 0)
        free(big_cache[--n_cache].p);
    cache_bytes = 0;
    pthread_mutex_unlock(&big_lock);
}

static sf_status buf_alloc(void **ptr, size_t bytes, sf_loc loc, sf_gpu *g)
{
    *ptr = NULL;
    if (loc == SF_DEVICE) {
        if (!g)
            return sf_fail(SF_ERR_INTERNAL, "device buffer requested without a GPU context");
        return sf_gpu_malloc(g, ptr, bytes);
    }
    if (g)
        return sf_gpu_host_malloc(g, ptr, bytes);
    *ptr = sf_host_alloc(bytes);
    if (!*ptr)
        return sf_fail(SF_ERR_NOMEM, "malloc of %zu bytes failed", bytes);
    return SF_OK;
}

static void buf_free(void *ptr, sf_loc loc, sf_gpu *g)
{
    if (!ptr)
        return;
    if (loc == SF_DEVICE)
        sf_gpu_free(g, ptr);
    else if (g)
        sf_gpu_host_free(g, ptr);
    else
        sf_host_free(ptr);
}

static sf_status check_shape(int nx, int ny)
{
    if (nx < 1 || ny < 1)
        return sf_fail(SF_ERR_PARAM, "image size %dx%d is not positive", nx, ny);
    return SF_OK;
}

#define SF_DEFINE_BUFFER(type, fn, elem)                                           \
    sf_status sf_##fn##_alloc(type *b, int nx, int ny, sf_loc loc, sf_gpu *g)       \
    {                                                                              \
        void *p = NULL;                                                            \
        sf_status st = check_shape(nx, ny);                                        \
        if (st)                                                                    \
            return st;                                                             \
        st = buf_alloc(&p, sf_npix(nx, ny) * sizeof(elem), loc, g);                \
        if (st)                                                                    \
            return st;                                                             \
        b->nx = nx;                                                                \
        b->ny = ny;                                                                \
        b->stride = (size_t)nx;                                                    \
        b->data = (elem *)p;                                                       \
        b->loc = loc;                                                              \
        return SF_OK;                                                              \
    }                                                                              \
    void sf_##fn##_free(type *b, sf_gpu *g)                                         \
    {                                                                              \
        if (!b)                                                                    \
            return;                                                                \
        buf_free(b->data, b->loc, g);                                              \
        b->data = NULL;                                                            \
    }

SF_DEFINE_BUFFER(sf_image, image, float)
SF_DEFINE_BUFFER(sf_mask, mask, uint8_t)
SF_DEFINE_BUFFER(sf_labels, labels, int32_t)

static sf_status copy_check(int snx, int sny, sf_loc sloc, int dnx, int dny, sf_loc dloc,
                            sf_loc want_src)
{
    if (snx != dnx || sny != dny)
        return sf_fail(SF_ERR_INTERNAL, "copy between %dx%d and %dx%d buffers", snx, sny, dnx, dny);
    if (sloc != want_src || dloc == want_src)
        return sf_fail(SF_ERR_INTERNAL, "copy in the wrong direction");
    return SF_OK;
}

#define SF_DEFINE_COPY(type, name, elem, srcloc, fn)                                \
    sf_status name(sf_gpu *g, const type *src, type *dst)                          \
    {                                                                              \
        sf_status st = copy_check(src->nx, src->ny, src->loc, dst->nx, dst->ny,   \
                                  dst->loc, srcloc);                              \
        if (st)                                                                    \
            return st;                                                             \
        return fn(g, dst->data, src->data, sf_npix(src->nx, src->ny) * sizeof(elem)); \
    }

SF_DEFINE_COPY(sf_image, sf_image_upload, float, SF_HOST, sf_gpu_to_device)
SF_DEFINE_COPY(sf_image, sf_image_download, float, SF_DEVICE, sf_gpu_to_host)
SF_DEFINE_COPY(sf_mask, sf_mask_upload, uint8_t, SF_HOST, sf_gpu_to_device)
SF_DEFINE_COPY(sf_mask, sf_mask_download, uint8_t, SF_DEVICE, sf_gpu_to_host)
SF_DEFINE_COPY(sf_labels, sf_labels_upload, int32_t, SF_HOST, sf_gpu_to_device)
SF_DEFINE_COPY(sf_labels, sf_labels_download, int32_t, SF_DEVICE, sf_gpu_to_host)

sf_status sf_image_negate(sf_gpu *g, sf_image *im)
{
    if (!im->data)
        return SF_OK;
    if (im->loc == SF_DEVICE) {
        if (im->stride != (size_t)im->nx)
            return sf_fail(SF_ERR_INTERNAL, "sf_image_negate: a strided device image");
        return sf_gpu_negate(g, im->data, sf_npix(im->nx, im->ny));
    }
    for (int y = 0; y < im->ny; y++) {
        uint32_t *row = (uint32_t *)(im->data + (size_t)y * im->stride);
        for (int x = 0; x < im->nx; x++)
            row[x] ^= 0x80000000u;
    }
    return SF_OK;
}
