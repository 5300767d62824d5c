// Stage `threshold`, GPU version: one or two levels against the global or
// the per-pixel level and noise, with the per-pixel rule shared with the
// CPU twin (src/calc/threshold_pixel.h), so both backends make the same float32
// decision for every pixel; non-finite pixels are never set.
#include "common.cuh"
#include "skyfind/threshold.h"
#include "threshold_pixel.h"

extern "C" sf_status sf_thresh_check(const sf_image *img, const sf_thresh_params *p,
                                     const sf_bkg_stats *st, const sf_image *bkg,
                                     const sf_image *rms, const sf_mask *mask);
extern "C" void sf_thresh_levels(const sf_thresh_params *p, float *seed, float *flood, float *ls,
                                 float *ns);

// kernels

static __global__ void thresh_kernel(const float *__restrict__ img, uint8_t *__restrict__ mask,
                                     size_t n, float level, float sigma, float seed, float flood)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t n4 = n / 4;
    const float4 *img4 = reinterpret_cast<const float4 *>(img);
    uchar4 *mask4 = reinterpret_cast<uchar4 *>(mask);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 q = img4[i];
        mask4[i] = make_uchar4(sf_thresh_pixel(q.x, level, sigma, seed, flood),
                               sf_thresh_pixel(q.y, level, sigma, seed, flood),
                               sf_thresh_pixel(q.z, level, sigma, seed, flood),
                               sf_thresh_pixel(q.w, level, sigma, seed, flood));
    }
    for (size_t i = n4 * 4 + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
        mask[i] = sf_thresh_pixel(img[i], level, sigma, seed, flood);
}

// With background maps: the level of each pixel, and its noise from the rms
// map or (rms == NULL: rms=global) the one sigma.
static __global__ void thresh_map_kernel(const float *__restrict__ img, const float *__restrict__ bkg,
                                         const float *__restrict__ rms, uint8_t *__restrict__ mask,
                                         size_t n, int subtract, float ls, float ns, float sigma,
                                         float seed, float flood)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
        mask[i] = sf_thresh_pixel(img[i], subtract ? __fmul_rn(bkg[i], ls) : 0.0f,
                                  rms ? __fmul_rn(rms[i], ns) : sigma, seed, flood);
}

// launchers

extern "C" sf_status sf_threshold_gpu(sf_gpu *g, const sf_image *img, const sf_thresh_params *p,
                                      const sf_bkg_stats *bs, const sf_image *bkg,
                                      const sf_image *rms, sf_mask *mask)
{
    sf_status st = sf_thresh_check(img, p, bs, bkg, rms, mask);
    size_t n = sf_npix(img->nx, img->ny);
    float seed, flood, ls, ns;
    if (st)
        return st;
    if (img->loc != SF_DEVICE || mask->loc != SF_DEVICE)
        return sf_fail(SF_ERR_PARAM, "sf_threshold_gpu needs device buffers");
    sf_thresh_levels(p, &seed, &flood, &ls, &ns);
    if (bkg) {
        unsigned blocks = sf_blocks(n, 256);
        if (blocks > (unsigned)g->sm_count * 16)
            blocks = (unsigned)g->sm_count * 16;
        thresh_map_kernel<<<blocks, 256, 0, g->stream>>>(img->data, bkg->data, rms ? rms->data : NULL,
                                                         mask->data, n, p->subtract, ls, ns,
                                                         (float)bs->sigma * ns, seed, flood);
        SF_LAUNCHED();
        return SF_OK;
    }
    {
        // the level and sigma exactly as the CPU twin rounds them
        const float level = p->subtract ? (float)bs->median * ls : 0.0f;
        const float sigma = (float)bs->sigma * ns;
        unsigned blocks = sf_blocks((n + 3) / 4, 256);
        if (blocks > (unsigned)g->sm_count * 16)
            blocks = (unsigned)g->sm_count * 16;
        thresh_kernel<<<blocks, 256, 0, g->stream>>>(img->data, mask->data, n, level, sigma, seed,
                                                     flood);
        SF_LAUNCHED();
    }
fail:
    return st;
}
