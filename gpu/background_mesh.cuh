// Stage `background`, method=mesh, GPU version: the per-mesh statistics of
// one thread block (moments in the twin's order, backguess on the histogram's
// prefix sums), private to gpu/background_mesh.cu; the twin's arithmetic
// comes from cpu/background_mesh.h, included before this file.
#ifndef SKYFIND_GPU_BACKGROUND_MESH_CUH
#define SKYFIND_GPU_BACKGROUND_MESH_CUH

#define MS_THREADS 256                    // mesh_stats block
#define MS_TILE 64                        // largest box kept in shared memory
#define MS_TSTRIDE 68                     // tile row stride: 16-byte rows, lane sums conflict-free
#define MS_NLEV SF_BKG_QUANTIF_NMAXLEVELS // 4096 histogram bins
#define MS_PER (MS_NLEV / MS_THREADS)     // bins per thread in the scan
#define MS_FULL 0xffffffffu
#define RN_THREADS 64                     // mesh_rownodes block
#define RN_SMEM_MAX (48 * 1024)           // spline scratch in shared memory up to this

static_assert(MS_PER == 16, "the scan reads 16 bins per thread as 4 uint4");

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
    mesh_info *info;
};

struct ms_smem {
    __align__(16) unsigned cnt[MS_NLEV + 4]; // histogram, then prefix counts C[0..4096]
    __align__(16) float tile[MS_TILE * MS_TSTRIDE];
    u64 cm1[MS_THREADS + 1], cm2[MS_THREADS + 1]; // sum h*i, h*i*i below bin 16g
    double rs1[64], rs2[64];                     // row sums of one chunk of 64 rows
    long long rn[64];
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
static __device__ sf_bkg_moments mesh_moments(ms_smem &sm, const float *base, size_t stride,
                                              int w, int h, int cut, float lcut, float hcut)
{
    const int t = threadIdx.x, l = t & 3, rr = t >> 2;
    sf_bkg_moments tot = {0, 0, 0};
    for (int rb = 0; rb < h; rb += 64) { // block-uniform
        const int r = rb + rr;
        double a = 0.0, b = 0.0;
        long long n = 0;
        if (r < h) {
            const float *row = TILE ? sm.tile + r * MS_TSTRIDE : base + (size_t)r * stride;
            for (int x = l; x < w; x += SF_BKG_LANES) {
                float v = row[x];
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
            const int nr = h - rb < 64 ? h - rb : 64;
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
static __device__ int walk_split(const unsigned *C, int L, int H, int lane)
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
static __device__ void moment_prefix(const ms_smem &sm, int ka, int kb, int lane, u64 *m1a,
                                     u64 *m2a, u64 *m1b, u64 *m2b)
{
    const int k = lane < 16 ? ka : kb, g = k >> 4, i = (g << 4) + (lane & 15);
    u64 a = 0, b = 0;
    if (i < k) {
        u64 hv = sm.cnt[i + 1] - sm.cnt[i];
        a = hv * (u64)i;
        b = a * (u64)i;
    }
    for (int o = 8; o; o >>= 1) {
        a += __shfl_xor_sync(MS_FULL, a, o);
        b += __shfl_xor_sync(MS_FULL, b, o);
    }
    a += sm.cm1[g];
    b += sm.cm2[g];
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
static __device__ int mesh_guess(const ms_smem &sm, const sf_bkg_quant *q, double kappa,
                                 int maxiter, int estimator, float *level, float *rms,
                                 int *converged)
{
    const int lane = threadIdx.x & 31, nlm1 = q->nlevels - 1;
    const unsigned *C = sm.cnt;
    int lcut = 0, hcut = nlm1, it = 0;
    double sig = SF_BKG_GUESS_START * nlm1, sig1 = 1.0,
           mea = ((double)q->mean - (double)q->qzero) / (double)q->qscale, med = mea, lev;
    while (it < maxiter && sig >= SF_BKG_GUESS_MINSIG && fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS) {
        u64 lowsum = 0, highsum = 0, sum = 0, s1 = 0, s2 = 0;
        int lo = lcut, hi = hcut;
        double ftemp;
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
        mea = (double)s1;
        sig = (double)s2;
        if (hi >= 0) {
            unsigned a = lo <= nlm1 ? C[lo + 1] - C[lo] : 0u, b = C[hi + 1] - C[hi];
            unsigned mx = a > b ? a : b;
            med = (double)hi + 0.5 + (mx ? ((double)highsum - (double)lowsum) / (2.0 * mx) : 0.0);
        } else {
            med = 0.0;
        }
        if (sum) {
            mea /= (double)sum;
            sig = sig / (double)sum - SF_BKG_DMUL(mea, mea);
        }
        sig = sig > 0.0 ? sqrt(sig) : 0.0;
        ftemp = med - SF_BKG_DMUL(kappa, sig);
        lcut = ftemp > 0.0 ? (int)(ftemp + 0.5) : 0;
        ftemp = med + SF_BKG_DMUL(kappa, sig);
        hcut = ftemp < nlm1 ? (int)(ftemp > 0.0 ? ftemp + 0.5 : ftemp - 0.5) : nlm1;
    }
    *converged = !(it >= maxiter && sig >= SF_BKG_GUESS_MINSIG &&
                   fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS);
    if (!(fabs(sig) > 0.0))
        lev = mea;
    else if (estimator == SF_BKG_EST_MEDIAN)
        lev = med;
    else if (estimator == SF_BKG_EST_MEAN)
        lev = mea;
    else
        lev = fabs((mea - med) / sig) < SF_BKG_MODE_SKEW
                  ? SF_BKG_DMUL(SF_BKG_MODE_KMED, med) - SF_BKG_DMUL(SF_BKG_MODE_KMEAN, mea)
                  : med;
    *level = (float)((double)q->qzero + SF_BKG_DMUL(lev, (double)q->qscale));
    *rms = (float)SF_BKG_DMUL(sig, (double)q->qscale);
    return it;
}

#endif
