// Stage `background`, method=mesh, GPU version: the per-mesh statistics of
// one thread block (moments in the twin's order, backguess on the histogram's
// prefix sums), private to gpu/background_mesh.cu; the twin's arithmetic
// comes from cpu/background_mesh.h, included before this file.
#ifndef SKYFIND_GPU_BACKGROUND_MESH_CUH
#define SKYFIND_GPU_BACKGROUND_MESH_CUH

#define MS_THREADS 128                    // mesh_stats block: 8 resident per SM
#define MS_BLOCKS 8                       // launch bounds: 64 registers, <= 27 KB shared each
#define MS_ROWS (MS_THREADS / 4)          // mesh rows per moment chunk
#define MS_TILE 64                        // largest box kept in shared memory
#define MS_NLEV SF_BKG_QUANTIF_NMAXLEVELS // 4096 histogram bins
#define MS_PER (MS_NLEV / MS_THREADS)     // bins per thread in the scan
#define MS_GRP 16                         // bins per coarse moment prefix (cm)
#define MS_NG (MS_NLEV / MS_GRP)
#define MS_FULL 0xffffffffu
#define RN_THREADS 64                     // mesh_prep (columns) and mesh_rownodes blocks
#define RN_SMEM_MAX (48 * 1024)           // spline scratch in shared memory up to this
#define FIN_THREADS 1024                  // mesh_total block

static_assert(MS_PER == 2 * MS_GRP, "the scan writes two coarse prefixes per thread");

typedef unsigned long long u64;

struct mesh_info {           // whole-grid results of mesh_stats (zeroed first)
    u64 nfinite;             // finite pixels of the image
    int nvalid;              // meshes with a level
    int niter;               // most clipping passes of a valid mesh
    int notconv;             // 1 when a valid mesh hit maxiter
    int pad;
};

struct mesh_res {            // the stage's st, computed by mesh_final
    double mean;             // mean of the mesh levels
    float median, sigma;     // medians of the mesh levels and rms
    u64 nfinite;
    int nvalid, niter, notconv, pad;
};

#define ST_THREADS 1024 // mesh_final block

struct ms_args { // mesh_stats
    const float *img;
    size_t stride;
    int nx, ny, box, nbx, vec, maxiter, estimator;
    double min_valid, kappa;
    float *lev, *rms;
    unsigned char *nonfinite; // 1: the mesh holds a non-finite pixel
    u64 *fin;                 // per mesh: finite pixels
    int *itc;                 // per mesh: -1 bad, else 2 * passes + not converged
};

// Histogram counts: 16-bit for a tiled mesh (<= 64*64 pixels: every count and
// prefix count fits), 32-bit otherwise.
template <bool TILE> struct ms_cnt { typedef unsigned type; };
template <> struct ms_cnt<true> { typedef unsigned short type; };

// Tile element (r, x): rows of 64 floats, 16-byte groups swizzled by the row
// (x ^ 4 (r & 7)): float4 rows and the lane sums stay free of bank conflicts.
static __device__ __forceinline__ int tix(int r, int x) { return r * MS_TILE + (x ^ ((r & 7) << 2)); }

template <bool TILE> struct ms_smem {
    typedef typename ms_cnt<TILE>::type cnt_t;
    __align__(16) cnt_t cnt[MS_NLEV + 16]; // histogram, then prefix counts C[0..4096]
    union {                                // the tile is dead once the histogram is done
        __align__(16) float tile[TILE ? MS_TILE * MS_TILE : 4];
        struct {
            u64 cm1[MS_NG + 1], cm2[MS_NG + 1]; // sum h*i, h*i*i below bin 16g
        } c;
    } u;
    double rs1[MS_ROWS], rs2[MS_ROWS]; // row sums of one chunk of rows
    long long rn[MS_ROWS];
    unsigned wc[MS_THREADS / 32];
    u64 wm1[MS_THREADS / 32], wm2[MS_THREADS / 32];
    sf_bkg_quant q;
    float lcut, hcut;
    int ok;
};

// Moments of the mesh as the twin sums them: thread (row, lane) adds pixels
// lane, lane+4, ... of its row; the row sum is ((l0 + l1) + (l2 + l3)); the
// rows are added in order (lane 0: s1, lane 1: s2; thread 0 returns the result).
template <bool TILE>
static __device__ sf_bkg_moments mesh_moments(ms_smem<TILE> &sm, const float *base, size_t stride,
                                              int w, int h, int cut, float lcut, float hcut)
{
    const int t = threadIdx.x, l = t & 3, rr = t >> 2;
    sf_bkg_moments tot = {0, 0, 0};
    for (int rb = 0; rb < h; rb += MS_ROWS) { // block-uniform
        const int r = rb + rr;
        double a = 0.0, b = 0.0;
        long long n = 0;
        if (r < h) {
            const float *row = base + (size_t)r * stride;
            for (int x = l; x < w; x += SF_BKG_LANES) {
                float v = TILE ? sm.u.tile[tix(r, x)] : __ldg(row + x);
                int ok = cut ? (v >= lcut && v <= hcut) : isfinite(v);
                double d = ok ? (double)v : 0.0;
                a += d;
                b += SF_BKG_DMUL(d, d);
                n += ok;
            }
        }
        a += __shfl_down_sync(MS_FULL, a, 1); // lane 0: l0 + l1, lane 2: l2 + l3
        b += __shfl_down_sync(MS_FULL, b, 1);
        n += __shfl_down_sync(MS_FULL, n, 1);
        a += __shfl_down_sync(MS_FULL, a, 2); // lane 0: (l0 + l1) + (l2 + l3)
        b += __shfl_down_sync(MS_FULL, b, 2);
        n += __shfl_down_sync(MS_FULL, n, 2);
        if (l == 0 && r < h) {
            sm.rs1[rr] = a;
            sm.rs2[rr] = b;
            sm.rn[rr] = n;
        }
        __syncthreads();
        if (t < 32) { // the twin's sequential sums: s1 on lane 0, s2 on lane 1 (two
                      // independent chains), the exact integer count on lane 2
            const int nr = h - rb < MS_ROWS ? h - rb : MS_ROWS;
            double acc = t == 0 ? tot.s1 : tot.s2;
            long long cnt = tot.n;
            if (t < 2) {
                const double *src = t == 0 ? sm.rs1 : sm.rs2;
#pragma unroll 8
                for (int i = 0; i < nr; i++)
                    acc += src[i];
            } else if (t == 2) {
                for (int i = 0; i < nr; i++)
                    cnt += sm.rn[i];
            }
            tot.s1 = __shfl_sync(MS_FULL, acc, 0);
            tot.s2 = __shfl_sync(MS_FULL, acc, 1);
            tot.n = __shfl_sync(MS_FULL, cnt, 2);
        }
        __syncthreads();
    }
    return tot;
}

// The walk's split over bins [L, H] (n = H-L+1 >= 1): how many bins the high
// side took. The twin takes the low bin while lowsum < highsum: a merge of
// P(a) = C[L+a]-C[L] and Q(b) = C[H+1]-C[H+1-b] with ties to Q, so b is the
// first m in [0, n) with P(n-1-m) < Q(m), or n. Warp-uniform, 32-ary search.
template <class T>
static __device__ int walk_split(const T *C, int L, int H, int lane)
{
    const int n = H - L + 1;
    const unsigned cL = C[L], cH = C[H + 1];
    int lo = 0, hi = n;
    while (lo < hi) {
        const int step = (hi - lo + 31) / 32, m = lo + lane * step;
        const bool tested = m < hi;
        const bool pred = tested && C[L + n - 1 - m] - cL < cH - C[H + 1 - m];
        const unsigned tm = __ballot_sync(MS_FULL, tested), pm = __ballot_sync(MS_FULL, pred);
        const int f = __popc(tm & ~pm); // the false ones lead (the predicate is monotone)
        if (f == 0) {
            hi = lo;
        } else {
            const int nlo = lo + (f - 1) * step + 1;
            if (f < __popc(tm))
                hi = lo + f * step;
            lo = nlo;
        }
    }
    return lo;
}

// sum h*i and h*i*i over bins [0, k) for k = ka (lanes 0-15) and kb (16-31).
template <bool TILE>
static __device__ void moment_prefix(const ms_smem<TILE> &sm, int ka, int kb, int lane, u64 *m1a,
                                     u64 *m2a, u64 *m1b, u64 *m2b)
{
    const int k = lane < 16 ? ka : kb, g = k >> 4, i = (g << 4) + (lane & 15);
    u64 a = 0, b = 0;
    if (i < k) {
        u64 hv = (unsigned)sm.cnt[i + 1] - (unsigned)sm.cnt[i];
        a = hv * (u64)i;
        b = a * (u64)i;
    }
    for (int o = 8; o; o >>= 1) {
        a += __shfl_xor_sync(MS_FULL, a, o);
        b += __shfl_xor_sync(MS_FULL, b, o);
    }
    a += sm.u.c.cm1[g];
    b += sm.u.c.cm2[g];
    *m1a = __shfl_sync(MS_FULL, a, 0);
    *m2a = __shfl_sync(MS_FULL, b, 0);
    *m1b = __shfl_sync(MS_FULL, a, 16);
    *m2b = __shfl_sync(MS_FULL, b, 16);
}

// sf_bkg_backguess on the prefix sums, by one whole warp (every lane computes
// the same scalars). Only the inner loop over bins is replaced: the twin's
// lowsum/highsum/lo/hi come from walk_split, and its double sums of h*i and
// h*i*i are exact integers, equal to the prefix differences. The rest is the
// twin's code, operation for operation: keep the two in step.
template <bool TILE>
static __device__ int mesh_guess(const ms_smem<TILE> &sm, const sf_bkg_quant *q, double kappa,
                                 int maxiter, int estimator, float *level, float *rms,
                                 int *converged)
{
    const int lane = threadIdx.x & 31, nlm1 = q->nlevels - 1;
    const typename ms_smem<TILE>::cnt_t *C = sm.cnt;
    int lcut = 0, hcut = nlm1, it = 0;
    double sig = SF_BKG_GUESS_START * nlm1, sig1 = 1.0,
           mea = ((double)q->mean - (double)q->qzero) / (double)q->qscale, med = mea;
    while (it < maxiter && sig >= SF_BKG_GUESS_MINSIG && fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS) {
        u64 lowsum = 0, highsum = 0, sum = 0, s1 = 0, s2 = 0;
        int lo = lcut, hi = hcut;
        it++;
        sig1 = sig;
        if (hcut >= lcut) {
            const int n = hcut - lcut + 1, b = walk_split(C, lcut, hcut, lane), a = n - b;
            u64 m1a, m2a, m1b, m2b;
            lo = lcut + a;
            hi = hcut - b;
            lowsum = C[lcut + a] - C[lcut];
            highsum = C[hcut + 1] - C[hcut + 1 - b];
            sum = C[hcut + 1] - C[lcut];
            moment_prefix(sm, lcut, hcut + 1, lane, &m1a, &m2a, &m1b, &m2b);
            s1 = m1b - m1a;
            s2 = m2b - m2a;
        }
        sf_bkg_guess_pass(sum, s1, s2, lowsum, highsum, hi, lo <= nlm1 ? C[lo + 1] - C[lo] : 0u,
                          hi >= 0 ? C[hi + 1] - C[hi] : 0u, nlm1, kappa, &med, &mea, &sig, &lcut,
                          &hcut);
    }
    *converged = !(it >= maxiter && sig >= SF_BKG_GUESS_MINSIG &&
                   fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS);
    sf_bkg_guess_level(q, estimator, med, mea, sig, level, rms);
    return it;
}

// The data-independent first-pass terms of sf_bkg_spline_d2 over n nodes:
// T[i] = d[i] after its forward loop, t_i = -1/(t_(i-1) + 4), t_0 = 0.
static __device__ void spline_terms(float *T, int n)
{
    float p = 0.0f;
    T[0] = 0.0f;
    for (int i = 1; i < n - 1; i++) {
        p = -1.0f / (p + 4.0f);
        T[i] = p;
    }
}

// sf_bkg_spline_d2 (n >= 2) with the same float operations in the same order:
// its t_i from T (spline_terms, shared by the block), u in shared memory
// (U[i * us]), the node values v(i) from vf (each called once, in order):
// no chain waits on a global load of a value it just stored.
template <class VF>
static __device__ void spline_d2_fast(VF vf, int n, float *d, size_t step, const float *T,
                                      float *U, int us)
{
    float um = 0.0f, vm = vf(0), v0 = vf(1);
    d[0] = 0.0f;
#pragma unroll 4
    for (int i = 1; i < n - 1; i++) {
        const float vp = vf(i + 1);
        const float s2 = vp + vm - SF_BKG_FMUL(2.0f, v0);
        um = SF_BKG_FMUL(T[i], um - SF_BKG_FMUL(6.0f, s2));
        U[i * us] = um;
        vm = v0;
        v0 = vp;
    }
    d[(size_t)(n - 1) * step] = 0.0f;
    float dn = 0.0f; // d[i + 1]
#pragma unroll 4
    for (int i = n - 2; i >= 1; i--) {
        dn = (SF_BKG_FMUL(T[i], dn) + U[i * us]) / 6.0f;
        d[(size_t)i * step] = dn;
    }
}

// Shared memory of the fast spline for n nodes: T, then U of every thread.
static size_t spline_smem(int n) { return (size_t)(RN_THREADS + 1) * (size_t)n * sizeof(float); }

// Exclusive prefix counts C[0..MS_PER ng] in place (ng groups of MS_PER bins
// cover the nlevels bins), coarse prefix moments cm[0..2 ng]. Two reads of
// the thread's own bins (sums, then prefixes): few registers. Whole block.
template <bool TILE>
static __device__ void mesh_scan(ms_smem<TILE> &sm)
{
    typedef typename ms_smem<TILE>::cnt_t cnt_t;
    const int t = threadIdx.x;
    {
        constexpr int VEC = 16 / sizeof(cnt_t), NV = MS_PER / VEC; // bins per uint4, uint4s
        const int lane = t & 31, wp = t >> 5, b0 = t * MS_PER, ng = (sm.q.nlevels + MS_PER - 1) / MS_PER;
        uint4 *cv = reinterpret_cast<uint4 *>(sm.cnt + b0);
        unsigned c = 0;
        u64 m1 = 0, m2 = 0, h1 = 0, h2 = 0; // h: the first MS_GRP bins
        if (t < ng) {
            for (int k = 0; k < NV; k++) {
                union { uint4 v; cnt_t e[VEC]; } u;
                u.v = cv[k];
                for (int j = 0; j < VEC; j++) {
                    const u64 i = (u64)(b0 + k * VEC + j), a = (u64)u.e[j] * i;
                    c += u.e[j];
                    m1 += a;
                    m2 += a * i;
                }
                if ((k + 1) * VEC == MS_GRP)
                    h1 = m1, h2 = m2;
            }
        }
        unsigned ic = c;
        u64 i1 = m1, i2 = m2;
        for (int o = 1; o < 32; o <<= 1) {
            unsigned pc = __shfl_up_sync(MS_FULL, ic, o);
            u64 p1 = __shfl_up_sync(MS_FULL, i1, o), p2 = __shfl_up_sync(MS_FULL, i2, o);
            if (lane >= o) {
                ic += pc;
                i1 += p1;
                i2 += p2;
            }
        }
        if (lane == 31) {
            sm.wc[wp] = ic;
            sm.wm1[wp] = i1;
            sm.wm2[wp] = i2;
        }
        __syncthreads();
        unsigned bc = ic - c;
        u64 bm1 = i1 - m1, bm2 = i2 - m2;
        for (int k = 0; k < wp; k++) {
            bc += sm.wc[k];
            bm1 += sm.wm1[k];
            bm2 += sm.wm2[k];
        }
        if (t < ng) {
            sm.u.c.cm1[2 * t] = bm1;
            sm.u.c.cm2[2 * t] = bm2;
            sm.u.c.cm1[2 * t + 1] = bm1 + h1;
            sm.u.c.cm2[2 * t + 1] = bm2 + h2;
            for (int k = 0; k < NV; k++) { // this thread's own bins only
                union { uint4 v; cnt_t e[VEC]; } u;
                u.v = cv[k];
                for (int j = 0; j < VEC; j++) {
                    const unsigned hv = u.e[j];
                    u.e[j] = (cnt_t)bc;
                    bc += hv;
                }
                cv[k] = u.v;
            }
        }
        if (t == ng - 1) { // C[MS_PER ng]: the next group's first bin, unused by it
            sm.cnt[b0 + MS_PER] = (cnt_t)bc;
            sm.u.c.cm1[2 * t + 2] = bm1 + m1;
            sm.u.c.cm2[2 * t + 2] = bm2 + m2;
        }
    }
    __syncthreads();
}

// The grid totals of mesh_stats into *info: one block, integer sums, max, or.
static __global__ void __launch_bounds__(FIN_THREADS)
    mesh_total(const u64 *__restrict__ fin, const int *__restrict__ itc, int nb, mesh_info *info)
{
    __shared__ u64 sf[FIN_THREADS / 32];
    __shared__ int sv[FIN_THREADS / 32], si[FIN_THREADS / 32];
    const int t = threadIdx.x, lane = t & 31, wp = t >> 5;
    u64 f = 0;
    int nv = 0, mi = 0; // mi: max of 2 * passes + not converged, bit 0 or-ed apart
    int nc = 0;
    for (int i = t; i < nb; i += FIN_THREADS) {
        const int v = itc[i];
        f += fin[i];
        if (v >= 0) {
            nv++;
            mi = max(mi, v >> 1);
            nc |= v & 1;
        }
    }
    for (int o = 16; o; o >>= 1) {
        f += __shfl_xor_sync(MS_FULL, f, o);
        nv += __shfl_xor_sync(MS_FULL, nv, o);
        mi = max(mi, __shfl_xor_sync(MS_FULL, mi, o));
        nc |= __shfl_xor_sync(MS_FULL, nc, o);
    }
    if (lane == 0) {
        sf[wp] = f;
        sv[wp] = nv;
        si[wp] = 2 * mi + nc;
    }
    __syncthreads();
    if (t == 0) {
        mesh_info r;
        r.nfinite = 0;
        r.nvalid = r.niter = r.notconv = r.pad = 0;
        for (int k = 0; k < FIN_THREADS / 32; k++) {
            r.nfinite += sf[k];
            r.nvalid += sv[k];
            r.niter = max(r.niter, si[k] >> 1);
            r.notconv |= si[k] & 1;
        }
        *info = r;
    }
}

#endif
