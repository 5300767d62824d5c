// Stage `background`, method=mesh, GPU version: the per-mesh statistics of
// one thread block (moments in the twin's order, backguess on the histogram's
// prefix sums), private to gpu/background_mesh.cu; the twin's arithmetic
// comes from src/calc/background_mesh.h, included before this file.
#ifndef SKYFIND_GPU_BACKGROUND_MESH_CUH
#define SKYFIND_GPU_BACKGROUND_MESH_CUH

#define MS_THREADS SF_BKG_VT               // mesh_stats block (the moment order's 128 threads)
#define MS_BLOCKS 8                       // launch bounds: 64 registers, ~21 KB shared each
#define MS_NLEV SF_BKG_QUANTIF_NMAXLEVELS // 4096 histogram bins
#define MS_PER (MS_NLEV / MS_THREADS)     // bins per thread in the scan
#define MS_GRP 16                         // bins per coarse moment prefix (cm)
#define MS_NG (MS_NLEV / MS_GRP)
#define MS_FULL 0xffffffffu
#define MS_DUMP (MS_NLEV + 8)           // the count of pixels no bin takes (unused)
#define FIN_THREADS 1024                  // mesh_total block

static_assert(MS_PER == 2 * MS_GRP, "the scan writes two coarse prefixes per thread");
static_assert(MS_PER == 32, "ms_swz keys a thread's scan range by bits 5-7 of the bin");

// The word of bin i (and of prefix count C[i]) in ms_smem.cnt: a bank
// swizzle. Runs of 4 bins stay together (16-byte loads); within each run of
// MS_PER bins the 4-bin chunks are permuted by an xor with bits 5-7 of i
// (two instructions). The scan's threads, each on MS_PER bins of its own,
// then read 8 different bank groups per quarter warp instead of one (8-way
// conflicts). Identity from bin 4096 up (C[4096], MS_DUMP).
static __device__ __forceinline__ int ms_swz(int i)
{
    return i ^ ((i >> 3) & 0x1c);
}

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
    float mid[4];            // the middle two mesh levels, then rms (one each when odd)
    u64 nfinite;
    int nvalid, niter, notconv, pad;
};


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

struct ms_smem {
    __align__(16) unsigned cnt[MS_NLEV + 16]; // histogram, then prefix counts C[0..4096];
                                              // MS_DUMP: pixels outside the histogram
    u64 cm1[MS_NG + 1], cm2[MS_NG + 1];       // sum h*i, h*i*i below bin 16g
    unsigned cc[MS_NLEV / MS_PER + 1];        // C[32g]: walk_split's coarse prefixes
    double w1[MS_THREADS / 32], w2[MS_THREADS / 32]; // warp sums of one tile
    int wn[MS_THREADS / 32];
    unsigned wc[MS_THREADS / 32];
    u64 wm1[MS_THREADS / 32], wm2[MS_THREADS / 32];
    sf_bkg_moments tot; // the mesh's moments so far (thread 0)
    sf_bkg_quant q;
    float lcut, hcut;
    int ok;
};

// x when finite, else 0, counting the finite ones in n; take_cut: x when
// lc <= x <= hc. In PTX so that the float is selected before its conversion
// to double (NVVM converts first, then selects the double's two words) and
// the count is one predicated add.
static __device__ __forceinline__ float take_finite(float x, int &n)
{
    float y;
    asm("{\n\t.reg .pred p;\n\t.reg .f32 t;\n\tabs.f32 t, %2;\n\t"
        "setp.lt.f32 p, t, 0f7F800000;\n\tselp.f32 %0, %2, 0f00000000, p;\n\t"
        "@p add.s32 %1, %1, 1;\n\t}"
        : "=f"(y), "+r"(n)
        : "f"(x));
    return y;
}
static __device__ __forceinline__ float take_cut(float x, float lc, float hc, int &n)
{
    float y;
    asm("{\n\t.reg .pred p;\n\tsetp.ge.f32 p, %2, %3;\n\t"
        "setp.le.and.f32 p, %2, %4, p;\n\tselp.f32 %0, %2, 0f00000000, p;\n\t"
        "@p add.s32 %1, %1, 1;\n\t}"
        : "=f"(y), "+r"(n)
        : "f"(x), "f"(lc), "f"(hc));
    return y;
}

// The pixels of one tile of the moment order (sf_bkg_moments) held by this
// thread: K rows of one 4-pixel column group; NaN outside the w x h tile.
template <int TW> struct ms_tile {
    static constexpr int NG = TW / 4, RS = MS_THREADS / NG, K = TW / RS;
    float v[K][4];
    __device__ void load(const float *base, size_t stride, int w, int h, bool vec)
    {
        const int c = 4 * (threadIdx.x % NG), r0 = threadIdx.x / NG;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int r = r0 + k * RS;
            const float *src = base + (size_t)r * stride + c;
            if (vec && r < h && c + 4 <= w) {
                const float4 f = __ldg(reinterpret_cast<const float4 *>(src));
                v[k][0] = f.x, v[k][1] = f.y, v[k][2] = f.z, v[k][3] = f.w;
            } else {
#pragma unroll
                for (int j = 0; j < 4; j++)
                    v[k][j] = r < h && c + j < w ? __ldg(src + j) : __int_as_float(0x7fc00000);
            }
        }
    }
    // This thread's sums in the twin's order: cut = 0 finite pixels, 1 lc <= v <= hc.
    __device__ void moments(bool cut, float lc, float hc, double &a, double &b, int &n) const
    {
        a = 0.0, b = 0.0, n = 0;
#pragma unroll
        for (int k = 0; k < K; k++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const double d = (double)(cut ? take_cut(v[k][j], lc, hc, n) : take_finite(v[k][j], n));
                a = a + d;
                b = __fma_rn(d, d, b); // d*d is exact: the same as b + d*d
            }
    }
};

// Adds a tile's thread sums to sm.tot in the order of sf_bkg_tree128 (the
// xor tree gives every lane s[i] + s[i ^ o], the tree's value). Ends with
// thread 0 holding the new total; the caller syncs before using it.
static __device__ void tile_reduce(ms_smem &sm, double a, double b, int n)
{
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        a = a + __shfl_xor_sync(MS_FULL, a, o);
        b = b + __shfl_xor_sync(MS_FULL, b, o);
        n += __shfl_xor_sync(MS_FULL, n, o);
    }
    if (lane == 0) {
        sm.w1[wp] = a;
        sm.w2[wp] = b;
        sm.wn[wp] = n;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        sm.tot.s1 += (sm.w1[0] + sm.w1[1]) + (sm.w1[2] + sm.w1[3]);
        sm.tot.s2 += (sm.w2[0] + sm.w2[1]) + (sm.w2[2] + sm.w2[3]);
        sm.tot.n += (sm.wn[0] + sm.wn[1]) + (sm.wn[2] + sm.wn[3]);
    }
}

// A normal (not zero, subnormal, infinite or NaN) float.
static __device__ __forceinline__ bool normalf(float x)
{
    return fabsf(x) >= 1.17549435e-38f && fabsf(x) <= 3.40282347e+38f;
}

// v / qs correctly rounded, from rq = 1/qs correctly rounded (qs and rq
// normal): two quotient corrections with exact residuals (Markstein); the
// results where v/qs is out of float range are inf or NaN, which the
// histogram drops as it drops the true quotient.
static __device__ __forceinline__ float div_rn(float v, float qs, float rq)
{
    float q = __fmul_rn(v, rq);
    float r = __fmaf_rn(-qs, q, v);
    q = __fmaf_rn(r, rq, q);
    r = __fmaf_rn(-qs, q, v);
    return __fmaf_rn(r, rq, q);
}

// The walk's split over bins [L, H] (n = H-L+1 >= 1): how many bins the high
// side took. The twin takes the low bin while lowsum < highsum: a merge of
// P(a) = C[L+a]-C[L] and Q(b) = C[H+1]-C[H+1-b] with ties to Q, so b is the
// first m in [0, n) with P(n-1-m) < Q(m), or n; with j = H-m that is
// b = H - j*, j* the last j in [L, H] with S(j) = C[j] + C[j+1] < T =
// C[L] + C[H+1] (S is nondecreasing), or L-1. Two rounds, warp-uniform:
// g*, the last of the coarse prefixes cc[g] = C[32g] (g <= ng) with
// 2 cc[g] < T, puts j* in [32g*-1, 32g*+31] (S(j) <= 2 cc[g*] below 32g*,
// S(j) >= 2 cc[g*+1] from 32(g*+1) on); one probe per lane settles it.
static __device__ int walk_split(const ms_smem &sm, int L, int H, int ng, int lane)
{
    const unsigned *C = sm.cnt;
    const u64 T = (u64)C[ms_swz(L)] + C[ms_swz(H + 1)];
    int below = 0;
#pragma unroll
    for (int r = 0; r < (MS_NLEV / MS_PER) / 32 + 1; r++) {
        const int g = lane + 32 * r;
        below += g <= ng && 2 * (u64)sm.cc[g] < T;
    }
    below = __reduce_add_sync(MS_FULL, below);
    if (below == 0) // T == 0: no S(j) is below it
        return H - L + 1;
    const int g0 = 32 * (below - 1), j = g0 + lane;
    const bool p = j >= L && j <= H && (u64)C[ms_swz(j)] + C[ms_swz(j + 1)] < T;
    const unsigned pm = __ballot_sync(MS_FULL, p);
    const int js = pm ? g0 + 31 - __clz(pm) : max(min(g0 - 1, H), L - 1);
    return H - js;
}

// sum h*i and h*i*i over bins [0, k) for k = ka (lanes 0-15) and kb (16-31).
static __device__ void moment_prefix(const ms_smem &sm, int ka, int kb, int lane, u64 *m1a,
                                     u64 *m2a, u64 *m1b, u64 *m2b)
{
    const int k = lane < 16 ? ka : kb, g = k >> 4, i = (g << 4) + (lane & 15);
    u64 a = 0, b = 0;
    if (i < k) {
        u64 hv = sm.cnt[ms_swz(i + 1)] - sm.cnt[ms_swz(i)];
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
    const int lane = threadIdx.x & 31, nlm1 = q->nlevels - 1, ng = (q->nlevels + MS_PER - 1) / MS_PER;
    const unsigned *C = sm.cnt;
    int lcut = 0, hcut = nlm1, it = 0;
    double sig = SF_BKG_GUESS_START * nlm1, sig1 = 1.0,
           mea = ((double)q->mean - (double)q->qzero) / (double)q->qscale, med = mea;
    while (it < maxiter && sig >= SF_BKG_GUESS_MINSIG && fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS) {
        u64 lowsum = 0, highsum = 0, sum = 0, s1 = 0, s2 = 0;
        int lo = lcut, hi = hcut;
        it++;
        sig1 = sig;
        if (hcut >= lcut) {
            const int n = hcut - lcut + 1, b = walk_split(sm, lcut, hcut, ng, lane), a = n - b;
            u64 m1a, m2a, m1b, m2b;
            lo = lcut + a;
            hi = hcut - b;
            lowsum = C[ms_swz(lcut + a)] - C[ms_swz(lcut)];
            highsum = C[ms_swz(hcut + 1)] - C[ms_swz(hcut + 1 - b)];
            sum = C[ms_swz(hcut + 1)] - C[ms_swz(lcut)];
            moment_prefix(sm, lcut, hcut + 1, lane, &m1a, &m2a, &m1b, &m2b);
            s1 = m1b - m1a;
            s2 = m2b - m2a;
        }
        sf_bkg_guess_pass(sum, s1, s2, lowsum, highsum, hi,
                          lo <= nlm1 ? C[ms_swz(lo + 1)] - C[ms_swz(lo)] : 0u,
                          hi >= 0 ? C[ms_swz(hi + 1)] - C[ms_swz(hi)] : 0u, nlm1, kappa, &med,
                          &mea, &sig, &lcut, &hcut);
    }
    *converged = !(it >= maxiter && sig >= SF_BKG_GUESS_MINSIG &&
                   fabs(sig / sig1 - 1.0) > SF_BKG_GUESS_EPS);
    sf_bkg_guess_level(q, estimator, med, mea, sig, level, rms);
    return it;
}

// Sums over one group of MS_GRP bins e[0..15] (words w[0..3], registers) of h,
// h*j and h*j*j, j the bin's index in the group: exact in T (unsigned for
// meshes of fewer than 2^32/225 pixels, else u64).
template <class T>
static __device__ __forceinline__ void group_sums(const uint4 *w, unsigned &c, T &s1, T &s2)
{
    c = 0, s1 = 0, s2 = 0;
#pragma unroll
    for (int k = 0; k < MS_GRP / 4; k++) {
        const uint4 u = w[k];
        const unsigned e[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const unsigned jj = 4 * k + j;
            c += e[j];
            s1 += (T)e[j] * jj;
            s2 += (T)e[j] * (jj * jj);
        }
    }
}

// Exclusive prefix counts C[0..MS_PER ng] in place (ng groups of MS_PER bins
// cover the nlevels bins), coarse prefix moments cm[0..2 ng]. Whole block;
// big: the mesh has 2^32/225 pixels or more (u64 group sums).
static __device__ void mesh_scan(ms_smem &sm, bool big)
{
    const int t = threadIdx.x, lane = t & 31, wp = t >> 5, b0 = t * MS_PER;
    const int ng = (sm.q.nlevels + MS_PER - 1) / MS_PER, sw = t & 7; // ms_swz's key
    uint4 *cv = reinterpret_cast<uint4 *>(sm.cnt + b0);
    uint4 u[MS_PER / 4]; // this thread's bins in order (chunk k at word 4 (k ^ sw))
    unsigned c = 0;
    u64 m1 = 0, m2 = 0, h1 = 0, h2 = 0; // h: the first MS_GRP bins
    if (t < ng) {
#pragma unroll
        for (int k = 0; k < MS_PER / 4; k++)
            u[k] = cv[k ^ sw];
#pragma unroll
        for (int half = 0; half < 2; half++) {
            unsigned gc;
            u64 s1, s2;
            if (big) {
                group_sums<u64>(u + half * (MS_GRP / 4), gc, s1, s2);
            } else {
                unsigned a1, a2;
                group_sums<unsigned>(u + half * (MS_GRP / 4), gc, a1, a2);
                s1 = a1, s2 = a2;
            }
            const u64 G = (u64)(b0 + half * MS_GRP); // bin i = G + j
            s2 += G * (G * gc + 2 * s1);             // sum h (G+j)^2
            s1 += G * gc;
            if (half == 0)
                h1 = s1, h2 = s2;
            c += gc;
            m1 += s1;
            m2 += s2;
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
        sm.cc[t] = bc;
        sm.cm1[2 * t] = bm1;
        sm.cm2[2 * t] = bm2;
        sm.cm1[2 * t + 1] = bm1 + h1;
        sm.cm2[2 * t + 1] = bm2 + h2;
#pragma unroll
        for (int k = 0; k < MS_PER / 4; k++) { // this thread's own bins only
            uint4 v = u[k];
            unsigned e;
            e = v.x, v.x = bc, bc += e;
            e = v.y, v.y = bc, bc += e;
            e = v.z, v.z = bc, bc += e;
            e = v.w, v.w = bc, bc += e;
            cv[k ^ sw] = v;
        }
    }
    if (t == ng - 1) { // C[MS_PER ng]: the next group's first bin, unused by it
        sm.cnt[ms_swz(b0 + MS_PER)] = bc;
        sm.cc[t + 1] = bc;
        sm.cm1[2 * t + 2] = bm1 + m1;
        sm.cm2[2 * t + 2] = bm2 + m2;
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
