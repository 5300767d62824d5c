// Stage `segment`, GPU version: connected-component labelling by a lock-free
// union-find on the device (Playne & Hawick 2018 style), renumbered with a CUB
// scan so the labels equal the CPU twin's (cpu/segment.c) pixel for pixel.
//
// The labels buffer L is the union-find forest while it runs: L[i] = -1 for
// background, otherwise a parent index L[i] <= i, a root having L[i] == i.
// Unions always link the larger root under the smaller (atomicMin), so the
// root of every island ends as its first pixel in raster order.
//  1. seg_init:     each warp takes 32 pixels of a row; a pixel points to the
//                   start of its run inside that segment (warp ballot).
//  2. seg_merge:    unions across segment borders and with the row above,
//                   skipping unions implied by those of the pixel to the left.
//  3. seg_compress: every pixel points straight at its root; the area of
//                   each root is counted (warp-aggregated atomicAdd).
//  4. seg_flag:     flag[i] = 1 for roots with area >= min_area.
//  5. CUB ExclusiveSum of the flags gives each kept root its number - 1 and,
//     in element npix, N.
//  6. seg_final:    labels[i] = number of root(i), or 0.
#include <cub/cub.cuh>
#include "common.cuh"
#include "skyfind/segment.h"

#define SEG_THREADS 256
#define SEG_FULL 0xffffffffu

// kernels

// Plain load that is never cached in a register or a non-coherent L1 line:
// other threads lower these values with atomicMin while we read them.
static __device__ __forceinline__ int seg_load(const int *p)
{
    return *(const volatile int *)p;
}

// Root of x's tree, halving the path on the way (atomicMin keeps every
// value monotonically decreasing, and a grandparent is always in the same
// island, so this never loses a link made by another thread).
static __device__ int seg_find(int *L, int x)
{
    for (;;) {
        int p = seg_load(L + x);
        if (p == x)
            return x;
        int gp = seg_load(L + p);
        if (gp == p)
            return p;
        atomicMin(L + x, gp);
        x = gp;
    }
}

// Merge the trees of pixels a and b. A root r has L[r] == r; atomicMin on it
// returns r only if it was still a root, otherwise the returned parent is
// followed and the union retried. Every retry lowers a or b, so it ends.
static __device__ void seg_union(int *L, int a, int b)
{
    for (;;) {
        a = seg_find(L, a);
        b = seg_find(L, b);
        if (a == b)
            return;
        if (a < b) {
            int old = atomicMin(L + b, a);
            if (old == b)
                return;
            b = old;
        } else {
            int old = atomicMin(L + a, b);
            if (old == a)
                return;
            a = old;
        }
    }
}

// Thread t of the grid: warp w = t / 32 handles segment w % nseg of row
// w / nseg, pixels x = 32 * (w % nseg) + lane. Sets *x, *y, returns lane.
static __device__ __forceinline__ int seg_pos(int nx, int ny, int nseg, int *x, int *y)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long w = t >> 5;
    int lane = (int)(t & 31);
    *y = (int)(w / nseg);
    *x = (int)(w % nseg) * 32 + lane;
    if (*y >= ny) { // spare warps of the last block
        *y = ny;
        *x = nx;
    }
    return lane;
}

static __global__ void seg_init(const uint8_t *mask, int *L, int nx, int ny, int nseg)
{
    int x, y;
    int lane = seg_pos(nx, ny, nseg, &x, &y);
    bool in = x < nx && y < ny;
    size_t i = (size_t)y * nx + x;
    bool fg = in && mask[i] != 0;
    unsigned bits = __ballot_sync(SEG_FULL, fg);
    if (!in)
        return;
    if (!fg) {
        L[i] = -1;
        return;
    }
    // run start: one past the highest background lane below this one
    unsigned bg_below = ~bits & ((1u << lane) - 1u);
    int start = bg_below ? 32 - __clz(bg_below) : 0;
    L[i] = (int)(i - (size_t)(lane - start));
}

static __global__ void seg_merge(const uint8_t *mask, int *L, int nx, int ny, int nseg,
                                 int conn8)
{
    int x, y;
    int lane = seg_pos(nx, ny, nseg, &x, &y);
    if (x >= nx || y >= ny)
        return;
    int i = y * nx + x;
    if (!mask[i])
        return;
    bool left = x > 0 && mask[i - 1];
    if (left && lane == 0) // the run continues from the previous segment
        seg_union(L, i, i - 1);
    if (y == 0)
        return;
    int u = i - nx;
    bool up = mask[u] != 0;
    bool ul = x > 0 && mask[u - 1];
    bool ur = x + 1 < nx && mask[u + 1];
    // By induction along the run, the left neighbour is already joined to
    // its own upper neighbours, and pixels of one row run are always joined.
    if (conn8) {
        if (!left) {
            if (up) {
                seg_union(L, i, u);
            } else {
                if (ul)
                    seg_union(L, i, u - 1);
                if (ur)
                    seg_union(L, i, u + 1);
            }
        } else if (!up && ur) {
            seg_union(L, i, u + 1);
        }
    } else if (up && !(left && ul)) {
        seg_union(L, i, u);
    }
}

static __global__ void seg_compress(int *L, int *area, int npix)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int r = -1;
    if (i < npix && seg_load(L + i) >= 0) {
        r = seg_find(L, i);
        L[i] = r;
    }
    // one atomicAdd per distinct root in the warp
    unsigned same = __match_any_sync(SEG_FULL, r);
    int lane = threadIdx.x & 31;
    if (r >= 0 && lane == __ffs(same) - 1)
        atomicAdd(area + r, __popc(same));
}

static __global__ void seg_flag(int *area, int npix, int min_area)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < npix)
        area[i] = area[i] >= min_area; // 0 for non-roots, since min_area >= 1
    else if (i == npix)
        area[i] = 0;
}

static __global__ void seg_final(int *L, const int *flag, const int *number, int npix)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= npix)
        return;
    int r = L[i];
    L[i] = r >= 0 && flag[r] ? number[r] + 1 : 0;
}

// launchers

// Bytes of CUB temporary storage for an exclusive scan of n ints.
static cudaError_t seg_cub_bytes(int n, cudaStream_t stream, size_t *bytes)
{
    *bytes = 0;
    return cub::DeviceScan::ExclusiveSum(NULL, *bytes, (const int *)NULL, (int *)NULL, n,
                                         stream);
}

// Scratch: area/flags (npix + 1 ints), numbers (npix + 1 ints), CUB storage.
static size_t seg_scratch_bytes(size_t npix, size_t cub_bytes)
{
    return 2 * sf_align256((npix + 1) * sizeof(int)) + sf_align256(cub_bytes);
}

extern "C" size_t sf_segment_gpu_scratch(int nx, int ny, const sf_seg_params *p)
{
    size_t npix = sf_npix(nx, ny);
    size_t cub = 0;
    (void)p;
    if (npix > (size_t)INT32_MAX - 1024 || seg_cub_bytes((int)npix + 1, 0, &cub) != cudaSuccess) {
        cudaGetLastError(); // no device to ask: a generous bound on CUB's tile states
        cub = (1u << 20) + npix / 16;
    }
    return seg_scratch_bytes(npix, cub);
}

extern "C" sf_status sf_segment_gpu(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                                    sf_labels *labels, int *nlabels)
{
    sf_status st = SF_OK;
    sf_seg_params def;
    size_t npix, cub_bytes = 0, off;
    int nx, ny, nseg, n1, count = 0;
    int *area, *number, *L;
    unsigned char *scratch = NULL;
    unsigned seg_blocks, pix_blocks;

    if (!g)
        return sf_fail(SF_ERR_NO_GPU, "segment_gpu: no GPU context");
    if (!mask || !labels || !mask->data || !labels->data)
        return sf_fail(SF_ERR_PARAM, "segment_gpu: mask or labels buffer missing");
    if (!p) {
        sf_seg_params_default(&def);
        p = &def;
    }
    if (p->connectivity != 4 && p->connectivity != 8)
        return sf_fail(SF_ERR_PARAM, "segment_gpu: connectivity %d must be 4 or 8",
                       p->connectivity);
    if (p->min_area < 1)
        return sf_fail(SF_ERR_PARAM, "segment_gpu: min_area %d must be >= 1", p->min_area);
    nx = mask->nx;
    ny = mask->ny;
    if (nx < 1 || ny < 1)
        return sf_fail(SF_ERR_PARAM, "segment_gpu: mask size %dx%d is not positive", nx, ny);
    if (labels->nx != nx || labels->ny != ny)
        return sf_fail(SF_ERR_PARAM, "segment_gpu: labels are %dx%d but the mask is %dx%d",
                       labels->nx, labels->ny, nx, ny);
    if (mask->stride != (size_t)nx || labels->stride != (size_t)nx)
        return sf_fail(SF_ERR_PARAM,
                       "segment_gpu: mask stride %zu / labels stride %zu must equal nx %d",
                       mask->stride, labels->stride, nx);
    if (mask->loc != SF_DEVICE || labels->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "segment_gpu: mask and labels must be device buffers");
    npix = sf_npix(nx, ny);
    if (npix > (size_t)INT32_MAX - 1024) // int pixel indices, with a spare block
        return sf_fail(SF_ERR_PARAM, "segment_gpu: %dx%d pixels exceed the int32 label range",
                       nx, ny);
    n1 = (int)npix + 1;

    SF_CUDA(seg_cub_bytes(n1, g->stream, &cub_bytes));
    SF_TRY(sf_gpu_scratch(g, seg_scratch_bytes(npix, cub_bytes), (void **)&scratch));
    off = sf_align256((size_t)n1 * sizeof(int));
    area = (int *)scratch;
    number = (int *)(scratch + off);
    L = labels->data;

    nseg = (nx + 31) / 32;
    seg_blocks = sf_blocks((size_t)nseg * ny * 32, SEG_THREADS);
    pix_blocks = sf_blocks(npix, SEG_THREADS);

    SF_TRY(sf_gpu_memset(g, area, 0, (size_t)n1 * sizeof(int)));
    seg_init<<<seg_blocks, SEG_THREADS, 0, g->stream>>>(mask->data, L, nx, ny, nseg);
    SF_LAUNCHED();
    seg_merge<<<seg_blocks, SEG_THREADS, 0, g->stream>>>(mask->data, L, nx, ny, nseg,
                                                         p->connectivity == 8);
    SF_LAUNCHED();
    seg_compress<<<pix_blocks, SEG_THREADS, 0, g->stream>>>(L, area, (int)npix);
    SF_LAUNCHED();
    seg_flag<<<sf_blocks((size_t)n1, SEG_THREADS), SEG_THREADS, 0, g->stream>>>(
        area, (int)npix, p->min_area);
    SF_LAUNCHED();
    SF_CUDA(cub::DeviceScan::ExclusiveSum(scratch + 2 * off, cub_bytes, (const int *)area,
                                          number, n1, g->stream));
    SF_LAUNCHED();
    seg_final<<<pix_blocks, SEG_THREADS, 0, g->stream>>>(L, area, number, (int)npix);
    SF_LAUNCHED();
    SF_TRY(sf_gpu_to_host(g, &count, number + npix, sizeof count));
    if (nlabels)
        *nlabels = count;
fail:
    return st;
}
