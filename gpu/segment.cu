// Stage `segment`, GPU version: connected-component labelling by a lock-free
// union-find on the device (Playne & Hawick 2018 style), renumbered with a CUB
// scan so the labels equal the CPU twin's (cpu/segment.c) pixel for pixel.
//
// The labels buffer L is the union-find forest while it runs: L[i] = 0 for
// background (the mask tells it from pixel 0, whose parent is itself),
// otherwise a parent index L[i] <= i, a root having L[i] == i. Unions always
// link the larger root under the smaller (atomicMin), so the root of every
// island ends as its first pixel in raster order. After seg_init only the
// mask's set pixels are read or written in L and area (a sky mask is a few
// thousandths set), so steps 2-6 cost about a read of the mask each.
//  1. seg_init:     each warp takes 32 pixels of a row; a pixel points to the
//                   start of its run inside that segment (warp ballot);
//                   area[i] = 0 for foreground pixels.
//  2. seg_merge:    unions across segment borders and with the row above,
//                   skipping unions implied by those of the pixel to the left.
//  3. seg_compress: every pixel points straight at its root; the area of
//                   each root is counted (warp-aggregated atomicAdd) and bit
//                   31 of it set when the island holds a seed pixel (mask
//                   value 1; areas stay below 2^31).
//  4. seg_rank:     per chunk of SEG_CHUNK pixels (a block), the kept roots
//                   (area >= min_area and a seed) ranked in raster order by a
//                   block scan: area[root] = rank (SEG_DROPPED if dropped),
//                   counts[chunk] = their number.
//  5. CUB ExclusiveSum of the chunks' counts: each chunk's first number - 1
//     and, in element nchunk, N.
//  6. seg_final:    labels[i] = offset[chunk of root(i)] + rank + 1, or 0.
//
// 8-connectivity takes the block-based path (block-based Komura equivalence,
// Allegretti et al. 2020, in the union-find style of Playne & Hawick 2018):
// under 8-connectivity every foreground pixel of a 2x2 block touches every
// other, so each block is one node and the forest has a quarter of the
// nodes. Two blocks join when a foreground pixel of one touches one of the
// other (left: either left-column pixel with either of the left block's
// right column; up: likewise for rows; diagonals: the two corner pixels).
//  1. bke_init:     one pass over the mask: a block with a foreground pixel
//                   points at the first block of its run in the warp's
//                   segment and is appended to a list of such blocks (its
//                   mask bits beside it); the labels were zeroed (a memset).
//                   A sky mask sets a few thousandths of its blocks, and
//                   steps 2-5 read the list, not the image: at 8192^2 the
//                   stage did five passes over the blocks or pixels (B
//                   written for every block, compressed, counted, marked
//                   and every label written from it), 0.47 ms on an H200.
//  2. bke_merge:    unions with the left, up, up-left and up-right blocks.
//  3. bke_roots:    every listed block points at its root, and adds to the
//                   root's area its set pixels (bit 31: a seed among them)
//                   and its first set pixel to the root's first pixel
//                   (atomicMin).
//  4. bke_mark:     each kept root sets bit c = row * nbx + x/2 of its first
//                   pixel in the bitmap F (a block holds at most one island's
//                   first pixel, and in one pixel row block order is pixel
//                   order), so the set bits before c number the islands in
//                   raster order: bke_popc counts each word's bits and a CUB
//                   exclusive scan of the counts gives each word's first
//                   number (a bit per cell: a scan of nf/32 counts where one
//                   int a cell cost a 134 MB memset and a 134 MB scan at
//                   8192^2, 0.2 ms: tests/gpu/trace). It also adds the
//                   kept islands' areas in F[nw], read back beside the
//                   islands' count: the pixels a deblend stage will read
//                   (sf_segment_gpu_counted), which it then need not count.
//  5. bke_final:    the labels of a listed block's set pixels: the number of
//                   its root's first pixel + 1 (0, as zeroed, if dropped).
// The pixel pass (1) and the memset are linear in the pixels; the rest in
// the foreground blocks (one big island or a checkerboard lists them all).
#include <string.h>
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

static __global__ void seg_init(const uint8_t *mask, int *L, unsigned *area, int nx, int ny,
                                int nseg)
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
        L[i] = 0; // the final label of background (the mask tells it from pixel 0)
        return;
    }
    area[i] = 0; // roots are foreground pixels: only theirs are ever read
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

#define SEG_SEEDED 0x80000000u

static __global__ void seg_compress(const uint8_t *mask, int *L, unsigned *area, int npix)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int r = -1;
    bool seed = false;
    if (i < npix && mask[i]) {
        r = seg_find(L, i);
        L[i] = r;
        seed = mask[i] == 1;
    }
    // one atomicAdd per distinct root in the warp
    unsigned same = __match_any_sync(SEG_FULL, r);
    unsigned seeds = __ballot_sync(SEG_FULL, seed);
    int lane = threadIdx.x & 31;
    if (r >= 0 && lane == __ffs(same) - 1) {
        atomicAdd(area + r, (unsigned)__popc(same)); // counts never reach bit 31
        if (seeds & same)
            atomicOr(area + r, SEG_SEEDED);
    }
}

// Each block numbers the kept islands whose roots lie in its chunk of
// SEG_CHUNK pixels (16 a thread), in raster order: area[root] becomes the
// rank among them (SEG_DROPPED for roots of islands dropped by min_area or
// for want of a seed), counts[block] their number. Only set mask bytes make
// the thread read L and area: the chunk costs its 4 KB of mask.
#define SEG_CHUNK (SEG_THREADS * 16)
#define SEG_DROPPED 0xFFFFFFFFu

static __global__ void seg_rank(const uint8_t *mask, const int *L, unsigned *area, int *counts,
                                int npix, int min_area)
{
    typedef cub::BlockScan<int, SEG_THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    const long long i0 = (long long)blockIdx.x * SEG_CHUNK + threadIdx.x * 16;
    unsigned set = 0; // bit j: pixel i0 + j is a root
    int keep = 0, rank, total;
    for (int j = 0; j < 16 && i0 + j < npix; j++)
        if (mask[i0 + j] && L[i0 + j] == (int)(i0 + j)) {
            const unsigned a = area[i0 + j];
            set |= 1u << j;
            keep += (a & SEG_SEEDED) && (int)(a & ~SEG_SEEDED) >= min_area;
        }
    Scan(tmp).ExclusiveSum(keep, rank, total);
    for (int j = 0; j < 16; j++)
        if (set >> j & 1) {
            const unsigned a = area[i0 + j];
            area[i0 + j] = (a & SEG_SEEDED) && (int)(a & ~SEG_SEEDED) >= min_area ? (unsigned)rank++
                                                                                 : SEG_DROPPED;
        }
    if (threadIdx.x == 0)
        counts[blockIdx.x] = total;
}

// labels[i] = the island's number (its chunk's offset + its rank + 1), or 0;
// background pixels hold 0 since seg_init.
static __global__ void seg_final(const uint8_t *mask, int *L, const unsigned *area,
                                 const int *offset, int npix)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= npix || !mask[i])
        return;
    const int r = L[i];
    const unsigned a = area[r];
    L[i] = a == SEG_DROPPED ? 0 : offset[r / SEG_CHUNK] + (int)a + 1;
}

// ---- block-based 8-connectivity ---------------------------------------------

// The 2x2 block (bx, by): bits 0..3 = pixels (0,0), (1,0), (0,1), (1,1).
static __device__ __forceinline__ unsigned bke_bits(const uint8_t *mask, int nx, int ny, int bx, int by)
{
    int x = 2 * bx, y = 2 * by;
    size_t i = (size_t)y * nx + x;
    bool r = x + 1 < nx, d = y + 1 < ny;
    return (mask[i] != 0) | ((r && mask[i + 1] != 0) << 1) | ((d && mask[i + nx] != 0) << 2) |
           ((r && d && mask[i + nx + 1] != 0) << 3);
}

// Adjacency of a block m with its left (l), upper (u), upper-left (ul) and
// upper-right (ur) neighbours (4-bit pixel patterns).
static __device__ __forceinline__ bool bke_left(unsigned m, unsigned l) { return (m & 5u) && (l & 10u); }
static __device__ __forceinline__ bool bke_up(unsigned m, unsigned u) { return (m & 3u) && (u & 12u); }
static __device__ __forceinline__ bool bke_upleft(unsigned m, unsigned ul) { return (m & 1u) && (ul & 8u); }
static __device__ __forceinline__ bool bke_upright(unsigned m, unsigned ur) { return (m & 2u) && (ur & 4u); }

// bke_init's warps: a warp takes a segment of BKE_SEG blocks of a block row,
// BKE_W consecutive blocks a lane (two rows of 2 BKE_W mask bytes, 8-byte
// loads where aligned), so that a sky segment costs a lane two loads and a
// vote: a thread a block, 16.7M threads at 8192^2, was bound by its
// instructions (0.107 ms, 15% of the memory's bandwidth).
#define BKE_W 4
#define BKE_SEG (32 * BKE_W)

// Each block with a foreground pixel points at the first block of its run
// inside the warp's segment (blocks joined to their left neighbour form a
// run: most unions along rows are made here without atomics), starts its
// area at 0 and its first pixel past the image, and is appended to the
// list of such blocks A (its mask bits in Am: bits 0-3 set, bits 4-7 seed,
// bke_bits' order); *na counts them. A sky mask sets a few thousandths of
// its blocks, and every later step reads the list, not the image.
static __global__ void bke_init(const uint8_t *mask, int *B, unsigned *area, int *first, int *A,
                                uint8_t *Am, int *na, int nx, int ny, int nbx, int nby, int nseg)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, w = t >> 5;
    const int lane = (int)(t & 31), by = (int)(w / nseg);
    const int bx0 = (int)(w % nseg) * BKE_SEG + BKE_W * lane; // this lane's first block
    uint8_t r0[2 * BKE_W] = {0}, r1[2 * BKE_W] = {0};        // its pixels of the two rows
    unsigned any = 0;
    if (by < nby && bx0 < nbx) {
        const int x = 2 * bx0, y = 2 * by;
        const bool d = y + 1 < ny;
        const uint8_t *p = mask + (size_t)y * nx + x;
        if (x + 2 * BKE_W <= nx && !(reinterpret_cast<uintptr_t>(p) & 7) && !(nx & 7)) {
            const uint2 a = *reinterpret_cast<const uint2 *>(p);
            const uint2 b = d ? *reinterpret_cast<const uint2 *>(p + nx) : make_uint2(0u, 0u);
            memcpy(r0, &a, sizeof a);
            memcpy(r1, &b, sizeof b);
        } else {
#pragma unroll
            for (int k = 0; k < 2 * BKE_W; k++) {
                r0[k] = x + k < nx ? p[k] : 0;
                r1[k] = d && x + k < nx ? p[nx + k] : 0;
            }
        }
#pragma unroll
        for (int k = 0; k < 2 * BKE_W; k++)
            any |= r0[k] | r1[k];
    }
    if (!__ballot_sync(SEG_FULL, any != 0)) // a sky segment (spare lanes vote 0)
        return;
    unsigned m[BKE_W], sd[BKE_W];
    int lastbrk, c = 0;
#pragma unroll
    for (int j = 0; j < BKE_W; j++) {
        const unsigned a = r0[2 * j], b = r0[2 * j + 1], e = r1[2 * j], f = r1[2 * j + 1];
        m[j] = (a != 0) | (b != 0) << 1 | (e != 0) << 2 | (f != 0) << 3;
        sd[j] = (a == 1) | (b == 1) << 1 | (e == 1) << 2 | (f == 1) << 3;
        c += m[j] != 0;
    }
    // the left neighbour of block 0: the previous lane's last (none at a
    // segment's start: bke_merge joins across segments)
    const unsigned lm = __shfl_up_sync(SEG_FULL, m[BKE_W - 1], 1);
    unsigned brk = 0; // bit j: block j starts a run (or is empty)
#pragma unroll
    for (int j = 0; j < BKE_W; j++) {
        const unsigned l = j ? m[j - 1] : lane ? lm : 0u;
        if (!(m[j] && bke_left(m[j], l)))
            brk |= 1u << j;
    }
    lastbrk = 31 - __clz(brk); // the lane's last break (lane 0's block 0 always breaks)
    const unsigned below = __ballot_sync(SEG_FULL, brk != 0) & ((1u << lane) - 1u);
    const int src = below ? 31 - __clz(below) : lane;
    const int pstart = BKE_SEG * (int)(w % nseg) + BKE_W * src + __shfl_sync(SEG_FULL, lastbrk, src);
    // the list's slots: the warp's scan of the lanes' counts, one atomicAdd
    const int incl = sf_warp_scan_incl(c, lane);
    int base = 0;
    if (lane == 31)
        base = atomicAdd(na, incl);
    int k = __shfl_sync(SEG_FULL, base, 31) + incl - c;
#pragma unroll
    for (int j = 0; j < BKE_W; j++) {
        if (!m[j])
            continue;
        const unsigned sb = brk & ((2u << j) - 1u); // breaks at or before j
        const int start = sb ? bx0 + 31 - __clz(sb) : pstart;
        const int b = by * nbx + bx0 + j;
        B[b] = by * nbx + start;
        area[b] = 0;
        first[b] = 0x7fffffff; // past every pixel index
        A[k] = b;
        Am[k] = (uint8_t)(m[j] | sd[j] << 4);
        k++;
    }
}

// Unions of a listed block with the left (at segment starts), upper,
// upper-left and upper-right blocks, skipping those implied by the run: a
// block joined to its left neighbour L needs no union with a block L is
// joined to. A grid-stride loop over the list.
static __global__ void bke_merge(const uint8_t *mask, int *B, const int *A, const uint8_t *Am,
                                 const int *na, int nx, int ny, int nbx)
{
    const int n = *na;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const int b = A[k], bx = b % nbx, by = b / nbx;
        const unsigned m = Am[k] & 15u;
        const unsigned l = bx > 0 ? bke_bits(mask, nx, ny, bx - 1, by) : 0u;
        const bool cl = bke_left(m, l);
        if (cl && bx % BKE_SEG == 0) // the run continues from the previous segment
            seg_union(B, b, b - 1);
        if (by == 0)
            continue;
        const unsigned u = bke_bits(mask, nx, ny, bx, by - 1);
        const unsigned ul = bx > 0 ? bke_bits(mask, nx, ny, bx - 1, by - 1) : 0u;
        const unsigned ur = bx + 1 < nbx ? bke_bits(mask, nx, ny, bx + 1, by - 1) : 0u;
        const bool cu = bke_up(m, u);
        if (cu && !(cl && bke_upright(l, u)))
            seg_union(B, b, b - nbx);
        if (bke_upleft(m, ul) && !(cl && bke_up(l, ul)))
            seg_union(B, b, b - nbx - 1);
        if (bke_upright(m, ur) && !(cu && bke_left(ur, u)))
            seg_union(B, b, b - nbx + 1);
    }
}

// Every listed block points at its root, and adds to the root's area its
// set pixels (bit 31: one is a seed) and its first set pixel in raster
// order (bke_bits' bit order is raster order) to the root's first pixel
// (atomicMin). The unions are all made (the previous launch), so the root
// found is final; writing it while others look theirs up only shortens
// their paths. Sums, OR and minimum do not depend on the order.
static __global__ void bke_roots(int *B, unsigned *area, int *first, const int *A,
                                 const uint8_t *Am, const int *na, int nx, int nbx)
{
    const int n = *na;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const int b = A[k], r = seg_find(B, b);
        const unsigned m = Am[k] & 15u, lo = __ffs(m) - 1;
        const int p = (2 * (b / nbx) + (int)(lo >> 1)) * nx + 2 * (b % nbx) + (int)(lo & 1u);
        B[b] = r;
        atomicAdd(area + r, (unsigned)__popc(m));
        if (Am[k] >> 4)
            atomicOr(area + r, SEG_SEEDED);
        atomicMin(first + r, p);
    }
}

static __device__ __forceinline__ bool bke_keep(unsigned a, int min_area)
{
    return (a & SEG_SEEDED) && (int)(a & ~SEG_SEEDED) >= min_area;
}

// Each kept island's bit in F (nw words): the cell c = row * nbx + x/2 of
// its first pixel (a block holds at most one island's first pixel, and in
// one pixel row block order is pixel order, so the set bits before c number
// the islands in raster order); its area added to F[nw].
static __global__ void bke_mark(const int *B, const unsigned *area, const int *first,
                                unsigned *F, const int *A, const int *na, int nx, int nbx, int nw,
                                int min_area)
{
    const int n = *na;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const int b = A[k];
        if (B[b] == b && bke_keep(area[b], min_area)) {
            const int p = first[b], c = (p / nx) * nbx + (p % nx) / 2;
            atomicOr(&F[c >> 5], 1u << (c & 31));
            atomicAdd(&F[nw], area[b] & ~SEG_SEEDED);
        }
    }
}

// The set bits of each word of F (nw words; count[nw] = 0 for the scan's
// total); the kept area F[nw] to number[nw + 1], beside the total the host
// reads.
static __global__ void bke_popc(const unsigned *F, int *count, int *number, int nw)
{
    int w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w <= nw)
        count[w] = w < nw ? __popc(F[w]) : 0;
    if (w == nw)
        number[nw + 1] = (int)F[nw];
}

// The labels of a listed block's set pixels (the labels were zeroed): the
// number of its root's first pixel's bit + 1, or 0 for a dropped island.
static __global__ void bke_final(const int *B, const unsigned *area, const int *first,
                                 const unsigned *F, const int *number, const int *A,
                                 const uint8_t *Am, const int *na, int *L, int nx, int nbx,
                                 int min_area)
{
    const int n = *na;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const int b = A[k], r = B[b];
        if (!bke_keep(area[r], min_area))
            continue;
        const int p = first[r], c = (p / nx) * nbx + (p % nx) / 2;
        const int lab = number[c >> 5] + __popc(F[c >> 5] & ((1u << (c & 31)) - 1u)) + 1;
        const unsigned m = Am[k] & 15u;
        const size_t i = (size_t)(2 * (b / nbx)) * nx + 2 * (b % nbx);
        if (m & 1u)
            L[i] = lab;
        if (m & 2u)
            L[i + 1] = lab;
        if (m & 4u)
            L[i + nx] = lab;
        if (m & 8u)
            L[i + nx + 1] = lab;
    }
}

// launchers

// Bytes of CUB temporary storage for an exclusive scan of n ints.
static cudaError_t seg_cub_bytes(int n, cudaStream_t stream, size_t *bytes)
{
    *bytes = 0;
    return cub::DeviceScan::ExclusiveSum(NULL, *bytes, (const int *)NULL, (int *)NULL, n,
                                         stream);
}

// Scratch: area/ranks (npix ints), the chunks' counts and offsets (nchunk
// + 1 ints each), CUB storage.
static size_t seg_nchunk(size_t npix) { return (npix + SEG_CHUNK - 1) / SEG_CHUNK; }

static size_t seg_scratch_bytes(size_t npix, size_t cub_bytes)
{
    return sf_align256(npix * sizeof(int)) + 2 * sf_align256((seg_nchunk(npix) + 1) * sizeof(int)) +
           sf_align256(cub_bytes);
}

// Block-based path: B, area, first (nb ints each; only the listed blocks'
// entries are written or read), the list A (nb ints) and its mask bits Am
// (nb bytes), the bitmap F, the words' counts and their numbers (nw + 2 ints
// each, nw = ceil(nf / 32), nf = ny * nbx cells: F[nw] sums the kept
// islands' areas, number[nw + 1] gets it), the list's length, CUB storage;
// measured (c->p NULL) or carved by the same calls.
static size_t bke_words(size_t nf) { return (nf + 31) / 32; }
struct bke_bufs {
    int *B, *first, *A, *wcount, *number, *na;
    unsigned *area, *F;
    uint8_t *Am;
    void *cub_tmp;
};
static void bke_layout(sf_carve *c, size_t nb, size_t nf, size_t cub_bytes, bke_bufs *b)
{
    const size_t nw2 = bke_words(nf) + 2;
    b->B = sf_take<int>(c, nb);
    b->area = sf_take<unsigned>(c, nb);
    b->first = sf_take<int>(c, nb);
    b->A = sf_take<int>(c, nb);
    b->Am = sf_take<uint8_t>(c, nb);
    b->F = sf_take<unsigned>(c, nw2);
    b->wcount = sf_take<int>(c, nw2);
    b->number = sf_take<int>(c, nw2);
    b->na = sf_take<int>(c, 1);
    b->cub_tmp = sf_take<char>(c, cub_bytes);
}
static size_t bke_scratch_bytes(size_t nb, size_t nf, size_t cub_bytes)
{
    sf_carve c = {NULL, 0};
    bke_bufs b;
    bke_layout(&c, nb, nf, cub_bytes, &b);
    return c.off;
}

static sf_status segment_bke(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                             sf_labels *labels, int *nlabels, long long *npix_out)
{
    sf_status st = SF_OK;
    const int nx = mask->nx, ny = mask->ny, nbx = (nx + 1) / 2, nby = (ny + 1) / 2;
    const int nb = nbx * nby, nf = ny * nbx, npix = nx * ny, nw = (int)bke_words((size_t)nf);
    size_t cub_bytes = 0;
    void *s = NULL;
    int count = 0;
    SF_CUDA(seg_cub_bytes(nw + 1, g->stream, &cub_bytes));
    SF_TRY(sf_gpu_scratch(g, bke_scratch_bytes(nb, nf, cub_bytes), &s));
    {
        sf_carve cv = {(char *)s, 0};
        bke_bufs bb;
        bke_layout(&cv, nb, nf, cub_bytes, &bb);
        int *B = bb.B, *first = bb.first, *A = bb.A, *wcount = bb.wcount, *number = bb.number,
            *na = bb.na;
        unsigned *area = bb.area, *F = bb.F;
        uint8_t *Am = bb.Am;
        void *cub_tmp = bb.cub_tmp;
        const int nseg = (nbx + BKE_SEG - 1) / BKE_SEG;
        const unsigned sb = sf_blocks((size_t)nseg * nby * 32, SEG_THREADS);
        // the list kernels: a grid-stride loop over the listed blocks, a
        // grid the device holds at once
        const unsigned lb = (unsigned)(g->sm_count > 0 ? 8 * g->sm_count : 1024);
        SF_TRY(sf_gpu_memset(g, F, 0, (size_t)(nw + 1) * sizeof(unsigned)));
        SF_TRY(sf_gpu_memset(g, na, 0, sizeof(int)));
        SF_TRY(sf_gpu_memset(g, labels->data, 0, (size_t)npix * sizeof(int)));
        bke_init<<<sb, SEG_THREADS, 0, g->stream>>>(mask->data, B, area, first, A, Am, na, nx, ny,
                                                    nbx, nby, nseg);
        SF_LAUNCHED();
        bke_merge<<<lb, SEG_THREADS, 0, g->stream>>>(mask->data, B, A, Am, na, nx, ny, nbx);
        SF_LAUNCHED();
        bke_roots<<<lb, SEG_THREADS, 0, g->stream>>>(B, area, first, A, Am, na, nx, nbx);
        SF_LAUNCHED();
        bke_mark<<<lb, SEG_THREADS, 0, g->stream>>>(B, area, first, F, A, na, nx, nbx, nw,
                                                    p->min_area);
        SF_LAUNCHED();
        bke_popc<<<sf_blocks((size_t)nw + 1, SEG_THREADS), SEG_THREADS, 0, g->stream>>>(
            F, wcount, number, nw);
        SF_LAUNCHED();
        SF_CUDA(cub::DeviceScan::ExclusiveSum(cub_tmp, cub_bytes, (const int *)wcount, number,
                                              nw + 1, g->stream));
        bke_final<<<lb, SEG_THREADS, 0, g->stream>>>(B, area, first, F, number, A, Am, na,
                                                     labels->data, nx, nbx, p->min_area);
        SF_LAUNCHED();
        {
            int h[2]; // the islands, and the pixels they hold
            SF_TRY(sf_gpu_to_host(g, h, number + nw, sizeof h));
            count = h[0];
            if (npix_out)
                *npix_out = (unsigned)h[1];
        }
        if (nlabels)
            *nlabels = count;
    }
fail:
    return st;
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
    {
        size_t nbx = ((size_t)nx + 1) / 2, nb = nbx * (((size_t)ny + 1) / 2), a, b;
        a = seg_scratch_bytes(npix, cub);
        b = bke_scratch_bytes(nb, (size_t)ny * nbx, cub);
        return a > b ? a : b;
    }
}

extern "C" sf_status sf_segment_gpu(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                                    sf_labels *labels, int *nlabels)
{
    return sf_segment_gpu_counted(g, mask, p, labels, nlabels, NULL);
}

extern "C" sf_status sf_segment_gpu_counted(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                                            sf_labels *labels, int *nlabels, long long *npix_out)
{
    sf_status st = SF_OK;
    sf_seg_params def;
    size_t npix, cub_bytes = 0, off;
    int nx, ny, nseg, count = 0, nchunk;
    int *counts, *number, *L;
    unsigned *area;
    unsigned char *scratch = NULL;
    unsigned seg_blocks, pix_blocks;

    if (npix_out)
        *npix_out = 0; // unknown unless the block path counts them
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
    if (p->connectivity == 8 && npix < 0x7f7f7f7fu)
        return segment_bke(g, mask, p, labels, nlabels, npix_out);

    nchunk = (int)seg_nchunk(npix);
    SF_CUDA(seg_cub_bytes(nchunk + 1, g->stream, &cub_bytes));
    SF_TRY(sf_gpu_scratch(g, seg_scratch_bytes(npix, cub_bytes), (void **)&scratch));
    off = sf_align256(npix * sizeof(int));
    area = (unsigned *)scratch;
    counts = (int *)(scratch + off);
    number = (int *)(scratch + off + sf_align256(((size_t)nchunk + 1) * sizeof(int)));
    L = labels->data;

    nseg = (nx + 31) / 32;
    seg_blocks = sf_blocks((size_t)nseg * ny * 32, SEG_THREADS);
    pix_blocks = sf_blocks(npix, SEG_THREADS);

    SF_TRY(sf_gpu_memset(g, counts + nchunk, 0, sizeof(int)));
    seg_init<<<seg_blocks, SEG_THREADS, 0, g->stream>>>(mask->data, L, area, nx, ny, nseg);
    SF_LAUNCHED();
    seg_merge<<<seg_blocks, SEG_THREADS, 0, g->stream>>>(mask->data, L, nx, ny, nseg,
                                                         p->connectivity == 8);
    SF_LAUNCHED();
    seg_compress<<<pix_blocks, SEG_THREADS, 0, g->stream>>>(mask->data, L, area, (int)npix);
    SF_LAUNCHED();
    seg_rank<<<nchunk, SEG_THREADS, 0, g->stream>>>(mask->data, L, area, counts, (int)npix,
                                                    p->min_area);
    SF_LAUNCHED();
    SF_CUDA(cub::DeviceScan::ExclusiveSum(scratch + off + 2 * sf_align256(((size_t)nchunk + 1) * sizeof(int)),
                                          cub_bytes, (const int *)counts, number, nchunk + 1,
                                          g->stream));
    SF_LAUNCHED();
    seg_final<<<pix_blocks, SEG_THREADS, 0, g->stream>>>(mask->data, L, area, number, (int)npix);
    SF_LAUNCHED();
    SF_TRY(sf_gpu_to_host(g, &count, number + nchunk, sizeof count));
    if (nlabels)
        *nlabels = count;
fail:
    return st;
}
