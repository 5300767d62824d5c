// Stage `deblend`, GPU version (twin of cpu/deblend.c): SExtractor's
// multi-threshold deblending with one thread block per island, all islands
// at once. The rule is in include/skyfind/deblend.h, the arithmetic that
// decides labels in src/calc/deblend_calc.h (the very functions the CPU twin
// calls), so the labels, parents and child counts are identical.
//
// Steps, all on g->stream:
//  1. the labelled pixels as 64-bit keys (label << 32 | raster index),
//     compacted and radix-sorted: each island's pixels in raster order, as
//     the CPU twin's counting sort gives them; the island's first and last
//     position in the sorted list. Their number T sizes the arrays: the
//     segment stage's (sf_deblend_in.npix), else counted first (db_count and
//     a read back); a count that the labels contradict pads or cuts the keys
//     (db_collect, db_pad) and fails at the next read back. db_collect reads
//     the mask 16 bytes a thread where mask and labels have no padding (a
//     sky run ends there) and the labels where it is set;
//  2. db_prepare, a block per island (islands sorted into three size
//     classes, run on blocks of 64, 256 and 1024 threads): d and sigma of
//     each pixel, the box, the peak in sigma, the levels, top[] (the highest
//     level a pixel is
//     above), the island's exact flux, each pixel's earlier neighbours in the
//     island (binary search in the sorted list) and a bound on the island's
//     nodes (sum of top / minarea + 1: the nodes of one level are disjoint
//     and hold minarea pixels or more) and objects (n / minarea);
//  3. the bounds are scanned into offsets and the tree's memory allocated;
//     (steps 2 and 4 run their three size classes side by side, on the
//     context's side streams, sf_gpu_fork/sf_gpu_join)
//  4. db_split, a block per island: for each level, a lock-free union-find
//     of the pixels above it (the root of a component is its smallest local
//     index, i.e. its first pixel in raster order, as on the CPU), the
//     component sizes, the nodes of at least minarea pixels numbered in
//     raster order of their first pixel (a block scan), each pixel's deepest
//     node and the nodes' exact excess flux (128-bit atomics). Then one
//     thread cuts the tree exactly as the CPU twin does (the tree is small),
//     the objects' exact moments and peaks are summed by atomics, their
//     Gaussians made, the remaining pixels gathered up, and the objects
//     numbered by first pixel;
//  5. the objects of the image are sorted by first pixel (canonical labels),
//     the label map rewritten, and the parents and child counts copied back.
//
// In this file, in that order: the per-island records (db_isl, db_gnode,
// db_objs) and the profiling marks; step 1's kernels (db_count, db_slots and
// db_collect, db_pad, db_bounds, db_classify); the helpers of step 2 (neighbour search, a
// pixel's d and sigma, the levels), db_prepare_one and its kernel; the
// union-find; db_split_one (the level loop, the cut, the objects) and its
// kernel; step 5's kernels; and the host function sf_deblend_gpu, which
// lays out the scratch (sf_carve, common.cuh) and launches everything.
// Developer knobs: SKYFIND_DEBLEND_PROFILE (clock cycles of db_split's phases),
// SKYFIND_DEBLEND_GLOBAL (small islands in global memory),
// SKYFIND_DEBLEND_SERIAL (the three size classes one after the other on the
// stage's stream instead of side by side).
#include <cub/cub.cuh>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "fix_atomic.cuh"
#include "scan_small.cuh"
#include "skyfind/deblend.h"
#include "deblend_calc.h"

#define DB_THREADS 256
#define DB_MAXLEV 1024 // nthresh's maximum
#define DB_ITEMS 16    // consecutive pixels per thread when nodes are numbered
// Size classes: islands of at most DB_C0 pixels run on blocks of 64 threads,
// up to DB_C1 on 256, larger ones on 1024; the work arrays of the first two
// classes are always in shared memory, of the third up to DB_BIGSM pixels.
#define DB_C0 256
#define DB_C1 2048
#define DB_BIGSM 8192
// db_split's blocks an SM that the registers must allow, by class (their
// shared memory is sized for it in sf_deblend_gpu)
#define DB_MINB0 12
#define DB_MINB1 2
// Shared bytes a pixel of an island held in shared memory: its neighbours,
// top, union-find, root, count, deepest node, d and sigma.
#define DB_PXB (sizeof(int4) + 5 * sizeof(int) + 2 * sizeof(float))

// The detection image and how d and sigma are formed from it.
struct db_src {
    const float *det, *bkg, *rms;
    size_t dstride, bstride, rstride;
    float level, sigma, level_scale, noise_scale, t0;
    int subtract, nx;
};

// One island, as db_prepare leaves it.
struct db_isl {
    long long start; // its first position in the sorted pixel list
    int n;           // pixels
    int whole;       // 1: one object, nothing to split
    int x0, y0, e;
    float P;
    double value0;   // mincont * the island's flux
};

// A node of an island's tree (cpu/deblend.c's db_node, less the unused flux).
struct db_gnode {
    unsigned long long ex[2]; // sum of (d - t sigma) over the node, 128-bit, scale 2^e
    int level, first, parent, npix;
    int ok, nsplit, contrast, out;
};

// Per-object arrays of an island's objects.
struct db_objs {
    int *onode;              // the object's node
    unsigned long long *mom; // 6 sums of 2 words each
    unsigned *opeak;         // sf_fkey of its peak in sigma
    unsigned long long *onpix;
    sf_db_gauss *g;
    int *ofirst, *orank;
    unsigned *firstpix;      // raster index of its first pixel, by rank
};

// SKYFIND_DEBLEND_PROFILE (a developer knob): clock cycles of db_split's
// phases, summed by thread 0 of each block over the islands it splits.
#define DB_NPROF 11
#define DB_MARK(q)                                                   \
    do {                                                             \
        if (prof && threadIdx.x == 0) {                              \
            const unsigned long long now_ = clock64();               \
            pc[q] += now_ - tmark;                                   \
            tmark = now_;                                            \
        }                                                            \
    } while (0)

#define DB_ERR_LABEL 1u
#define DB_ERR_CAP 2u
#define DB_ERR_COUNT 4u // more labelled pixels than the count given

static __device__ __forceinline__ unsigned db_q(unsigned long long key)
{
    return (unsigned)(key & 0xFFFFFFFFull);
}

// The label of (x, y), read only where the mask (when given) is set: the
// segment stage labels mask pixels only, so a 1-byte read stands for the
// 4-byte one on the empty sky.
static __device__ __forceinline__ int32_t db_label(const int32_t *__restrict__ lab,
                                                   size_t lstride,
                                                   const uint8_t *__restrict__ mask,
                                                   size_t mstride, int x, int y)
{
    if (mask && !mask[(size_t)y * mstride + x])
        return 0;
    return lab[(size_t)y * lstride + x];
}

// A label read from the map: itself, or 0 (and DB_ERR_LABEL flagged) when
// outside 0..nisl.
static __device__ __forceinline__ int32_t db_checked(int32_t l, int nisl, unsigned *err)
{
    if (l < 0 || l > nisl) {
        atomicOr(err, DB_ERR_LABEL);
        return 0;
    }
    return l;
}

// 1. Count the labelled pixels (a block per row at a time); flag labels
// outside 0..nisl.
static __global__ void db_count(const int32_t *__restrict__ lab, size_t lstride,
                                const uint8_t *__restrict__ mask, size_t mstride, int nx, int ny,
                                int nisl, unsigned long long *__restrict__ total,
                                unsigned *__restrict__ err)
{
    typedef cub::BlockReduce<unsigned long long, DB_THREADS> R;
    __shared__ typename R::TempStorage tmp;
    unsigned long long c = 0;
    for (int y = blockIdx.x; y < ny; y += gridDim.x) {
        for (int x = threadIdx.x; x < nx; x += DB_THREADS) {
            c += db_checked(db_label(lab, lstride, mask, mstride, x, y), nisl, err) != 0;
        }
    }
    c = R(tmp).Sum(c);
    if (threadIdx.x == 0 && c)
        atomicAdd(total, c);
}

// A warp's slots for its lanes' c keys each: the first of this lane's,
// from one atomicAdd on *fill (past T: DB_ERR_COUNT). Warp-uniform.
static __device__ __forceinline__ unsigned long long db_slots(int c, int lane,
                                                              unsigned long long T,
                                                              unsigned long long *fill,
                                                              unsigned *err, bool *none)
{
    *none = !__ballot_sync(0xffffffffu, c != 0); // the sky: no scan
    if (*none)
        return 0;
    const int incl = sf_warp_scan_incl(c, lane);
    const int total = __shfl_sync(0xffffffffu, incl, 31);
    unsigned long long at = 0;
    if (lane == 31) {
        at = atomicAdd(fill, (unsigned long long)total);
        if (at + total > T)
            atomicOr(err, DB_ERR_COUNT);
    }
    return __shfl_sync(0xffffffffu, at, 31) + (unsigned long long)(incl - c);
}

// The keys of the labelled pixels, in any order (warp-aggregated slots),
// at most T of them (past T: DB_ERR_COUNT); a label outside 0..nisl is
// flagged (DB_ERR_LABEL) and left out. *fill ends as the labelled pixels.
// With a mask, and mask and labels without padding (as the segment stage
// makes them), a thread takes 16 pixels by one 16-byte load of the mask,
// which ends a sky run (nearly all of them: a thread a pixel read the 64 MB
// mask of an 8192^2 image a byte at a time, 0.14 ms on an H200), and reads
// the labels where the mask is set; else a thread a pixel of a row.
#define DB_RUN 16
static __global__ void db_collect(const int32_t *__restrict__ lab, size_t lstride,
                                  const uint8_t *__restrict__ mask, size_t mstride, int nx, int ny,
                                  int nisl, unsigned long long T,
                                  unsigned long long *__restrict__ fill,
                                  unsigned *__restrict__ err,
                                  unsigned long long *__restrict__ keys)
{
    const int lane = threadIdx.x & 31;
    bool none;
    if (mask && mstride == (size_t)nx && lstride == (size_t)nx &&
        !(reinterpret_cast<uintptr_t>(mask) & 15)) {
        const long long npix = (long long)nx * ny, nch = (npix + DB_RUN - 1) / DB_RUN;
        const long long gs = (long long)gridDim.x * blockDim.x;
        for (long long base = (blockIdx.x * (long long)blockDim.x + threadIdx.x) & ~31LL;
             base < nch; base += gs) { // warp-uniform
            const long long i0 = (base + lane) * DB_RUN;
            unsigned bits = 0; // bit k: pixel i0 + k holds a label in 1..nisl
            if (i0 < npix) {
                uint8_t mb[DB_RUN];
                bool any = true;
                if (i0 + DB_RUN <= npix) {
                    const uint4 v = *reinterpret_cast<const uint4 *>(mask + i0);
                    any = (v.x | v.y | v.z | v.w) != 0;
                    memcpy(mb, &v, DB_RUN);
                } else {
                    for (int k = 0; k < DB_RUN; k++)
                        mb[k] = i0 + k < npix ? mask[i0 + k] : 0;
                }
                for (int k = 0; any && k < DB_RUN; k++) {
                    if (!mb[k])
                        continue;
                    if (db_checked(lab[i0 + k], nisl, err))
                        bits |= 1u << k;
                }
            }
            unsigned long long at = db_slots(__popc(bits), lane, T, fill, err, &none);
            if (none)
                continue;
            for (; bits; bits &= bits - 1, at++) {
                const long long i = i0 + __ffs(bits) - 1;
                if (at < T)
                    keys[at] = ((unsigned long long)(unsigned)lab[i] << 32) | (unsigned long long)i;
            }
        }
        return;
    }
    for (int y = blockIdx.x; y < ny; y += gridDim.x) {
        for (int xb = 0; xb < nx; xb += DB_THREADS) { // uniform over the block
            const int x = xb + (int)threadIdx.x;
            const int32_t l =
                x < nx ? db_checked(db_label(lab, lstride, mask, mstride, x, y), nisl, err) : 0;
            const unsigned long long at = db_slots(l != 0, lane, T, fill, err, &none);
            if (l && at < T)
                keys[at] = ((unsigned long long)(unsigned)l << 32) |
                           ((unsigned long long)y * (unsigned)nx + (unsigned)x);
        }
    }
}

// Fewer labelled pixels than the count given: the keys' unwritten tail
// [*fill, T) holds keys that sort last and that db_bounds skips (label
// 0xFFFFFFFF), so nothing reads a stale key before the stage fails.
static __global__ void db_pad(const unsigned long long *__restrict__ fill, long long T,
                              unsigned long long *__restrict__ keys)
{
    const unsigned long long f = *fill;
    for (long long p = (long long)f + blockIdx.x * (long long)blockDim.x + threadIdx.x; p < T;
         p += (long long)gridDim.x * blockDim.x)
        keys[p] = ~0ull;
}

// Each island's first and one-past-last position in the sorted list (both
// zero when the island has no pixel).
static __global__ void db_bounds(const unsigned long long *__restrict__ keys, long long T,
                                 int nisl, long long *__restrict__ start,
                                 long long *__restrict__ end)
{
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < T;
         p += (long long)gridDim.x * blockDim.x) {
        const unsigned l = (unsigned)(keys[p] >> 32);
        if (l == 0 || l > (unsigned)nisl) // db_pad's keys
            continue;
        if (p == 0 || (unsigned)(keys[p - 1] >> 32) != l)
            start[l - 1] = p;
        if (p == T - 1 || (unsigned)(keys[p + 1] >> 32) != l)
            end[l - 1] = p + 1;
    }
}

// The size classes of the islands: lists of island indices.
static __global__ void db_classify(const long long *__restrict__ start,
                                   const long long *__restrict__ end, int nisl,
                                   int *__restrict__ ncls, int *__restrict__ lists)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < nisl; j += gridDim.x * blockDim.x) {
        const long long n = end[j] - start[j];
        const int c = n <= DB_C0 ? 0 : n <= DB_C1 ? 1 : 2;
        lists[(size_t)c * nisl + atomicAdd(&ncls[c], 1)] = j;
    }
}

// The largest, ignoring NaN, as the CPU's `s > P ? s : P`.
struct db_fmax {
    __device__ __forceinline__ float operator()(float a, float b) const { return b > a ? b : a; }
};

struct db_imin {
    __device__ __forceinline__ int operator()(int a, int b) const { return b < a ? b : a; }
};
struct db_imax {
    __device__ __forceinline__ int operator()(int a, int b) const { return b > a ? b : a; }
};

// Local index of raster index q in the island's sorted list, or -1.
static __device__ int db_find(const unsigned long long *__restrict__ k, int n,
                              unsigned long long key)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) >> 1;
        const unsigned long long v = k[mid];
        if (v == key)
            return mid;
        if (v < key)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static __device__ __forceinline__ void db_pixel(const db_src &s, unsigned q, float *d, float *sg)
{
    const int x = (int)(q % (unsigned)s.nx), y = (int)(q / (unsigned)s.nx);
    const float v = s.det[(size_t)y * s.dstride + x];
    float lev, sig;
    if (s.bkg) {
        lev = s.subtract ? SF_THR_FMUL(s.bkg[(size_t)y * s.bstride + x], s.level_scale) : 0.0f;
        sig = s.rms ? SF_THR_FMUL(s.rms[(size_t)y * s.rstride + x], s.noise_scale) : s.sigma;
    } else {
        lev = s.level;
        sig = s.sigma;
    }
    *d = sf_db_fsub(v, lev);
    *sg = sig;
}

// The levels of an island, in parallel (level k by thread k - 1, ...), into
// shared memory; the caller synchronises before reading them.
template <int TH>
static __device__ __forceinline__ void db_levels(float t0, float P, int N, float *lev,
                                                 double *sl)
{
    if (threadIdx.x == 0)
        *sl = sf_db_level_log(t0, P);
    __syncthreads();
    const double l = *sl;
    for (int k = 1 + (int)threadIdx.x; k < N; k += TH)
        lev[k - 1] = sf_db_level(t0, l, k, N);
}

// 2. Island j, by a block of TH threads.
template <int TH>
static __device__ __forceinline__ void
    db_prepare_one(int j, db_src s, const unsigned long long *__restrict__ keys,
               const long long *__restrict__ start, const long long *__restrict__ end,
               int N, int minarea, int conn, double mincont, float *__restrict__ dd,
               float *__restrict__ ss, int *__restrict__ top, int4 *__restrict__ nb,
               int *__restrict__ deep, db_isl *__restrict__ isl,
               long long *__restrict__ ncap, long long *__restrict__ ocap)
{
    typedef cub::BlockReduce<int, TH> IR;
    typedef cub::BlockReduce<float, TH> FR;
    typedef cub::BlockReduce<long long, TH> LR;
    __shared__ union {
        typename IR::TempStorage i;
        typename FR::TempStorage f;
        typename LR::TempStorage l;
    } tmp;
    __shared__ float lev[DB_MAXLEV];
    __shared__ int sx0, sx1, swhole;
    __shared__ float sP, sM;
    __shared__ unsigned long long stot[2];
    __shared__ double sl;
    const int tid = threadIdx.x;
    const long long s0 = start[j];
    const int n = (int)(end[j] - s0);
    const unsigned long long *k = keys + s0;
    db_isl out;
    memset(&out, 0, sizeof out);
    out.start = s0;
    out.n = n;
    out.whole = 1;
    if (N < 2 || !(s.t0 > 0) || (long long)n < 2LL * minarea) {
        if (tid == 0) {
            isl[j] = out;
            ncap[j] = 0;
            ocap[j] = 1;
        }
        return;
    }
    // d, sigma, the columns of the box, the peak in sigma, the largest d
    int x0 = INT_MAX, x1 = -1, bad = 0;
    float P = -INFINITY, M = 0;
    for (int i = tid; i < n; i += TH) {
        const unsigned q = db_q(k[i]);
        const int x = (int)(q % (unsigned)s.nx);
        float d, sg;
        db_pixel(s, q, &d, &sg);
        dd[s0 + i] = d;
        ss[s0 + i] = sg;
        bad |= !sf_db_usable(d, sg);
        x0 = min(x0, x);
        x1 = max(x1, x);
        const float r = sf_db_fdiv(d, sg);
        P = r > P ? r : P;
        M = d > M ? d : M;
    }
    bad = __syncthreads_or(bad);
    x0 = IR(tmp.i).Reduce(x0, db_imin());
    if (tid == 0)
        sx0 = x0;
    __syncthreads();
    x1 = IR(tmp.i).Reduce(x1, db_imax());
    if (tid == 0)
        sx1 = x1;
    __syncthreads();
    P = FR(tmp.f).Reduce(P, db_fmax());
    if (tid == 0)
        sP = P;
    __syncthreads();
    M = FR(tmp.f).Reduce(M, db_fmax());
    if (tid == 0) {
        sM = M;
        swhole = bad || !(sP > s.t0) || !isfinite(sP) || !isfinite(M);
        stot[0] = stot[1] = 0;
    }
    __syncthreads();
    if (!swhole) {
        db_levels<TH>(s.t0, sP, N, lev, &sl);
        __syncthreads();
        for (int i = tid; i < n && !bad; i += TH) // the top level's cut must not overflow
            bad = !isfinite(SF_THR_FMUL(lev[N - 2], ss[s0 + i]));
        if (__syncthreads_or(bad) && tid == 0)
            swhole = 1;
        __syncthreads();
    }
    if (swhole) {
        if (tid == 0) {
            isl[j] = out;
            ncap[j] = 0;
            ocap[j] = 1;
        }
        return;
    }
    const int y0 = (int)(db_q(k[0]) / (unsigned)s.nx), y1 = (int)(db_q(k[n - 1]) / (unsigned)s.nx);
    const int bw = sx1 - sx0 + 1, bh = y1 - y0 + 1;
    const int e = sf_fix_exponent((double)sM) - ms_scale_shift(bw, bh);
    const unsigned long long lab = k[0] & 0xFFFFFFFF00000000ull;
    long long sumtop = 0;
    sf_fix128 tot = sf_fix_zero();
    for (int i = tid; i < n; i += TH) {
        const float d = dd[s0 + i], sg = ss[s0 + i];
        int t = 0;
        while (t < N - 1 && sf_db_above(d, sg, lev[t]))
            t++;
        top[s0 + i] = t;
        deep[s0 + i] = 0;
        sumtop += t;
        sf_fix_add(&tot, sf_fix_from_double(ldexp((double)d, e)));
        // earlier neighbours: left, and the row above (left, up, right)
        const unsigned q = db_q(k[i]);
        const int x = (int)(q % (unsigned)s.nx), y = (int)(q / (unsigned)s.nx);
        const int dxs[4] = {-1, -1, 0, 1}, dys[4] = {0, -1, -1, -1};
        int b[4];
        for (int c = 0; c < 4; c++) {
            const int xx = x + dxs[c], yy = y + dys[c];
            b[c] = -1;
            if (conn == 4 && dxs[c] != 0 && dys[c] != 0)
                continue;
            if (xx < 0 || xx >= s.nx || yy < 0)
                continue;
            b[c] = db_find(k, n, lab | ((unsigned long long)yy * (unsigned)s.nx + (unsigned)xx));
        }
        nb[s0 + i] = make_int4(b[0], b[1], b[2], b[3]);
    }
    sf_atomic_add128(stot, tot);
    sumtop = LR(tmp.l).Sum(sumtop);
    __syncthreads();
    if (tid == 0) {
        out.whole = 0;
        out.x0 = sx0;
        out.y0 = y0;
        out.e = e;
        out.P = sP;
        out.value0 = ms_mul(mincont, sf_fix_to_double(sf_fix_load(stot), e));
        isl[j] = out;
        ncap[j] = sumtop / minarea + 1;
        ocap[j] = n / minarea > 1 ? n / minarea : 1;
    }
}

// The islands of one size class (list[0 .. *nlist - 1]), a block each in turn.
template <int TH>
static __global__ void __launch_bounds__(TH)
    db_prepare(const int *__restrict__ list, const int *__restrict__ nlist, db_src s,
               const unsigned long long *__restrict__ keys, const long long *__restrict__ start,
               const long long *__restrict__ end, int N, int minarea, int conn, double mincont,
               float *__restrict__ dd, float *__restrict__ ss, int *__restrict__ top,
               int4 *__restrict__ nb, int *__restrict__ deep, db_isl *__restrict__ isl,
               long long *__restrict__ ncap, long long *__restrict__ ocap)
{
    const int m = *nlist;
    for (int t = blockIdx.x; t < m; t += gridDim.x) {
        __syncthreads(); // the shared state of the previous island is free
        db_prepare_one<TH>(list[t], s, keys, start, end, N, minarea, conn, mincont, dd, ss, top,
                           nb, deep, isl, ncap, ocap);
    }
}

// Union-find over local indices (in shared or global memory): parents are
// never larger than their children, so the root of a set is its smallest
// index. Every write is an atomicMin (values only decrease), and finding
// halves the path, as the segment stage's labeller (gpu/segment.cu) does:
// without it a row joined in parallel becomes a chain as long as the island.
static __device__ __forceinline__ int db_load(const int *p) { return *(const volatile int *)p; }

static __device__ int db_root(int *uf, int a)
{
    for (;;) {
        const int p = db_load(uf + a);
        if (p == a)
            return a;
        const int gp = db_load(uf + p);
        if (gp == p)
            return p;
        atomicMin(uf + a, gp);
        a = gp;
    }
}

static __device__ void db_unite(int *uf, int a, int b)
{
    for (;;) {
        a = db_root(uf, a);
        b = db_root(uf, b);
        if (a == b)
            return;
        if (a < b) {
            const int t = a;
            a = b;
            b = t;
        }
        const int old = atomicMin(uf + a, b); // a > b: hook a under b if still a root
        if (old == a)
            return;
        a = old;
    }
}

// The nodes of one thread's pixels i0 .. i1 - 1 at level lv (f of them are
// the first pixels of components of at least minarea pixels), numbered from
// id; a root's count becomes -(node + 1), or 0 past the tree's bound (an
// error).
static __device__ __forceinline__ void db_new_nodes(int i0, int i1, int f, int id, int lv,
                                                    int minarea, long long cap, const int *tp,
                                                    const int *r, int *c, const int *dp,
                                                    db_gnode *nd, unsigned *err)
{
    for (int i = i0; i < i1 && f; i++) {
        if (!(tp[i] >= lv && r[i] == i && c[i] >= minarea))
            continue;
        if (id < cap) {
            db_gnode z;
            memset(&z, 0, sizeof z);
            z.level = lv;
            z.first = i;
            z.parent = dp[i];
            z.npix = c[i];
            z.ok = 1;
            z.out = -1;
            nd[id] = z;
            c[i] = -(id + 1);
        } else {
            atomicOr(err, DB_ERR_CAP);
            c[i] = 0;
        }
        id++;
    }
}

static __device__ void db_one(const unsigned long long *__restrict__ k, int n, int tid, int th,
                              int *objl, int *count, unsigned *firstpix)
{
    for (int i = tid; i < n; i += th)
        objl[i] = 0;
    if (tid == 0) {
        *count = 1;
        *firstpix = db_q(k[0]);
    }
}

// 4. Island j, by a block of TH threads. When the island has at most smax
// pixels, its pixels' data (neighbours, d, sigma, top) and work arrays (the
// union-find, roots, counts, deepest nodes: DB_PXB bytes a pixel) live in
// the dynamic shared memory, else in the global arrays; its tree starts
// there too (after the pixels' share) and moves to its global share when it
// outgrows snodes nodes.
template <int TH>
static __device__ __forceinline__ void
    db_split_one(int j, int smax, int snodes, int conn8, const unsigned long long *__restrict__ keys, int N, int minarea, int nx,
             float t0, const db_isl *__restrict__ isl, const float *__restrict__ dd,
             const float *__restrict__ ss, const int *__restrict__ top,
             const int4 *__restrict__ nb, int *deep, int *uf, int *rt, int *cnt,
             int *__restrict__ objl,
             const long long *__restrict__ nbase, const long long *__restrict__ obase,
             db_gnode *__restrict__ nodes, db_objs o, int *__restrict__ count,
             unsigned *__restrict__ err, unsigned long long *prof)
{
    typedef cub::BlockReduce<int, TH> IR;
    typedef cub::BlockScan<int, TH> IS;
    extern __shared__ int4 dsm4[];
    char *const sb = (char *)dsm4;
    __shared__ union {
        typename IR::TempStorage r;
        typename IS::TempStorage s;
    } tmp;
    __shared__ float lev[DB_MAXLEV];
    __shared__ int swhole, snobj, sq;
    __shared__ double sl;
    const int tid = threadIdx.x;
    unsigned long long pc[DB_NPROF - 1], tmark = prof ? clock64() : 0;
    if (prof)
        for (int q = 0; q < DB_NPROF - 1; q++)
            pc[q] = 0;
    const db_isl I = isl[j];
    const long long s0 = I.start, ob = obase[j];
    const int n = I.n;
    const unsigned long long *k = keys + s0;
    if (n == 0) { // an island without pixels: no object, as the CPU twin
        if (tid == 0)
            count[j] = 0;
        return;
    }
    if (I.whole) {
        db_one(k, n, tid, TH, objl + s0, &count[j], &o.firstpix[ob]);
        return;
    }
    const long long cap = nbase[j + 1] - nbase[j], ocap = obase[j + 1] - ob;
    // the tree starts in shared memory and moves to its global share when
    // it outgrows snodes nodes
    db_gnode *const ndg = nodes + nbase[j];
    db_gnode *nd = snodes > 0 ? (db_gnode *)(sb + DB_PXB * (size_t)smax) : ndg;
    const float *d = dd + s0, *sg = ss + s0;
    const int4 *nbr = nb + s0;
    const int *tp = top + s0;
    int *dp = deep + s0, *u = uf + s0, *r = rt + s0, *c = cnt + s0;
    if (n <= smax) { // the pixels' data and work arrays in shared memory
        int4 *nbs = (int4 *)sb;
        int *t = (int *)(nbs + smax);
        u = t + smax;
        r = u + smax;
        c = r + smax;
        dp = c + smax;
        float *ds = (float *)(dp + smax), *sgs = ds + smax;
        for (int i = tid; i < n; i += TH) {
            nbs[i] = nbr[i];
            t[i] = tp[i];
            dp[i] = 0;
            ds[i] = d[i];
            sgs[i] = sg[i];
        }
        nbr = nbs;
        tp = t;
        d = ds;
        sg = sgs;
    }
    const int e = I.e;
    db_levels<TH>(t0, I.P, N, lev, &sl);
    if (tid == 0) {
        db_gnode z;
        memset(&z, 0, sizeof z);
        z.level = 0;
        z.first = 0;
        z.parent = -1;
        z.npix = n;
        z.ok = 1;
        z.out = -1;
        nd[0] = z;
    }
    int nnode = 1; // the tree's nodes (every thread keeps the same count)
    __syncthreads();
    DB_MARK(0);
    for (int lv = 1; lv < N; lv++) {
        // (a level with fewer than minarea pixels above it makes no node,
        // and the loop ends below as the CPU twin's ends here)
        const float t = lev[lv - 1];
        for (int i = tid; i < n; i += TH)
            if (tp[i] >= lv) {
                u[i] = i;
                c[i] = 0;
            }
        __syncthreads();
        for (int i = tid; i < n; i += TH) {
            if (tp[i] < lv)
                continue;
            // earlier neighbours (left, up-left, up, up-right; the diagonals
            // are -1 under 4-connectivity). Under 8-connectivity a pixel
            // joined to the one above is already joined through it to its
            // up-left and up-right (their row neighbour) and to its left
            // (whose up-right it is), and one joined to its left is joined
            // to its up-left (the left's up): the same components with
            // fewer unions (the CPU twin joins all four).
            const int4 b = nbr[i];
            const int L = b.x >= 0 && tp[b.x] >= lv, UL = b.y >= 0 && tp[b.y] >= lv,
                      U = b.z >= 0 && tp[b.z] >= lv, UR = b.w >= 0 && tp[b.w] >= lv;
            if (U) {
                db_unite(u, i, b.z);
                if (L && !conn8)
                    db_unite(u, i, b.x);
            } else {
                if (L)
                    db_unite(u, i, b.x);
                else if (UL)
                    db_unite(u, i, b.y);
                if (UR)
                    db_unite(u, i, b.w);
            }
        }
        __syncthreads();
        DB_MARK(1);
        for (int i = tid; i < n; i += TH)
            if (tp[i] >= lv) {
                const int rr = db_root(u, i);
                r[i] = rr;
                atomicAdd(&c[rr], 1);
            }
        __syncthreads();
        DB_MARK(2);
        // nodes for the components of at least minarea pixels, numbered in
        // raster order of their first pixels; cnt[root] becomes -(node + 1)
        const int first_node = nnode;
        const int items = TH <= 64 ? 4 : TH <= 256 ? 8 : DB_ITEMS;
        if (n <= TH * items) { // one round (classes 0 and 1 always): the scan's total
            const int i0 = tid * items, i1 = min(i0 + items, n);
            int f = 0, off, agg;
            for (int i = i0; i < i1; i++)
                f += tp[i] >= lv && r[i] == i && c[i] >= minarea;
            IS(tmp.s).ExclusiveSum(f, off, agg);
            // will the tree still fit the shared memory? (agg is the block's)
            if (nd != ndg && first_node + agg > snodes) {
                for (int i = tid; i < first_node; i += TH)
                    ndg[i] = nd[i];
                nd = ndg;
                __syncthreads();
            }
            db_new_nodes(i0, i1, f, first_node + off, lv, minarea, cap, tp, r, c, dp, nd, err);
            nnode = first_node + agg < cap ? first_node + agg : (int)cap;
            __syncthreads();
        } else {
            if (nd != ndg) { // will the tree still fit the shared memory?
                int q = 0;
                for (int i = tid; i < n; i += TH)
                    q += tp[i] >= lv && r[i] == i && c[i] >= minarea;
                q = IR(tmp.r).Sum(q);
                if (tid == 0)
                    sq = q;
                __syncthreads();
                if (first_node + sq > snodes) {
                    for (int i = tid; i < first_node; i += TH)
                        ndg[i] = nd[i];
                    nd = ndg;
                    __syncthreads();
                }
            }
            for (int c0 = 0; c0 < n; c0 += TH * items) {
                const int i0 = c0 + tid * items, i1 = min(i0 + items, n);
                int f = 0, off, agg;
                for (int i = i0; i < i1; i++)
                    f += tp[i] >= lv && r[i] == i && c[i] >= minarea;
                IS(tmp.s).ExclusiveSum(f, off, agg);
                db_new_nodes(i0, i1, f, nnode + off, lv, minarea, cap, tp, r, c, dp, nd, err);
                nnode = nnode + agg < cap ? nnode + agg : (int)cap;
                __syncthreads();
            }
        }
        DB_MARK(3);
        if (nnode == first_node)
            break;
        for (int i = tid; i < n; i += TH)
            if (tp[i] >= lv) {
                const int cc = c[r[i]];
                if (cc < 0) {
                    const int id = -cc - 1;
                    dp[i] = id;
                    sf_atomic_add128(nd[id].ex, sf_fix_from_double(ldexp(
                                                    (double)sf_db_excess(d[i], sg[i], t), e)));
                }
            }
        __syncthreads();
        DB_MARK(4);
    }
    // cut the branches from the top level down, exactly as the CPU twin
    if (tid == 0) {
        const int nn = nnode;
        for (int i = nn - 1; i > 0; i--) {
            db_gnode *ch = &nd[i], *par = &nd[ch->parent];
            const sf_fix128 ex = sf_fix_load(ch->ex);
            if (ch->nsplit > 1)
                ch->ok = 0;
            par->ok &= ch->ok;
            ch->contrast = sf_fix_to_double(ex, e) > I.value0;
            par->nsplit += ch->contrast;
        }
        if (nd[0].nsplit > 1)
            nd[0].ok = 0;
        swhole = nd[0].ok;
        snobj = 0;
        if (!swhole) {
            int no = 0;
            for (int i = 1; i < nn; i++) {
                const db_gnode *ch = &nd[i];
                if (nd[ch->parent].nsplit > 1 && ch->ok && ch->contrast) {
                    if (no < ocap)
                        o.onode[ob + no++] = i;
                    else
                        atomicOr(err, DB_ERR_CAP);
                }
            }
            int *on = o.onode + ob;
            for (int a = 1; a < no; a++) { // insertion sort by first pixel
                const int v = on[a];
                int b = a;
                while (b > 0 && nd[on[b - 1]].first > nd[v].first) {
                    on[b] = on[b - 1];
                    b--;
                }
                on[b] = v;
            }
            for (int a = 0; a < no; a++)
                nd[on[a]].out = a;
            for (int i = 1; i < nn; i++) // parents come first: inherit
                if (nd[i].out < 0)
                    nd[i].out = nd[nd[i].parent].out;
            snobj = no;
        }
    }
    __syncthreads();
    DB_MARK(5);
    if (swhole) {
        db_one(k, n, tid, TH, objl + s0, &count[j], &o.firstpix[ob]);
        return;
    }
    const int nobj = snobj;
    for (int a = tid; a < nobj; a += TH) {
        for (int w = 0; w < 12; w++)
            o.mom[(ob + a) * 12 + w] = 0;
        o.opeak[ob + a] = sf_fkey(-INFINITY);
        o.onpix[ob + a] = 0;
        o.ofirst[ob + a] = INT_MAX;
    }
    __syncthreads();
    // each pixel's branch object (in rt[]); the moments of the branches
    for (int i = tid; i < n; i += TH) {
        const int ob_i = nd[dp[i]].out;
        r[i] = ob_i;
        if (ob_i >= 0) {
            const unsigned q = db_q(k[i]);
            const double dx = (double)((int)(q % (unsigned)nx) - I.x0),
                         dy = (double)((int)(q / (unsigned)nx) - I.y0);
            const float sv = sf_db_fdiv(d[i], sg[i]);
            sf_fix128 m6[6];
            for (int w = 0; w < 6; w++)
                m6[w] = sf_fix_zero();
            ms_add_terms(m6, ldexp((double)d[i], e), dx, dy);
            for (int w = 0; w < 6; w++)
                sf_atomic_add128(&o.mom[(ob + ob_i) * 12 + 2 * w], m6[w]);
            if (sv == sv)
                atomicMax(&o.opeak[ob + ob_i], sf_fkey(sv));
            atomicAdd(&o.onpix[ob + ob_i], 1ull);
        }
    }
    __syncthreads();
    DB_MARK(6);
    for (int a = tid; a < nobj; a += TH) {
        sf_fix128 S[6];
        for (int w = 0; w < 6; w++)
            S[w] = sf_fix_load(&o.mom[(ob + a) * 12 + 2 * w]);
        sf_db_gauss_make(S, e, (long long)o.onpix[ob + a], lev[nd[o.onode[ob + a]].level - 1],
                         sf_fkey_value(o.opeak[ob + a]), &o.g[ob + a]);
    }
    __syncthreads();
    DB_MARK(7);
    // gather up the rest: the largest Gaussian weight, the first object on ties
    const sf_db_gauss *g = o.g + ob;
    for (int i = tid; i < n; i += TH) {
        if (r[i] >= 0)
            continue;
        const unsigned q = db_q(k[i]);
        const double dx = (double)((int)(q % (unsigned)nx) - I.x0),
                     dy = (double)((int)(q / (unsigned)nx) - I.y0);
        int best = 0;
        double bw = sf_db_gauss_weight(&g[0], dx, dy);
        for (int a = 1; a < nobj; a++) {
            const double v = sf_db_gauss_weight(&g[a], dx, dy);
            if (v > bw) {
                bw = v;
                best = a;
            }
        }
        r[i] = best;
    }
    __syncthreads();
    DB_MARK(8);
    // number the objects in raster order of their first pixels
    for (int i = tid; i < n; i += TH)
        atomicMin(&o.ofirst[ob + r[i]], i);
    __syncthreads();
    for (int a = tid; a < nobj; a += TH) {
        const int f = o.ofirst[ob + a];
        int rank = 0;
        for (int b = 0; b < nobj; b++)
            rank += o.ofirst[ob + b] < f;
        o.orank[ob + a] = rank;
        o.firstpix[ob + rank] = f < n ? db_q(k[f]) : 0xFFFFFFFFu;
    }
    __syncthreads();
    for (int i = tid; i < n; i += TH)
        objl[s0 + i] = o.orank[ob + r[i]];
    if (tid == 0)
        count[j] = nobj;
    DB_MARK(9);
    if (prof && tid == 0) {
        for (int q = 0; q < DB_NPROF - 1; q++)
            atomicAdd(&prof[q], pc[q]);
        atomicAdd(&prof[DB_NPROF - 1], 1ull);
    }
}

template <int TH, int MINB = 1>
static __global__ void __launch_bounds__(TH, MINB)
    db_split(const int *__restrict__ list, const int *__restrict__ nlist, int smax, int snodes, int conn8,
             const unsigned long long *__restrict__ keys, int N, int minarea, int nx, float t0,
             const db_isl *__restrict__ isl, const float *__restrict__ dd,
             const float *__restrict__ ss, const int *__restrict__ top,
             const int4 *__restrict__ nb, int *deep, int *uf, int *rt, int *cnt,
             int *__restrict__ objl, const long long *__restrict__ nbase,
             const long long *__restrict__ obase, db_gnode *__restrict__ nodes, db_objs o,
             int *__restrict__ count, unsigned *__restrict__ err, unsigned long long *prof)
{
    const int m = *nlist;
    for (int t = blockIdx.x; t < m; t += gridDim.x) {
        __syncthreads();
        db_split_one<TH>(list[t], smax, snodes, conn8, keys, N, minarea, nx, t0, isl, dd, ss, top, nb,
                         deep, uf, rt, cnt, objl, nbase, obase, nodes, o, count, err, prof);
    }
}

// 5. The objects of the image as (first pixel, slot) pairs.
// Two totals the host needs, side by side for one download.
static __global__ void db_totals(const long long *a, const long long *b, long long *out)
{
    out[0] = *a;
    out[1] = *b;
}

static __global__ void db_totals2(const int *a, const unsigned *b, int *out)
{
    out[0] = *a;
    out[1] = (int)*b;
}

// db_fill runs before the host has checked the trees (the check's download
// overlaps it): slots at or past no, the objects' room, are not written.
static __global__ void db_fill(int nisl, const long long *__restrict__ obase,
                               const int *__restrict__ count, const int *__restrict__ base,
                               const unsigned *__restrict__ firstpix,
                               unsigned *__restrict__ okey, int *__restrict__ oval,
                               int *__restrict__ islof, long long no)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < nisl; j += gridDim.x * blockDim.x)
        for (int a = 0; a < count[j] && base[j] + a < no && obase[j] + a < no; a++) {
            const int sl = base[j] + a;
            okey[sl] = firstpix[obase[j] + a];
            oval[sl] = sl;
            islof[sl] = j + 1;
        }
}

static __global__ void db_number(int nall, const int *__restrict__ oval,
                                 const int *__restrict__ islof, int *__restrict__ newl,
                                 int *__restrict__ parent)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nall; i += gridDim.x * blockDim.x) {
        const int sl = oval[i];
        newl[sl] = i + 1;
        parent[i + 1] = islof[sl];
    }
}

static __global__ void db_relabel(const unsigned long long *__restrict__ keys, long long T,
                                  const int *__restrict__ objl, const int *__restrict__ base,
                                  const int *__restrict__ newl, int nx,
                                  int32_t *__restrict__ lab, size_t lstride)
{
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < T;
         p += (long long)gridDim.x * blockDim.x) {
        const unsigned long long key = keys[p];
        const unsigned q = db_q(key);
        const int l = (int)(key >> 32);
        lab[(size_t)(q / (unsigned)nx) * lstride + q % (unsigned)nx] = newl[base[l - 1] + objl[p]];
    }
}

static int db_bits(unsigned v)
{
    int b = 0;
    while (b < 32 && (1ull << b) <= v)
        b++;
    return b;
}

// A bump allocator over one device block.
extern "C" sf_status sf_deblend_gpu(sf_gpu *g, const sf_image *det, const sf_deblend_in *in,
                                    const sf_deblend_params *p, const sf_mask *mask,
                                    sf_labels *labels,
                                    int nislands, int *nobj, int **parent_out,
                                    int **nchild_out)
{
    sf_status st = SF_OK;
    const int nx = det->nx, ny = det->ny, N = p->nthresh;
    const size_t npix = sf_npix(nx, ny);
    int *parent = NULL, *nchild = NULL, nall = 0;
    void *blk = NULL, *scratch = NULL;
    unsigned long long *prof = NULL;
    unsigned hdr_err = 0;
    unsigned long long T = 0;
    long long ntot[2] = {0, 0};
    size_t cub1 = 0, cub2 = 0, c;
    const unsigned sm = (unsigned)(g && g->sm_count > 0 ? g->sm_count : 1), grid = sm * 8;
    db_src s;
    const uint8_t *mdata = NULL;
    size_t mstride = 0;
    const int side = !getenv("SKYFIND_DEBLEND_SERIAL"); // the size classes on side streams

    *nobj = 0;
    *parent_out = *nchild_out = NULL;
    if (!g)
        return sf_fail(SF_ERR_NO_GPU, "deblend (GPU): no GPU context");
    if ((st = sf_deblend_check(det, in, p, labels)))
        return st;
    if (det->loc != SF_DEVICE || labels->loc != SF_DEVICE ||
        (in->bkg && in->bkg->loc != SF_DEVICE) || (in->rms && in->rms->loc != SF_DEVICE))
        return sf_fail(SF_ERR_PARAM, "sf_deblend_gpu needs device buffers");
    if (npix > 0xFFFFFFFFull)
        return sf_fail(SF_ERR_PARAM, "deblend (GPU): %dx%d is more than 2^32 pixels", nx, ny);
    if (mask) {
        if (mask->loc != SF_DEVICE || mask->nx != nx || mask->ny != ny)
            return sf_fail(SF_ERR_PARAM, "deblend (GPU): the mask must be a %dx%d device buffer",
                           nx, ny);
        mdata = (const uint8_t *)mask->data;
        mstride = mask->stride;
    }
    if (nislands < 0)
        return sf_fail(SF_ERR_PARAM, "deblend (GPU): %d islands", nislands);
    parent = (int *)calloc(1, sizeof *parent);
    nchild = (int *)calloc((size_t)nislands + 1, sizeof *nchild);
    if (!parent || !nchild) {
        st = sf_fail(SF_ERR_NOMEM, "deblend (GPU): %d islands", nislands);
        goto fail;
    }
    memset(&s, 0, sizeof s);
    s.det = det->data;
    s.dstride = det->stride;
    if (in->bkg) {
        s.bkg = in->bkg->data;
        s.bstride = in->bkg->stride;
    }
    if (in->rms) {
        s.rms = in->rms->data;
        s.rstride = in->rms->stride;
    }
    s.level = in->level;
    s.sigma = in->sigma;
    s.level_scale = in->level_scale;
    s.noise_scale = in->noise_scale;
    s.t0 = in->t0;
    s.subtract = in->subtract;
    s.nx = nx;

    if (in->npix > 0) { // the segment stage counted them
        if ((unsigned long long)in->npix > npix) {
            st = sf_fail(SF_ERR_PARAM, "deblend (GPU): %lld island pixels in a %dx%d image",
                         in->npix, nx, ny);
            goto fail;
        }
        T = (unsigned long long)in->npix;
    } else {
        // 1. count the labelled pixels (and check the labels)
        unsigned long long *hdr;
        SF_TRY(sf_gpu_scratch(g, 256, (void **)&hdr));
        SF_CUDA(cudaMemsetAsync(hdr, 0, 256, g->stream));
        db_count<<<grid, DB_THREADS, 0, g->stream>>>(labels->data, labels->stride, mdata, mstride,
                                                     nx, ny,
                                                     nislands, hdr, (unsigned *)(hdr + 1));
        SF_LAUNCHED();
        {
            unsigned long long h[2];
            SF_TRY(sf_gpu_to_host(g, h, hdr, sizeof h));
            T = h[0];
            hdr_err = (unsigned)h[1];
        }
    }
    if (hdr_err & DB_ERR_LABEL) {
        st = sf_fail(SF_ERR_INTERNAL, "deblend (GPU): a label outside 0..%d", nislands);
        goto fail;
    }
    if (T > (unsigned long long)INT_MAX) {
        st = sf_fail(SF_ERR_PARAM, "deblend (GPU): %llu island pixels exceed the int range", T);
        goto fail;
    }
    if (nislands == 0 || T == 0) { // no pixel: no object (nchild all 0), as the CPU twin
        *parent_out = parent;
        *nchild_out = nchild;
        return SF_OK;
    }
    {
        const int L = nislands;
        const int kbits = 32 + db_bits((unsigned)L);
        unsigned long long *keys, *keys2, *hdr;
        float *dd, *ss;
        int *top, *deep, *uf, *rt, *cnt, *objl, *count, *base, *newl, *islof, *pard;
        int *oval, *oval2, *lists, *ncls = NULL;
        unsigned *okey, *okey2, *errp;
        int4 *nb;
        long long *start, *end, *ncap, *ocap, *nbase, *obase;
        db_isl *isl;
        db_gnode *nodes;
        db_objs o;
        sf_carve cv = {NULL, 0};
        size_t c1 = 0;
        SF_CUDA(cub::DeviceRadixSort::SortKeys(NULL, cub1, (unsigned long long *)NULL,
                                               (unsigned long long *)NULL, (int)T, 0, kbits,
                                               g->stream));
        SF_CUDA(cub::DeviceScan::ExclusiveSum(NULL, c1, (long long *)NULL, (long long *)NULL,
                                              L + 1, g->stream));
        cub1 = cub1 > c1 ? cub1 : c1;
        // the phase-1 layout, first measured (p == NULL), then carved
        for (int pass = 0; pass < 2; pass++) {
            cv.off = 0;
            // first the arrays that start at zero, for one memset
            hdr = sf_take<unsigned long long>(&cv, 32);
            start = sf_take<long long>(&cv, L);
            end = sf_take<long long>(&cv, L);
            ncap = sf_take<long long>(&cv, L + 1); // [L] 0 for the scan (db_prepare sets the rest)
            ocap = sf_take<long long>(&cv, L + 1);
            const size_t zeroed = cv.off;
            keys = sf_take<unsigned long long>(&cv, T);
            keys2 = sf_take<unsigned long long>(&cv, T);
            dd = sf_take<float>(&cv, T);
            ss = sf_take<float>(&cv, T);
            top = sf_take<int>(&cv, T);
            nb = sf_take<int4>(&cv, T);
            deep = sf_take<int>(&cv, T);
            uf = sf_take<int>(&cv, T);
            rt = sf_take<int>(&cv, T);
            cnt = sf_take<int>(&cv, T);
            objl = sf_take<int>(&cv, T);
            isl = sf_take<db_isl>(&cv, L);
            lists = sf_take<int>(&cv, 3 * (size_t)L);
            nbase = sf_take<long long>(&cv, L + 1);
            obase = sf_take<long long>(&cv, L + 1);
            void *ct = sf_take<char>(&cv, cub1);
            if (pass == 0) {
                SF_TRY(sf_gpu_scratch(g, cv.off, &scratch));
                cv.p = (char *)scratch;
            } else {
                SF_CUDA(cudaMemsetAsync(hdr, 0, zeroed, g->stream)); // hdr, start, end, ncap, ocap
                errp = (unsigned *)(hdr + 1);
                ncls = (int *)(hdr + 2);
                db_collect<<<grid, DB_THREADS, 0, g->stream>>>(labels->data, labels->stride,
                                                               mdata, mstride, nx, ny, L, T, hdr,
                                                               errp, keys2);
                SF_LAUNCHED();
                if (in->npix > 0) {
                    db_pad<<<sm, DB_THREADS, 0, g->stream>>>(hdr, (long long)T, keys2);
                    SF_LAUNCHED();
                }
                c = cub1;
                SF_CUDA(cub::DeviceRadixSort::SortKeys(ct, c, keys2, keys, (int)T, 0, kbits,
                                                       g->stream));
                db_bounds<<<sf_blocks(T, DB_THREADS), DB_THREADS, 0, g->stream>>>(
                    keys, (long long)T, L, start, end);
                SF_LAUNCHED();
                // 2. the islands
                db_classify<<<sf_blocks((size_t)L, DB_THREADS), DB_THREADS, 0, g->stream>>>(
                    start, end, L, ncls, lists);
                SF_LAUNCHED();
                // the three size classes side by side (each island's
                // records are its own): the stage waits for the slowest
                // class, not for the sum of the three
                if (side)
                    SF_TRY(sf_gpu_fork(g, 2));
                db_prepare<64><<<sm * 16, 64, 0, g->stream>>>(
                    lists, ncls, s, keys, start, end, N, p->minarea, p->connectivity, p->mincont,
                    dd, ss, top, nb, deep, isl, ncap, ocap);
                SF_LAUNCHED();
                db_prepare<256><<<sm * 4, 256, 0, side ? g->aux[0] : g->stream>>>(
                    lists + L, ncls + 1, s, keys, start, end, N, p->minarea, p->connectivity,
                    p->mincont, dd, ss, top, nb, deep, isl, ncap, ocap);
                SF_LAUNCHED();
                db_prepare<1024><<<sm * 2, 1024, 0, side ? g->aux[1] : g->stream>>>(
                    lists + 2 * (size_t)L, ncls + 2, s, keys, start, end, N, p->minarea,
                    p->connectivity, p->mincont, dd, ss, top, nb, deep, isl, ncap, ocap);
                SF_LAUNCHED();
                if (side)
                    SF_TRY(sf_gpu_join(g, 2));
                // 3. the offsets of the trees and objects
                SF_TRY(sf_scan_excl(g->stream, ncap, nbase, L + 1, ct, cub1));
                SF_TRY(sf_scan_excl(g->stream, ocap, obase, L + 1, ct, cub1));
                db_totals<<<1, 1, 0, g->stream>>>(nbase + L, obase + L, (long long *)(hdr + 4));
                SF_LAUNCHED();
                {
                    // the keys collected and their errors, with the totals
                    unsigned long long h[6];
                    SF_TRY(sf_gpu_to_host(g, h, hdr, sizeof h));
                    ntot[0] = (long long)h[4];
                    ntot[1] = (long long)h[5];
                    if ((unsigned)h[1] & DB_ERR_LABEL) {
                        st = sf_fail(SF_ERR_INTERNAL, "deblend (GPU): a label outside 0..%d", L);
                        goto fail;
                    }
                    if (h[0] != T || ((unsigned)h[1] & DB_ERR_COUNT)) {
                        st = sf_fail(SF_ERR_INTERNAL, "deblend (GPU): the labels hold %llu island "
                                     "pixels, not the %llu counted", h[0], T);
                        goto fail;
                    }
                }
            }
        }
        if (ntot[1] > 2147483646LL || ntot[0] > 2147483646LL) {
            st = sf_fail(SF_ERR_PARAM, "deblend (GPU): %lld tree nodes and %lld objects exceed "
                         "the int range", ntot[0], ntot[1]);
            goto fail;
        }
        // phase 2: the trees, the objects and the final numbering
        {
            const size_t NO = (size_t)ntot[1];
            sf_carve c2 = {NULL, 0};
            SF_CUDA(cub::DeviceRadixSort::SortPairs(NULL, cub2, (unsigned *)NULL, (unsigned *)NULL,
                                                    (int *)NULL, (int *)NULL, (int)NO, 0, 32,
                                                    g->stream));
            SF_CUDA(cub::DeviceScan::ExclusiveSum(NULL, c1, (int *)NULL, (int *)NULL, L + 1,
                                                  g->stream));
            cub2 = cub2 > c1 ? cub2 : c1;
            for (int pass = 0; pass < 2; pass++) {
                c2.off = 0;
                nodes = sf_take<db_gnode>(&c2, (size_t)ntot[0] > 0 ? (size_t)ntot[0] : 1);
                o.onode = sf_take<int>(&c2, NO);
                o.mom = sf_take<unsigned long long>(&c2, NO * 12);
                o.opeak = sf_take<unsigned>(&c2, NO);
                o.onpix = sf_take<unsigned long long>(&c2, NO);
                o.g = sf_take<sf_db_gauss>(&c2, NO);
                o.ofirst = sf_take<int>(&c2, NO);
                o.orank = sf_take<int>(&c2, NO);
                o.firstpix = sf_take<unsigned>(&c2, NO);
                count = sf_take<int>(&c2, L + 1);
                base = sf_take<int>(&c2, L + 1);
                okey = sf_take<unsigned>(&c2, NO);
                okey2 = sf_take<unsigned>(&c2, NO);
                oval = sf_take<int>(&c2, NO);
                oval2 = sf_take<int>(&c2, NO);
                newl = sf_take<int>(&c2, NO);
                islof = sf_take<int>(&c2, NO);
                pard = sf_take<int>(&c2, NO + 1);
                void *ct2 = sf_take<char>(&c2, cub2);
                if (pass == 0) {
                    SF_TRY(sf_gpu_buffer(g, SF_GBUF_DEBLEND, c2.off, &blk));
                    c2.p = (char *)blk;
                    continue;
                }
                SF_CUDA(cudaMemsetAsync(count + L, 0, sizeof(int), g->stream));
                if (getenv("SKYFIND_DEBLEND_PROFILE")) {
                    SF_TRY(sf_gpu_malloc(g, (void **)&prof, 3 * DB_NPROF * sizeof *prof));
                    SF_CUDA(cudaMemsetAsync(prof, 0, 3 * DB_NPROF * sizeof *prof, g->stream));
                }
                {
                    // per class: the pixels' work arrays (5 ints a pixel) and
                    // trees of up to snodes nodes in shared memory, as much
                    // as the device allows beside the kernels' static share
                    const size_t optin = g->smem_optin > 12288 ? g->smem_optin - 12288 : 0;
                    // The trees' shared share is what the SMs' residency allows:
                    // class 0 (at most 80 registers a thread) 11 blocks an SM,
                    // class 1 (at most 128) two; a tree that outgrows it moves
                    // to its global share. (Before: 8 and one, the islands in
                    // more waves; at 8192^2 the stage 0.06-0.07 ms longer.)
                    const int sn0 = 64, sn1 = 256;
                    const size_t b0 = DB_PXB * DB_C0 + sn0 * sizeof(db_gnode),
                                 b1 = DB_PXB * DB_C1 + sn1 * sizeof(db_gnode);
                    int smax = DB_BIGSM, snodes = 1024;
                    while (smax > 0 && DB_PXB * smax + snodes * sizeof(db_gnode) > optin) {
                        smax /= 2;
                        snodes /= 2;
                    }
                    const size_t b2 = DB_PXB * smax + snodes * sizeof(db_gnode);
                    if (b1 > optin) {
                        st = sf_fail(SF_ERR_CUDA, "deblend (GPU): the device offers %zu bytes of "
                                     "shared memory a block, %zu needed", g->smem_optin, b1 + 12288);
                        goto fail;
                    }
                    SF_TRY(sf_gpu_smem_max(g, (const void *)db_split<256, DB_MINB1>, b1));
                    SF_TRY(sf_gpu_smem_max(g, (const void *)db_split<1024>, b2));
                    const int conn8 = p->connectivity == 8;
                    // SKYFIND_DEBLEND_GLOBAL (a developer knob): the small islands'
                    // pixels and trees in global memory, to time the shared path
                    const int c0sm = getenv("SKYFIND_DEBLEND_GLOBAL") ? 0 : DB_C0;
                    if (side) // the classes side by side, as db_prepare
                        SF_TRY(sf_gpu_fork(g, 2));
                    db_split<64, DB_MINB0><<<sm * 16, 64, b0, g->stream>>>(
                        lists, ncls, c0sm, c0sm ? sn0 : 0, conn8, keys, N, p->minarea, nx, in->t0, isl, dd, ss,
                        top, nb, deep, uf, rt, cnt, objl, nbase, obase, nodes, o, count, errp,
                        prof);
                    SF_LAUNCHED();
                    db_split<256, DB_MINB1><<<sm * 2, 256, b1, side ? g->aux[0] : g->stream>>>(
                        lists + L, ncls + 1, DB_C1, sn1, conn8, keys, N, p->minarea, nx, in->t0, isl, dd,
                        ss, top, nb, deep, uf, rt, cnt, objl, nbase, obase, nodes, o, count, errp,
                        prof ? prof + DB_NPROF : NULL);
                    SF_LAUNCHED();
                    db_split<1024><<<sm, 1024, b2, side ? g->aux[1] : g->stream>>>(
                        lists + 2 * (size_t)L, ncls + 2, smax, snodes, conn8, keys, N, p->minarea, nx,
                        in->t0, isl, dd, ss, top, nb, deep, uf, rt, cnt, objl, nbase, obase,
                        nodes, o, count, errp, prof ? prof + 2 * DB_NPROF : NULL);
                    SF_LAUNCHED();
                    if (side)
                        SF_TRY(sf_gpu_join(g, 2));
                }
                SF_TRY(sf_scan_excl(g->stream, count, base, L + 1, ct2, cub2));
                {
                    // the objects' count and the trees' errors come down
                    // while db_fill (which needs neither) runs
                    int *h = (int *)g->pinned;
                    unsigned e2;
                    db_totals2<<<1, 1, 0, g->stream>>>(base + L, errp, (int *)(hdr + 6));
                    SF_LAUNCHED();
                    SF_CUDA(cudaMemcpyAsync(h, hdr + 6, 2 * sizeof(int), cudaMemcpyDeviceToHost,
                                            g->stream));
                    db_fill<<<sf_blocks((size_t)L, DB_THREADS), DB_THREADS, 0, g->stream>>>(
                        L, obase, count, base, o.firstpix, okey2, oval2, islof, (long long)NO);
                    SF_LAUNCHED();
                    SF_CUDA(cudaStreamSynchronize(g->stream));
                    g->d2h += 2 * sizeof(int);
                    e2 = (unsigned)h[1];
                    if (e2) {
                        st = sf_fail(SF_ERR_INTERNAL, "deblend (GPU): a tree outgrew its bound "
                                     "(error bits %u)", e2);
                        goto fail;
                    }
                    nall = h[0];
                }
                c = cub2;
                SF_CUDA(cub::DeviceRadixSort::SortPairs(ct2, c, okey2, okey, oval2, oval, nall, 0,
                                                        32, g->stream));
                SF_CUDA(cudaMemsetAsync(pard, 0, sizeof(int), g->stream));
                db_number<<<sf_blocks((size_t)nall, DB_THREADS), DB_THREADS, 0, g->stream>>>(
                    nall, oval, islof, newl, pard);
                SF_LAUNCHED();
                db_relabel<<<grid, DB_THREADS, 0, g->stream>>>(keys, (long long)T, objl, base,
                                                               newl, nx, labels->data,
                                                               labels->stride);
                SF_LAUNCHED();
                free(parent);
                parent = (int *)malloc(((size_t)nall + 1) * sizeof *parent);
                if (!parent) {
                    st = sf_fail(SF_ERR_NOMEM, "deblend (GPU): %d objects", nall);
                    goto fail;
                }
                {
                    // both arrays down after one wait, through the pinned
                    // buffer when they fit in it
                    const size_t pb = ((size_t)nall + 1) * sizeof *parent,
                                 cb = (size_t)L * sizeof *nchild;
                    if (pb + cb <= g->pinned_bytes) {
                        char *h = (char *)g->pinned;
                        SF_CUDA(cudaMemcpyAsync(h, pard, pb, cudaMemcpyDeviceToHost, g->stream));
                        SF_CUDA(cudaMemcpyAsync(h + pb, count, cb, cudaMemcpyDeviceToHost,
                                                g->stream));
                        SF_CUDA(cudaStreamSynchronize(g->stream));
                        memcpy(parent, h, pb);
                        memcpy(nchild + 1, h + pb, cb);
                        g->d2h += pb + cb;
                    } else {
                        SF_TRY(sf_gpu_to_host(g, parent, pard, pb));
                        SF_TRY(sf_gpu_to_host(g, nchild + 1, count, cb));
                    }
                }
                if (prof) {
                    unsigned long long h[3 * DB_NPROF];
                    SF_TRY(sf_gpu_to_host(g, h, prof, sizeof h));
                    static const char *phase[DB_NPROF - 1] = {
                        "setup", "union", "roots", "nodes", "update",
                        "cut", "moments", "gauss", "gather", "number"};
                    for (int q = 0; q < 3; q++) {
                        const unsigned long long *c = h + q * DB_NPROF;
                        const double per = 1e3 * (c[DB_NPROF - 1] + 1e-9);
                        fprintf(stderr, "deblend profile class %d: %llu islands split; kcycles a "
                                "split island:", q, c[DB_NPROF - 1]);
                        for (int k = 0; k < DB_NPROF - 1; k++)
                            fprintf(stderr, " %s %.1f", phase[k], c[k] / per);
                        fputc('\n', stderr);
                    }
                    sf_gpu_free(g, prof);
                    prof = NULL;
                }
            }
        }
    }
    *nobj = nall;
    *parent_out = parent;
    *nchild_out = nchild;
    return SF_OK;
fail:
    if (g->fork_ev) { // nothing left running on the side streams past a failure
        cudaStreamSynchronize(g->aux[0]);
        cudaStreamSynchronize(g->aux[1]);
    }
    if (prof)
        sf_gpu_free(g, prof);
    free(parent);
    free(nchild);
    return st;
}
