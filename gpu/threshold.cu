// Stage `threshold`, GPU version: mask = v > nsigma*sigma (subtract=0) or
// v - level > nsigma*sigma (subtract=1), float32 arithmetic rounded exactly
// as the CPU twin (no fused multiply-add), non-finite pixels never set.
#include "common.cuh"
#include "skyfind/threshold.h"

extern "C" sf_status sf_thresh_check(const sf_image *img, const sf_thresh_params *p,
                                     const sf_bkg_stats *st, const sf_image *bkg,
                                     const sf_image *rms, const sf_mask *mask);

// kernels

static __global__ void thresh_kernel(const float *__restrict__ img, uint8_t *__restrict__ mask,
                                     size_t n, float level, float thr, int subtract)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t n4 = n / 4;
    const float4 *img4 = reinterpret_cast<const float4 *>(img);
    uchar4 *mask4 = reinterpret_cast<uchar4 *>(mask);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 q = img4[i];
        float v[4] = {q.x, q.y, q.z, q.w};
        unsigned char m[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float d = subtract ? __fsub_rn(v[k], level) : v[k];
            m[k] = isfinite(v[k]) && d > thr;
        }
        mask4[i] = make_uchar4(m[0], m[1], m[2], m[3]);
    }
    for (size_t i = n4 * 4 + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = img[i];
        float d = subtract ? __fsub_rn(v, level) : v;
        mask[i] = isfinite(v) && d > thr;
    }
}

// With background maps: the level and noise of each pixel.
static __global__ void thresh_map_kernel(const float *__restrict__ img, const float *__restrict__ bkg,
                                         const float *__restrict__ rms, uint8_t *__restrict__ mask,
                                         size_t n, float nsig, int subtract)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = img[i];
        float t = __fmul_rn(nsig, rms[i]);
        float d = subtract ? __fsub_rn(v, bkg[i]) : v;
        mask[i] = isfinite(v) && d > t;
    }
}

// launchers

extern "C" sf_status sf_threshold_gpu(sf_gpu *g, const sf_image *img, const sf_thresh_params *p,
                                      const sf_bkg_stats *bs, const sf_image *bkg,
                                      const sf_image *rms, sf_mask *mask)
{
    sf_status st = sf_thresh_check(img, p, bs, bkg, rms, mask);
    size_t n = sf_npix(img->nx, img->ny);
    if (st)
        return st;
    if (img->loc != SF_DEVICE || mask->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "sf_threshold_gpu needs device buffers");
    if (bkg) {
        unsigned blocks = sf_blocks(n, 256);
        if (blocks > (unsigned)g->sm_count * 16)
            blocks = (unsigned)g->sm_count * 16;
        thresh_map_kernel<<<blocks, 256, 0, g->stream>>>(img->data, bkg->data, rms->data,
                                                         mask->data, n, (float)p->nsigma,
                                                         p->subtract);
        SF_LAUNCHED();
        return SF_OK;
    }
    {
        // The same float32 operations as the CPU twin.
        volatile float nsig = (float)p->nsigma, sig = (float)bs->sigma;
        float thr = nsig * sig;
        unsigned blocks = sf_blocks((n + 3) / 4, 256);
        if (blocks > (unsigned)g->sm_count * 16)
            blocks = (unsigned)g->sm_count * 16;
        thresh_kernel<<<blocks, 256, 0, g->stream>>>(img->data, mask->data, n,
                                                     (float)bs->median, thr, p->subtract);
        SF_LAUNCHED();
    }
fail:
    return st;
}
