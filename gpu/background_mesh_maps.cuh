// Stage `background`, method=mesh, GPU version: from the final mesh grid to
// the two full-resolution maps (the derivative grids of sf_bkg_node, then
// the interpolation) and the stage's st (medians of the grid by radix
// select). Private to gpu/background_mesh.cu, after background_mesh.cuh.
#ifndef SKYFIND_GPU_BACKGROUND_MESH_MAPS_CUH
#define SKYFIND_GPU_BACKGROUND_MESH_MAPS_CUH

#define SP_CH 32                 // mesh_spline: chains per block (run by warp 0)
#define SP_THREADS 128           // threads staging them
#define SP_SMEM_MAX (48 * 1024)  // chains staged in shared memory up to this
#define SP_MAXJ 4                // jobs per launch
#define IP_W 64                  // mesh_interp: pixels per block along x (16 threads x 4)
#define IP_THREADS 256
#define IP_KMAX (IP_W + 2)       // node columns a block can need (box 1)
#define IP_RMAX 128              // rows per block at most
#define IP_SMEM (24 * 1024)      // its nodes in shared memory, at most (box 1: 17 KB)
#define ST_THREADS 1024          // mesh_final block

// One batch of spline recurrences (sf_bkg_spline_d2): nch chains of n nodes,
// chain c's node i at in[c*cs + i*es], derivatives to out (same layout);
// zero: write zeros (no spline along this axis).
struct sp_job {
    const float *in;
    float *out;
    int cs, es, nch, n, zero;
};

struct sp_args {
    sp_job j[SP_MAXJ];
    int nj, first[SP_MAXJ + 1]; // job k has blocks [first[k], first[k+1])
    int staged;                 // 1: chains in shared memory, else the twin's code on u
    float *u;                   // !staged: n floats of scratch per chain
    const mesh_info *info;      // NULL: standalone interpolation
    // blocks from first[nj] on: the axis tables of mesh_interp (when ytab)
    float4 *ytab, *xtab;        // cubic terms of each image row and column
    int2 *yidx;                 // each row's lower node row * nbx, its mesh row
    int *xidx;                  // each column's node column k
    int nx, ny, nbx, nby, box;
};

// sf_bkg_cubic_k with its terms packed as k = (c, c*c - 1, t, t*t - 1).
static __device__ __forceinline__ float cubic_k(float lo, float hi, float dlo, float dhi, float4 k)
{
    return sf_bkg_cubic_k(lo, hi, dlo, dhi, k.x, k.y, k.z, k.w);
}

static __device__ __forceinline__ float4 cubic_terms(float t)
{
    float4 k;
    k.z = t;
    sf_bkg_cubic_terms(t, &k.x, &k.y, &k.w);
    return k;
}

#define SP_TN 32 // t_i table: t_i = t_31 for i >= 31 (constant from i = 7 in float; tested)

// Shared memory of a staged mesh_spline block for chains of n nodes: SP_CH
// chains at an odd stride (no bank conflicts).
static size_t spline_smem(int n) { return (size_t)SP_CH * (n | 1) * sizeof(float); }

// SP_CH chains of one job per block: staged into shared memory with
// coalesced loads, run one per lane with sf_bkg_spline_d2's float operations
// in its order (its t_i = -1/(t_(i-1) + 4) from a table that lane i fills,
// its division by 6 correctly rounded by div_rn), copied out.
static __global__ void __launch_bounds__(SP_THREADS) mesh_spline(sp_args A)
{
    extern __shared__ float S[];
    __shared__ float T[SP_TN];
    if (A.info && A.info->nvalid == 0) // grid-uniform
        return;
    if ((int)blockIdx.x >= A.first[A.nj]) { // block-uniform: the axis tables
        const int e = ((int)blockIdx.x - A.first[A.nj]) * SP_THREADS + threadIdx.x;
        int k = 0;
        float d = 0.0f;
        if (e < A.ny) {
            if (A.nby > 1)
                sf_bkg_axis_pos(e, A.box, A.nby, 0, &k, &d);
            A.ytab[e] = cubic_terms(d);
            A.yidx[e] = make_int2(k * A.nbx, e / A.box);
        } else if (e - A.ny < A.nx) {
            sf_bkg_axis_pos(e - A.ny, A.box, A.nbx, 1, &k, &d);
            A.xtab[e - A.ny] = cubic_terms(d);
            A.xidx[e - A.ny] = k;
        }
        return;
    }
    int jb = 0;
    while (jb + 1 < A.nj && (int)blockIdx.x >= A.first[jb + 1])
        jb++;
    const sp_job J = A.j[jb];
    const int lane = threadIdx.x, c0 = ((int)blockIdx.x - A.first[jb]) * SP_CH;
    const int nc = min(SP_CH, J.nch - c0), n = J.n, ps = n | 1;
    const float *in = J.in + (size_t)c0 * J.cs;
    float *out = J.out + (size_t)c0 * J.cs;
    const bool rows = J.es == 1; // chains along rows: contiguous nodes
    // element e of the block's chains, ordered for coalesced access
#define SP_ELEM(e, c, i) const int c = rows ? (e) / n : (e) % SP_CH, i = rows ? (e) % n : (e) / SP_CH
    if (J.zero || n < 3) { // no spline, or SExtractor's all-zero one
        for (int e = lane; e < SP_CH * n; e += SP_THREADS) {
            SP_ELEM(e, c, i);
            if (c < nc)
                out[(size_t)c * J.cs + (size_t)i * J.es] = 0.0f;
        }
        return;
    }
    if (!A.staged) {
        if (lane < nc)
            sf_bkg_spline_d2(in + (size_t)lane * J.cs, (size_t)J.es, n, out + (size_t)lane * J.cs,
                             A.u + ((size_t)blockIdx.x * SP_CH + lane) * n);
        return;
    }
#pragma unroll 8
    for (int e = lane; e < SP_CH * n; e += SP_THREADS) {
        SP_ELEM(e, c, i);
        if (c < nc)
            S[c * ps + i] = __ldg(in + (size_t)c * J.cs + (size_t)i * J.es);
    }
    if (lane < SP_TN)
    {
        float p = 0.0f;
        for (int i = 1; i <= lane; i++)
            p = -1.0f / (p + 4.0f);
        T[lane] = p;
    }
    __syncthreads();
    if (lane < nc) { // u[i] over the value v[i] once it is read
        float *row = S + lane * ps;
        float um = 0.0f, vm = row[0], v0 = row[1];
#pragma unroll 4
        for (int i = 1; i < n - 1; i++) {
            const float vp = row[i + 1];
            const float s2 = vp + vm - __fmul_rn(2.0f, v0);
            um = __fmul_rn(T[min(i, SP_TN - 1)], um - __fmul_rn(6.0f, s2));
            row[i] = um;
            vm = v0;
            v0 = vp;
        }
        float dn = 0.0f; // d[i + 1]
        row[n - 1] = 0.0f;
#pragma unroll 4
        for (int i = n - 2; i >= 1; i--) {
            dn = div_rn(__fmul_rn(T[min(i, SP_TN - 1)], dn) + row[i], 6.0f, 1.0f / 6.0f);
            row[i] = dn;
        }
        row[0] = 0.0f;
    }
    __syncthreads();
    for (int e = lane; e < SP_CH * n; e += SP_THREADS) {
        SP_ELEM(e, c, i);
        if (c < nc)
            out[(size_t)c * J.cs + (size_t)i * J.es] = S[c * ps + i];
    }
#undef SP_ELEM
}

struct mi_args { // mesh_interp
    const float *img;
    const float *gb[4], *gs[4]; // M, My, G, Gy of bkg and rms (sf_bkg_node)
    const float4 *ytab, *xtab;  // the axis tables (sp_args)
    const int2 *yidx;
    const int *xidx;
    float *ob, *os;
    size_t istride, bstride, sstride;
    int nx, ny, nbx, nby, box, vec, rb;
    const unsigned char *nonfinite;
    const mesh_info *info; // NULL: standalone interpolation
};

// subbackline: a block covers IP_W columns and rb rows (rows_per_block). It
// first puts the nodes of its rows and mesh columns in shared memory
// (sf_bkg_node: value and x-derivative of both maps, the rows' cubic terms
// from the axis tables) and finds whether any of its meshes holds a
// non-finite pixel; then each thread interpolates 4 pixels of every 16th row
// along x (its columns' terms in registers) and writes both maps (16-byte
// streaming stores when the rows allow). NaN where the image is NaN: with
// FLAGS the image is read only in blocks touching a mesh that holds a
// non-finite pixel. nd: rb x nkmax float4 (dynamic shared memory).
template <bool FLAGS>
static __global__ void __launch_bounds__(IP_THREADS, 4) mesh_interp(mi_args A)
{
    extern __shared__ float4 nd[]; // bkg value, bkg derivative, rms value, rms derivative
    const int nx = A.nx, nbx = A.nbx, nby = A.nby, box = A.box, rb = A.rb;
    if (A.info && A.info->nvalid == 0) // grid-uniform
        return;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4, xb = blockIdx.x * IP_W, x = xb + 4 * tx;
    const int xe = min(xb + IP_W, nx), k0 = A.xidx[xb], nk = min(A.xidx[xe - 1] + 1, nbx - 1) - k0 + 1;
    const int y0 = blockIdx.y * rb, nr = min(A.ny - y0, rb), nj = min(4, nx - x);
    bool look = !FLAGS;
    for (int e = threadIdx.x; e < nk * nr; e += IP_THREADS) {
        const int r = e / nk, kk = e - r * nk, y = y0 + r;
        const size_t lo = (size_t)A.yidx[y].x + k0 + kk, hi = lo + nbx;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (nby > 1) {
            const float4 k = A.ytab[y];
            const float *const *gb = A.gb, *const *gs = A.gs;
            v.x = cubic_k(__ldg(gb[0] + lo), __ldg(gb[0] + hi), __ldg(gb[1] + lo), __ldg(gb[1] + hi), k);
            v.y = cubic_k(__ldg(gb[2] + lo), __ldg(gb[2] + hi), __ldg(gb[3] + lo), __ldg(gb[3] + hi), k);
            v.z = cubic_k(__ldg(gs[0] + lo), __ldg(gs[0] + hi), __ldg(gs[1] + lo), __ldg(gs[1] + hi), k);
            v.w = cubic_k(__ldg(gs[2] + lo), __ldg(gs[2] + hi), __ldg(gs[3] + lo), __ldg(gs[3] + hi), k);
        } else { // one row of meshes: the nodes as they are, linear along x
            v.x = __ldg(A.gb[0] + lo);
            v.z = __ldg(A.gs[0] + lo);
        }
        nd[r * nk + kk] = v;
    }
    if (FLAGS) { // the block's meshes: any with a non-finite pixel?
        const int mr0 = y0 / box, mc0 = xb / box, nmc = (xe - 1) / box - mc0 + 1;
        const int nm = ((y0 + nr - 1) / box - mr0 + 1) * nmc;
        for (int e = threadIdx.x; e < nm; e += IP_THREADS)
            look |= A.nonfinite[(size_t)(mr0 + e / nmc) * nbx + mc0 + e % nmc] != 0;
        look = __syncthreads_or(look);
    } else {
        __syncthreads();
    }
    if (nj <= 0)
        return;
    int kj[4] = {0, 0, 0, 0};
    float4 kx[4];
    for (int j = 0; j < 4; j++) {
        kx[j] = make_float4(1.0f, 0.0f, 0.0f, 0.0f);
        if (j < nj) {
            kj[j] = A.xidx[x + j] - k0;
            kx[j] = A.xtab[x + j];
        }
    }
    const bool same = kj[3] == kj[0];
    for (int r = ty; r < nr; r += IP_THREADS / 16) {
        const int y = y0 + r;
        const float4 *row = nd + r * nk;
        float vb[4], vs[4];
        if (nbx < 2) {
            const float4 a = row[0];
            for (int j = 0; j < 4; j++)
                vb[j] = a.x, vs[j] = a.z;
        } else if (same) {
            const float4 a = row[kj[0]], b = row[kj[0] + 1];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                vb[j] = cubic_k(a.x, b.x, a.y, b.y, kx[j]);
                vs[j] = cubic_k(a.z, b.z, a.w, b.w, kx[j]);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 a = row[kj[j]], b = row[kj[j] + 1];
                vb[j] = cubic_k(a.x, b.x, a.y, b.y, kx[j]);
                vs[j] = cubic_k(a.z, b.z, a.w, b.w, kx[j]);
            }
        }
        if (look) {
            const float *in = A.img + (size_t)y * A.istride + x;
            for (int j = 0; j < nj; j++)
                if (isnan(in[j]))
                    vb[j] = vs[j] = __int_as_float(0x7fc00000);
        }
        float *pb = A.ob + (size_t)y * A.bstride + x, *ps = A.os + (size_t)y * A.sstride + x;
        if (A.vec && nj == 4) {
            __stcs(reinterpret_cast<float4 *>(pb), make_float4(vb[0], vb[1], vb[2], vb[3]));
            __stcs(reinterpret_cast<float4 *>(ps), make_float4(vs[0], vs[1], vs[2], vs[3]));
        } else {
            for (int j = 0; j < nj; j++) {
                pb[j] = vb[j];
                ps[j] = vs[j];
            }
        }
    }
}

// Rows per mesh_interp block and its shared memory for a box: the nodes of
// rb rows and the most mesh columns IP_W pixels can need, within IP_SMEM.
static int interp_rows(int box, size_t *smem)
{
    const int nkmax = min(IP_W / box + 3, IP_KMAX);
    int rb = (int)(IP_SMEM / ((size_t)nkmax * sizeof(float4))) / 16 * 16;
    rb = rb > IP_RMAX ? IP_RMAX : rb < 16 ? 16 : rb;
    *smem = (size_t)rb * nkmax * sizeof(float4);
    return rb;
}

// Radix-select keys: unsigned order = float order (NaN last).
static __device__ __forceinline__ unsigned fkey(float f)
{
    const unsigned u = __float_as_uint(f);
    return u ^ ((u >> 31) ? 0xffffffffu : 0x80000000u);
}

static __device__ __forceinline__ float fkey_val(unsigned k)
{
    return __uint_as_float(k ^ ((k >> 31) ? 0x80000000u : 0xffffffffu));
}

#define ST_REG 16 // keys per thread held in registers (grids up to 16384 meshes)

// The rank-th smallest (0-based) of v[0..n) by radix select, 8 bits a round
// (the hardware aggregates a warp's increments of one count). Whole block.
// REG: every key in registers (n <= ST_REG * ST_THREADS), else re-read each round.
template <bool REG>
static __device__ float select_rank(const float *__restrict__ v, int n, unsigned rank)
{
    __shared__ unsigned hist[257], sh[2];
    const int t = threadIdx.x, lane = t & 31;
    const int nn = (n + ST_THREADS - 1) / ST_THREADS * ST_THREADS;
    unsigned kr[ST_REG];
    if (REG)
#pragma unroll
        for (int j = 0; j < ST_REG; j++) {
            const int i = t + j * ST_THREADS;
            kr[j] = i < n ? fkey(v[i]) : 0u;
        }
    unsigned prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = t; i < 257; i += ST_THREADS)
            hist[i] = 0;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < (REG ? ST_REG : 1); j++)
            for (int i = t + j * ST_THREADS; i < nn; i += REG ? nn : ST_THREADS) {
                const unsigned k = REG ? kr[j] : (i < n ? fkey(v[i]) : 0u);
                if (i < n && (k & mask) == prefix) // aggregated per address by the hardware
                    atomicAdd(hist + ((k >> shift) & 255u), 1u);
            }
        __syncthreads();
        if (t < 32) { // the digit holding the rank: 8 bins a lane, warp scan
            unsigned c[8], s = 0;
            for (int j = 0; j < 8; j++)
                s += c[j] = hist[8 * lane + j];
            unsigned inc = s;
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned p = __shfl_up_sync(MS_FULL, inc, o);
                if (lane >= o)
                    inc += p;
            }
            unsigned below = inc - s;
            if (rank >= below && rank < inc)
                for (int j = 0; j < 8; j++) {
                    if (rank < below + c[j]) {
                        sh[0] = 8 * lane + j;
                        sh[1] = rank - below;
                        break;
                    }
                    below += c[j];
                }
        }
        __syncthreads();
        prefix |= sh[0] << shift;
        mask |= 255u << shift;
        rank = sh[1];
    }
    return fkey_val(prefix);
}

// The stage's st from the final grid (nb meshes), one block per value:
// block 2m + h (m: 0 levels mb, 1 rms ms) the element of rank nb/2 - 1 + h
// (nb/2 for odd nb) into res->mid[2m + h]; the host takes the twin's median
// from them (the middle value, or the two middle values' float sum halved).
// Block 0 also sums the mean in a fixed order (strided thread sums, warp
// trees, warps in order), not the twin's sequential order: it may differ
// from the twin's in the last bits; and copies the totals.
static __global__ void __launch_bounds__(ST_THREADS)
    mesh_final(const float *__restrict__ mb, const float *__restrict__ ms, int nb,
               const mesh_info *info, mesh_res *res)
{
    __shared__ double part[ST_THREADS / 32];
    const int t = threadIdx.x, b = blockIdx.x;
    const float *v = b >> 1 ? ms : mb;
    const unsigned rank = (nb & 1) ? nb / 2 : nb / 2 - 1 + (b & 1);
    const float r = nb <= ST_REG * ST_THREADS ? select_rank<true>(v, nb, rank)
                                              : select_rank<false>(v, nb, rank);
    if (t == 0)
        res->mid[b] = r;
    if (b)
        return;
    double a = 0.0;
    for (int i = t; i < nb; i += ST_THREADS)
        a += (double)mb[i];
    for (int o = 16; o; o >>= 1)
        a += __shfl_down_sync(MS_FULL, a, o);
    if ((t & 31) == 0)
        part[t >> 5] = a;
    __syncthreads();
    if (t == 0) {
        double sum = 0.0;
        for (int k = 0; k < ST_THREADS / 32; k++)
            sum += part[k];
        res->mean = sum / nb;
        res->nfinite = info->nfinite;
        res->nvalid = info->nvalid;
        res->niter = info->niter;
        res->notconv = info->notconv;
        res->pad = 0; // every byte the host copies back is written (compute-sanitizer initcheck)
    }
}

#endif
