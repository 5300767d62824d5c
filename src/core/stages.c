/* The stage registry: each stage once, with its typed parameters and the
 * wrappers that call its CPU twin or GPU version on the run's buffers. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "state.h"
#include "skyfind/fit.h"
#include "skyfind/convolve.h"
#include "skyfind/deblend.h"
#include "skyfind/gpu.h"

/* ---- background ---------------------------------------------------------- */
static const sf_param_spec bkg_params[] = {
    {"method", SF_PT_CHOICE, "global", 0, 0, "global|mesh|bane", "",
     "global: one level and sigma by kappa-sigma clipping around the median; mesh: local "
     "maps from a grid of meshes (SExtractor/SEP); bane: local maps from clipped boxes "
     "around a grid of nodes, bilinear between them (BANE/Aegean)",
     offsetof(sf_bkg_params, method)},
    {"kappa", SF_PT_REAL, "3", 0.1, 100, NULL, "sigma",
     "clip pixels further than kappa*sigma from the median", offsetof(sf_bkg_params, kappa)},
    {"maxiter", SF_PT_INT, "100", 1, 10000, NULL, "",
     "most clipping iterations (stops earlier when nothing is clipped)",
     offsetof(sf_bkg_params, maxiter)},
    {"box", SF_PT_INT, "64", 1, 65536, "auto", "pixels",
     "mesh: mesh size; auto: 4 beam widths when the header has a beam, else 64; bane: the box "
     "around each node; auto: 6 steps",
     offsetof(sf_bkg_params, box)},
    {"step", SF_PT_INT, "auto", 1, 65536, "auto", "pixels",
     "bane: grid step; auto: 4 beam widths (sqrt(BMAJ BMIN)) rounded up when the header has a "
     "beam, else 16",
     offsetof(sf_bkg_params, step)},
    {"filter", SF_PT_INT, "3", 1, 31, NULL, "meshes",
     "mesh: median filter over filter x filter meshes (odd; 1: none)",
     offsetof(sf_bkg_params, filter)},
    {"estimator", SF_PT_CHOICE, "sextractor", 0, 0, "sextractor|median|mean", "",
     "mesh: sextractor = 2.5 median - 1.5 mean (the median when the mesh is crowded)",
     offsetof(sf_bkg_params, estimator)},
    {"interp", SF_PT_CHOICE, "bicubic", 0, 0, "bicubic|bilinear", "",
     "mesh: bicubic spline through the meshes (SExtractor) or bilinear",
     offsetof(sf_bkg_params, interp)},
    {"min_valid", SF_PT_REAL, "0.5", 0, 1, NULL, "fraction",
     "mesh: valid pixels a mesh needs, else it is filled from its neighbours",
     offsetof(sf_bkg_params, min_valid)},
};

static sf_status bkg_run(sf_state *s, const void *pp, int gpu)
{
    const sf_bkg_params *p = pp;
    sf_image *b = s->bkgmap.data ? &s->bkgmap : NULL, *r = s->rmsmap.data ? &s->rmsmap : NULL;
    sf_bkg_params q = *p;
    sf_status st;
    sf_bkg_resolve_auto(&q, s->beam_pix, s->beam_min_pix);
    /* SKYFIND_MAPS_EAGER=1 (or its older name SKYFIND_BANE_EAGER): the maps
     * made here, as before (the same bytes; a benchmark's reference) */
    const int later = b && r && !getenv("SKYFIND_MAPS_EAGER") && !getenv("SKYFIND_BANE_EAGER");
    s->maps_pending = 0;
    sf_state_drop_view(s);
    if (gpu && q.method == SF_BKG_BANE && later) {
        /* the maps left as node grids: made in the threshold stage's pass
         * (sf_state_maps for any other reader), so that they are not read
         * back */
        st = sf_background_bane_grid_gpu(s->g, &s->img, &q, &s->bkg, &s->grid);
        s->maps_pending = st == SF_OK;
    } else if (!gpu && q.method != SF_BKG_GLOBAL && later) {
        /* the CPU's maps left unmade: the threshold's pass makes their rows
         * and drops them, the stages after it read their pixels from the
         * view, sf_state_maps makes them for a caller who keeps them */
        st = sf_background_view_cpu(&s->img, &q, &s->bkg, &s->view);
        s->maps_pending = st == SF_OK;
    } else {
        st = gpu ? sf_background_gpu(s->g, &s->img, &q, &s->bkg, b, r)
                 : sf_background_cpu(&s->img, &q, &s->bkg, b, r);
    }
    if (st == SF_OK) {
        s->have |= SF_DATA_BKG;
        s->have_maps = q.method != SF_BKG_GLOBAL;
        s->box = q.method != SF_BKG_GLOBAL ? q.box : 0;
    }
    return st;
}
sf_status sf_state_maps(sf_state *s)
{
    sf_status st;
    if (!s->maps_pending)
        return SF_OK;
    if ((st = s->view ? sf_bkg_view_rows(s->view, &s->bkgmap, &s->rmsmap, 0, NULL, NULL)
                      : sf_bane_maps_gpu(s->g, &s->img, &s->grid, &s->bkgmap, &s->rmsmap)))
        return st;
    s->maps_pending = 0;
    return SF_OK;
}

/* The CPU's maps are not made yet: a stage reads their pixels from the
 * view (sf_bkg_view_at) rather than making them (sf_state_maps). */
static int maps_by_view(const sf_state *s, int gpu)
{
    return !gpu && s->maps_pending && s->view;
}

static sf_status bkg_cpu(sf_state *s, const void *p) { return bkg_run(s, p, 0); }
static sf_status bkg_check(const void *pp)
{
    sf_bkg_params q = *(const sf_bkg_params *)pp;
    sf_bkg_resolve_auto(&q, 0, 0); /* auto: resolved at run time; checked without a beam */
    return sf_bkg_check_params(&q);
}
static sf_status bkg_gpu(sf_state *s, const void *p) { return bkg_run(s, p, 1); }

/* ---- convolve ------------------------------------------------------------ */
static const sf_param_spec conv_params[] = {
    {"kernel", SF_PT_CHOICE, "beam", 0, 0, "beam|gauss|tophat|file|auto", "",
     "beam: the header's restoring beam, the matched filter (no filtering without a beam); "
     "gauss: fwhm, fwhm_min, pa; tophat: radius; file: a SExtractor .conv file or FITS image; "
     "auto: the beam when it raises a point source's signal-to-noise by 1.5 or more on this "
     "image's noise (white), else no filtering (noise correlated over the beam)",
     offsetof(sf_conv_params, kernel)},
    {"fwhm", SF_PT_REAL, "3", 0.01, 10000, NULL, "unit", "gauss: FWHM of the major axis",
     offsetof(sf_conv_params, fwhm)},
    {"fwhm_min", SF_PT_REAL, "0", 0, 10000, NULL, "unit", "gauss: FWHM of the minor axis (0: round)",
     offsetof(sf_conv_params, fwhm_min)},
    {"pa", SF_PT_REAL, "0", -360, 360, NULL, "deg",
     "gauss: position angle of the major axis, from +y (north) towards -x (east)",
     offsetof(sf_conv_params, pa)},
    {"unit", SF_PT_CHOICE, "pixels", 0, 0, "pixels|arcsec", "",
     "unit of fwhm, fwhm_min and radius (arcsec needs a celestial WCS)",
     offsetof(sf_conv_params, unit)},
    {"radius", SF_PT_REAL, "2", 0.01, 10000, NULL, "unit", "tophat: radius of the disc",
     offsetof(sf_conv_params, radius)},
    {"size", SF_PT_INT, "auto", 1, 4095, "auto", "pixels",
     "gauss, beam: kernel side (auto: odd, +-3 sigma of the major axis)",
     offsetof(sf_conv_params, size)},
    {"file", SF_PT_STRING, "", 0, 0, NULL, "", "file: path of the kernel (.conv, else FITS)",
     offsetof(sf_conv_params, file)},
    {"normalise", SF_PT_BOOL, "yes", 0, 1, NULL, "", "file (FITS): divide the kernel by its sum",
     offsetof(sf_conv_params, normalise)},
    {"method", SF_PT_CHOICE, "auto", 0, 0, "auto|direct|fft", "",
     "direct (tiled; separable kernels in two passes), fft, or auto (direct up to 225 taps and for most separable kernels, else fft: skyfind-pipeline(5))",
     offsetof(sf_conv_params, method)},
    {"edge", SF_PT_CHOICE, "reflect", 0, 0, "zero|nearest|reflect|wrap", "",
     "pixels beyond the border, as scipy.ndimage's modes (zero = constant 0)",
     offsetof(sf_conv_params, edge)},
    {"noise", SF_PT_CHOICE, "white", 0, 0, "white|measured|none", "",
     "noise of the filtered image: white: rms*sqrt(sum k^2); measured: rms times the ratio of "
     "clipped sigmas of the filtered and unfiltered images (correlated radio noise); none: the "
     "unfiltered rms, as SExtractor",
     offsetof(sf_conv_params, noise)},
};

/* noise=measured: the ratio of the kappa-sigma clipped sigmas of the
 * filtered and the unfiltered image (3 sigma, to convergence), measured on
 * every step-th row from step/2, step = floor(pixels / 2^20): at least 2^20
 * pixels (all of an image of fewer than 2^21). A ratio of two noise levels
 * from a million pixels is good to about 0.1% (rows a beam apart are
 * independent; along a row the beam correlates a few pixels), and the
 * two clippings of the whole image cost more than every other stage of
 * radio.pipe at 8192^2. Both backends clip the same rows in the same order:
 * the CPU through a view of them (row stride x step), the GPU on a compact
 * copy (sf_gpu_rows), so the ratio is the same bits. */
#define NOISE_SAMPLE ((size_t)1 << 20)

static void noise_rows(const sf_image *im, int *y0, int *step)
{
    size_t n = sf_npix(im->nx, im->ny), k = n / NOISE_SAMPLE;
    if (getenv("SKYFIND_NOISE_ALLROWS")) /* developer knob: the whole image, for before/after timings */
        k = 1;
    *step = k > 1 ? (int)(k < (size_t)im->ny ? k : (size_t)im->ny) : 1;
    *y0 = *step / 2;
}

/* The clipping of both: method=global's defaults. */
static void noise_params(sf_bkg_params *bp)
{
    sf_bkg_params_default(bp);
    bp->method = SF_BKG_GLOBAL;
}

/* The clipped statistics of the rows of im; pre: the GPU's, measured
 * beside the convolution (sf_convolve_noise_gpu), with its status pst. */
static sf_status clipped_sigma(sf_state *s, int gpu, const sf_image *im, const sf_bkg_params *bp,
                               const sf_bkg_stats *pre, sf_status pst, sf_bkg_stats *out)
{
    sf_image v;
    int y0, step;
    sf_status st = SF_ERR_EMPTY;
    noise_rows(im, &y0, &step);
    if (pre) {
        st = pst;
        if (st == SF_OK)
            *out = *pre;
    } else if (step > 1 && gpu) {
        if ((st = sf_gpu_rows(s->g, im, y0, step, &v)) == SF_OK)
            st = sf_background_gpu(s->g, &v, bp, out, NULL, NULL);
    } else if (step > 1) {
        v = *im;
        v.data = im->data + (size_t)y0 * im->stride;
        v.stride = im->stride * (size_t)step;
        v.ny = (im->ny - 1 - y0) / step + 1;
        st = sf_background_cpu(&v, bp, out, NULL, NULL);
    }
    /* the whole image: a small one, or rows that hold too few finite pixels
     * (an image blank but for a band the rows miss, or a constant one) */
    if (st == SF_ERR_EMPTY || (st == SF_OK && out->nvalid < (long long)(NOISE_SAMPLE / 16)))
        st = gpu ? sf_background_gpu(s->g, im, bp, out, NULL, NULL) : sf_background_cpu(im, bp, out, NULL, NULL);
    return st;
}

/* The filtered noise's ratio rho = clipped sigma of the filtered image /
 * clipped sigma of the image; pre (GPU, when the convolution measured them
 * beside it): the two statistics of the rows and their statuses. */
static sf_status conv_noise_ratio(sf_state *s, int gpu, const sf_bkg_stats *pre, const sf_status *pst,
                                  double *ratio)
{
    sf_bkg_params bp;
    sf_bkg_stats a, b;
    sf_status st;
    noise_params(&bp);
    if (gpu && (st = sf_gpu_reserve(s->g, sf_background_gpu_scratch(s->img.nx, s->img.ny, &bp))))
        return st;
    st = clipped_sigma(s, gpu, &s->img, &bp, pre, pre ? pst[0] : SF_OK, &a);
    if (st == SF_OK)
        st = clipped_sigma(s, gpu, &s->filt, &bp, pre ? pre + 1 : NULL, pre ? pst[1] : SF_OK, &b);
    if (st)
        return st;
    if (!(a.sigma > 0) || !(b.sigma > 0))
        return sf_fail(SF_ERR_PARAM, "convolve noise=measured: the clipped sigma is %g before and %g "
                       "after filtering", a.sigma, b.sigma);
    *ratio = b.sigma / a.sigma;
    return SF_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

/* The kernel of a run; *none when kernel=beam and the header has no beam. */
static sf_status conv_kernel(const sf_state *s, const sf_conv_params *p, sf_kernel *k, int *none)
{
    double scale = 1;
    *none = 0;
    if (p->unit == 1 && p->kernel != SF_KER_BEAM && p->kernel != SF_KER_FILE) {
        if (!(s->pix_arcsec > 0))
            return sf_fail(SF_ERR_PARAM, "convolve unit=arcsec needs the pixel size from a celestial WCS");
        scale = 1.0 / s->pix_arcsec;
    }
    switch (p->kernel) {
    case SF_KER_BEAM:
    case SF_KER_AUTO:
        if (!(s->beam_pix > 0)) {
            *none = 1;
            return SF_OK;
        }
        return sf_kernel_gauss(k, s->beam_pix, s->beam_min_pix > 0 ? s->beam_min_pix : s->beam_pix,
                               s->beam_pa_deg, p->size);
    case SF_KER_GAUSS:
        return sf_kernel_gauss(k, p->fwhm * scale, (p->fwhm_min > 0 ? p->fwhm_min : p->fwhm) * scale,
                               p->pa, p->size);
    case SF_KER_TOPHAT:
        return sf_kernel_tophat(k, p->radius * scale);
    default:
        if (!p->file[0])
            return sf_fail(SF_ERR_PARAM, "convolve kernel=file needs file=PATH (.conv or FITS)");
        return ends_with(p->file, ".conv") ? sf_kernel_read_conv(k, p->file)
                                           : sf_kernel_read_fits(k, p->file, p->normalise);
    }
}

static sf_status conv_run(sf_state *s, const void *pp, int gpu)
{
    const sf_conv_params *p = pp;
    sf_kernel k;
    int none, nan = -1, fused = 0;
    double rho = 1, snr_gain = 0;
    sf_bkg_stats pre[2];
    sf_status st, pst[2];
    memset(&k, 0, sizeof k);
    s->have_filt = 0;
    if ((st = conv_kernel(s, p, &k, &none)))
        return st;
    if (none) {
        snprintf(s->filt_desc, sizeof s->filt_desc, "none (kernel=%s but the header has no beam)",
                 p->kernel == SF_KER_AUTO ? "auto" : "beam");
        return SF_OK;
    }
    if (s->have & SF_DATA_BKG) /* the background stage counted the finite pixels */
        nan = s->bkg.nvalid < (long long)sf_npix(s->img.nx, s->img.ny);
    if (gpu && (p->noise == 1 || p->kernel == SF_KER_AUTO)) {
        /* the noise's two clippings beside the convolution, where it can */
        sf_bkg_params bp;
        int y0, step;
        noise_params(&bp);
        noise_rows(&s->img, &y0, &step);
        st = sf_convolve_noise_gpu(s->g, &s->img, &k, p->method, p->edge, nan, y0, step, &bp, &s->filt,
                                   &pre[0], &pre[1], &pst[0], &pst[1], &fused);
    }
    if (st == SF_OK && !fused)
        st = gpu ? sf_convolve_gpu(s->g, &s->img, &k, p->method, p->edge, nan, &s->filt)
                 : sf_convolve_cpu(&s->img, &k, p->method, p->edge, nan, &s->filt);
    if (st == SF_OK) {
        s->filt_gain = p->noise == 2 ? 1.0 : sqrt(k.sum2);
        if (p->noise == 1 || p->kernel == SF_KER_AUTO)
            st = conv_noise_ratio(s, gpu, fused ? pre : NULL, fused ? pst : NULL, &rho);
        if (p->noise == 1)
            s->filt_gain = rho;
    }
    if (st == SF_OK && p->kernel == SF_KER_AUTO) {
        /* G, the peak SNR of an unresolved source (of the beam's shape
         * b = k / max k) filtered over unfiltered: (sum k b / (sigma rho)) /
         * (1 / sigma) = sum k^2 / (max k * rho) */
        float kmax = 0;
        for (size_t i = 0; i < (size_t)k.nx * (size_t)k.ny; i++)
            kmax = k.w[i] > kmax ? k.w[i] : kmax;
        snr_gain = kmax > 0 ? k.sum2 / ((double)kmax * rho) : 0;
        if (!(snr_gain >= SF_CONV_AUTO_GAIN)) {
            snprintf(s->filt_desc, sizeof s->filt_desc, "none (kernel=auto: the beam filter would "
                     "change a point source's signal-to-noise by x%.2f, below %.1f: the noise is "
                     "correlated over the beam)", snr_gain, SF_CONV_AUTO_GAIN);
            sf_kernel_free(&k);
            return SF_OK;
        }
    }
    if (st == SF_OK) {
        int m = p->method ? p->method : sf_convolve_pick(&k, s->img.nx, s->img.ny, gpu);
        char why[96] = "";
        if (p->kernel == SF_KER_AUTO || p->noise == 1) {
            int y0, step;
            noise_rows(&s->img, &y0, &step);
            char gain[48] = "";
            if (p->kernel == SF_KER_AUTO)
                snprintf(gain, sizeof gain, "kernel=auto: point-source SNR x%.2f; ", snr_gain);
            snprintf(why, sizeof why, " (%snoise ratio %.5f, rows 1 in %d)", gain, rho, step);
        }
        s->have_filt = 1;
        s->have |= SF_DATA_FILTERED;
        s->filt_sum = k.sum;
        snprintf(s->filt_desc, sizeof s->filt_desc, "%.100s, %s%s%s", k.desc,
                 m == SF_CONV_FFT ? "fft" : "direct", k.row && m != SF_CONV_FFT ? " separable" : "",
                 why);
    }
    sf_kernel_free(&k);
    return st;
}
static sf_status conv_cpu(sf_state *s, const void *p) { return conv_run(s, p, 0); }
static sf_status conv_gpu(sf_state *s, const void *p) { return conv_run(s, p, 1); }

/* ---- threshold ----------------------------------------------------------- */
static const sf_param_spec thr_params[] = {
    {"nsigma", SF_PT_REAL, "5", -1e6, 1e6, NULL, "sigma",
     "detection (seed) threshold in units of the background sigma", offsetof(sf_thresh_params, nsigma)},
    {"flood", SF_PT_REAL, "0", 0, 1e6, NULL, "sigma",
     "0: one level; else the analysis (flood) level: islands grow down to it from seeds above nsigma",
     offsetof(sf_thresh_params, flood)},
    {"subtract", SF_PT_BOOL, "yes", 0, 1, NULL, "",
     "subtract the background level first (no: v > nsigma*sigma, as the lesson)",
     offsetof(sf_thresh_params, subtract)},
    {"rms", SF_PT_CHOICE, "local", 0, 0, "local|global", "",
     "with mesh maps: local: the noise map at each pixel; global: one sigma, the maps' median "
     "rms (SExtractor without a weight map)",
     offsetof(sf_thresh_params, rms_global)},
    {"sign", SF_PT_CHOICE, "positive", 0, 0, "positive|negative|both", "",
     "positive: sources above the background; negative: detections of the inverted image "
     "(the noise's own false detections in radio images); both: the two, negative ones with "
     "sign -1 and negative ids, and the false-detection estimate in the summary",
     offsetof(sf_thresh_params, sign)},
};

static sf_status thr_run(sf_state *s, const void *pp, int gpu)
{
    sf_thresh_params q = *(const sf_thresh_params *)pp;
    const sf_image *b = s->have_maps ? &s->bkgmap : NULL,
                   *r = s->have_maps && !q.rms_global ? &s->rmsmap : NULL;
    const sf_image *img = &s->img;
    sf_status st;
    q.filtered = 0;
    if (s->have_filt) { /* detect on the filtered image: its level and white-noise rms */
        img = &s->filt;
        q.filtered = 1;
        q.level_scale = s->filt_sum;
        q.noise_scale = s->filt_gain;
    }
    if (s->maps_pending && s->view) {
        /* the maps' rows made in the pass and dropped: the deblend, measure
         * and fit stages read their few pixels from the view
         * (sf_bkg_view_at), so the maps' memory is never touched unless a
         * caller keeps them (sf_state_maps) */
        st = sf_threshold_view_cpu(img, s->view, &q, &s->bkg, NULL, NULL, !q.rms_global, &s->mask);
    } else if (s->maps_pending) { /* the maps and the mask in one pass */
        st = sf_threshold_bane_gpu(s->g, img, &s->img, &s->grid, &q, &s->bkg, &s->bkgmap,
                                   &s->rmsmap, !q.rms_global, &s->mask);
        s->maps_pending = st != SF_OK;
    } else {
        st = gpu ? sf_threshold_gpu(s->g, img, &q, &s->bkg, b, r, &s->mask)
                 : sf_threshold_cpu(img, &q, &s->bkg, b, r, &s->mask);
    }
    if (st == SF_OK) {
        s->have |= SF_DATA_MASK;
        s->thr = q;
        s->seg_npix = 0;       /* a new mask: the labels' count no longer holds */
        s->labels_in_mask = 0; /* nor does their place inside it */
    }
    return st;
}
static sf_status thr_cpu(sf_state *s, const void *p) { return thr_run(s, p, 0); }
static sf_status thr_gpu(sf_state *s, const void *p) { return thr_run(s, p, 1); }

/* ---- segment ------------------------------------------------------------- */
static const sf_param_spec seg_params[] = {
    {"connectivity", SF_PT_INT, "8", 4, 8, "4|8", "",
     "4: pixels sharing an edge; 8: an edge or a corner", offsetof(sf_seg_params, connectivity)},
    {"min_area", SF_PT_INT, "1", 1, 1e9, "auto", "pixels",
     "islands with fewer pixels are dropped (auto: a quarter of the beam area, at least 3; "
     "3 without a beam)", offsetof(sf_seg_params, min_area)},
};

static sf_status seg_run(sf_state *s, const void *pp, int gpu)
{
    sf_seg_params q = *(const sf_seg_params *)pp;
    sf_status st;
    if (q.connectivity != 4 && q.connectivity != 8)
        return sf_fail(SF_ERR_PARAM, "segment connectivity must be 4 or 8, not %d", q.connectivity);
    if (q.min_area == 0) { /* auto: a quarter of the beam area (pi/(4 ln 2) bmaj bmin) */
        double bmin = s->beam_min_pix > 0 ? s->beam_min_pix : s->beam_pix;
        double area = 1.1330900354567985 * s->beam_pix * bmin;
        /* a beam of 1e5 pixels (a header's BMAJ in the wrong unit) would
         * overflow int: the parameter's maximum, 1e9, is the most it asks */
        q.min_area = !(area / 4 > 3) ? 3 : area / 4 < 1e9 ? (int)floor(area / 4) : 1000000000;
    }
    st = gpu ? sf_segment_gpu_counted(s->g, &s->mask, &q, &s->labels, &s->nlabels, &s->seg_npix)
             : sf_segment_cpu(&s->mask, &q, &s->labels, &s->nlabels);
    if (st == SF_OK) {
        s->have |= SF_DATA_LABELS;
        s->labels_in_mask = 1;
        s->seg_min_area = q.min_area;
        s->seg_conn = q.connectivity;
        sf_state_drop_deblend(s); /* labels of islands again */
    }
    return st;
}
static sf_status seg_cpu(sf_state *s, const void *p) { return seg_run(s, p, 0); }
static sf_status seg_gpu(sf_state *s, const void *p) { return seg_run(s, p, 1); }

/* ---- deblend ------------------------------------------------------------- */
static const sf_param_spec db_params[] = {
    {"nthresh", SF_PT_INT, "32", 1, 1024, NULL, "",
     "levels between each island's threshold and its peak (SExtractor DEBLEND_NTHRESH; 1: none)",
     offsetof(sf_deblend_params, nthresh)},
    {"mincont", SF_PT_REAL, "0.005", 0, 1, NULL, "fraction",
     "flux a branch needs above its level, as a fraction of the island's (DEBLEND_MINCONT)",
     offsetof(sf_deblend_params, mincont)},
    {"minarea", SF_PT_INT, "auto", 1, 1e9, "auto", "pixels",
     "pixels a branch needs (auto: the segment stage's min_area, as SExtractor's DETECT_MINAREA)",
     offsetof(sf_deblend_params, minarea)},
};

static sf_status db_run(sf_state *s, const void *pp, int gpu)
{
    sf_deblend_params q = *(const sf_deblend_params *)pp;
    const sf_thresh_params *t = &s->thr;
    float seed, flood, ls, ns;
    sf_deblend_in in;
    sf_image det = s->have_filt ? s->filt : s->img, hdet, hb, hr;
    sf_labels hl;
    int nobj = 0, *parent = NULL, *nchild = NULL;
    sf_status st = SF_OK;
    if (!(s->have & SF_DATA_MASK) || !(s->have & SF_DATA_LABELS))
        return sf_fail(SF_ERR_PARAM, "deblend needs the threshold and segment stages before it");
    if (s->db_parent)
        return sf_fail(SF_ERR_PARAM, "deblend runs once after each segment stage");
    const int by_view = maps_by_view(s, gpu);
    if (!by_view && (st = sf_state_maps(s)))
        return st;
    if (q.minarea == 0)
        q.minarea = s->seg_min_area > 0 ? s->seg_min_area : 1;
    q.connectivity = s->seg_conn ? s->seg_conn : 8;
    sf_thresh_levels(t, &seed, &flood, &ls, &ns);
    memset(&in, 0, sizeof in);
    in.level_scale = ls;
    in.noise_scale = ns;
    in.subtract = t->subtract;
    in.level = t->subtract ? (float)s->bkg.median * ls : 0.0f;
    in.sigma = (float)s->bkg.sigma * ns;
    in.t0 = flood;
    in.npix = gpu ? s->seg_npix : 0;
    memset(&hdet, 0, sizeof hdet);
    memset(&hb, 0, sizeof hb);
    memset(&hr, 0, sizeof hr);
    memset(&hl, 0, sizeof hl);
    in.bkg = s->have_maps && !by_view ? &s->bkgmap : NULL;
    in.rms = s->have_maps && !by_view && !t->rms_global ? &s->rmsmap : NULL;
    if (by_view) {
        in.view = s->view;
        in.view_rms = !t->rms_global;
    }
    if (!gpu) {
        st = sf_deblend_cpu(&det, &in, &q, &s->labels, s->nlabels, &nobj, &parent, &nchild);
    } else {
        /* SKYFIND_DEBLEND_HOST=1: the host fallback below, forced (its tests) */
        st = getenv("SKYFIND_DEBLEND_HOST")
                 ? SF_ERR_GPU_NOMEM
                 : sf_deblend_gpu(s->g, &det, &in, &q, &s->mask, &s->labels, s->nlabels, &nobj,
                                  &parent, &nchild);
        if (st != SF_ERR_GPU_NOMEM)
            goto gpu_done;
        /* The trees did not fit the device: deblend on the host (the same
         * result): the detection image, the maps and the labels come down,
         * the new labels go back up. */
        sf_errclear();
        s->db_host = 1;
        in.bkg = in.rms = NULL;
        if ((st = sf_image_alloc(&hdet, det.nx, det.ny, SF_HOST, NULL)) ||
            (st = sf_labels_alloc(&hl, det.nx, det.ny, SF_HOST, NULL)) ||
            (st = sf_image_download(s->g, &det, &hdet)) ||
            (st = sf_labels_download(s->g, &s->labels, &hl)))
            goto gpu_done;
        if (s->have_maps) {
            if ((st = sf_image_alloc(&hb, det.nx, det.ny, SF_HOST, NULL)) ||
                (st = sf_image_download(s->g, &s->bkgmap, &hb)))
                goto gpu_done;
            in.bkg = &hb;
        }
        if (s->have_maps && !t->rms_global) {
            if ((st = sf_image_alloc(&hr, det.nx, det.ny, SF_HOST, NULL)) ||
                (st = sf_image_download(s->g, &s->rmsmap, &hr)))
                goto gpu_done;
            in.rms = &hr;
        }
        if ((st = sf_deblend_cpu(&hdet, &in, &q, &hl, s->nlabels, &nobj, &parent, &nchild)))
            goto gpu_done;
        st = sf_labels_upload(s->g, &hl, &s->labels);
    gpu_done:
        sf_image_free(&hdet, NULL);
        sf_image_free(&hb, NULL);
        sf_image_free(&hr, NULL);
        sf_labels_free(&hl, NULL);
    }
    if (st) {
        free(parent);
        free(nchild);
        return st;
    }
    s->db_parent = parent;
    s->db_nchild = nchild;
    s->db_nislands = s->nlabels;
    s->nlabels = nobj;
    return SF_OK;
}
static sf_status db_cpu(sf_state *s, const void *p) { return db_run(s, p, 0); }
static sf_status db_gpu(sf_state *s, const void *p) { return db_run(s, p, 1); }

/* ---- measure ------------------------------------------------------------- */
static const sf_param_spec meas_params[] = {
    {"subtract", SF_PT_BOOL, "yes", 0, 1, NULL, "",
     "measure image - background (the local map, else the global level); no: the image as "
     "it is (the lesson)",
     offsetof(sf_measure_params, subtract)},
};

static sf_status meas_run(sf_state *s, const void *pp, int gpu)
{
    const sf_measure_params *p = pp;
    sf_status st = SF_OK;
    /* the background (when a stage made it), its maps, the mask's seeds */
    sf_measure_aux aux = {(s->have & SF_DATA_BKG) ? &s->bkg : NULL,
                          s->have_maps ? &s->bkgmap : NULL, s->have_maps ? &s->rmsmap : NULL,
                          (s->have & SF_DATA_MASK) ? &s->mask : NULL,
                          (s->have & SF_DATA_MASK) && s->labels_in_mask, NULL};
    if (maps_by_view(s, gpu)) {
        aux.bkg = aux.rms = NULL;
        aux.view = s->view;
    } else if ((st = sf_state_maps(s))) {
        return st;
    }
    /* the catalogue's buffer: its size is known only now */
    if (gpu) { /* the context's kept catalogue buffer, grown when needed */
        s->sources = NULL;
        st = sf_gpu_buffer(s->g, SF_GBUF_SOURCES, ((size_t)s->nlabels + 1) * sizeof(sf_source),
                           (void **)&s->sources);
    } else {
        free(s->sources);
        s->sources = malloc(((size_t)s->nlabels + 1) * sizeof(sf_source));
        if (!s->sources)
            st = sf_fail(SF_ERR_NOMEM, "catalogue of %d sources", s->nlabels);
    }
    if (st)
        return st;
    st = gpu ? sf_measure_gpu(s->g, &s->img, &s->labels, s->nlabels, &aux, p, s->sources)
             : sf_measure_cpu(&s->img, &s->labels, s->nlabels, &aux, p, s->sources);
    if (st == SF_OK) {
        s->nsources = s->nlabels;
        s->have |= SF_DATA_SOURCES;
    }
    return st;
}
static sf_status meas_cpu(sf_state *s, const void *p) { return meas_run(s, p, 0); }
static sf_status meas_gpu(sf_state *s, const void *p) { return meas_run(s, p, 1); }

/* ---- fit ----------------------------------------------------------------- */
static const sf_param_spec fit_params[] = {
    {"components", SF_PT_CHOICE, "objects", 0, 0, "objects|maxima", "",
     "what an island's components are: the deblend stage's objects (one per island without "
     "one), or the island's local maxima (Aegean's summits)",
     offsetof(sf_fit_params, components)},
    {"peak_nsigma", SF_PT_REAL, "4", 0, 1e30, NULL, "sigma",
     "components=maxima: a local maximum needs m >= peak_nsigma * rms",
     offsetof(sf_fit_params, peak_nsigma)},
    {"max_components", SF_PT_INT, "8", 1, SF_FIT_MAXCOMP, NULL, "",
     "components fitted together in one island, the brightest (more are flagged 128)",
     offsetof(sf_fit_params, max_components)},
    {"max_iter", SF_PT_INT, "100", 1, 100000, NULL, "",
     "Levenberg-Marquardt iterations per island", offsetof(sf_fit_params, max_iter)},
    {"noise", SF_PT_CHOICE, "auto", 0, 0, "auto|beam|white", "",
     "noise correlation for Condon's errors: the restoring beam, or independent pixels "
     "(auto: the beam when the image has one)",
     offsetof(sf_fit_params, noise)},
};

static sf_status fit_run(sf_state *s, const void *pp, int gpu)
{
    const sf_fit_params *p = pp;
    sf_fit_in in;
    sf_component *c = NULL;
    int n = 0;
    sf_status st;
    if (!(s->have & SF_DATA_SOURCES))
        return sf_fail(SF_ERR_PARAM, "fit needs a measure stage before it");
    if (!(s->have & SF_DATA_BKG))
        return sf_fail(SF_ERR_PARAM, "fit needs a background stage (its weights are the noise)");
    if (s->comps || s->comps_dev)
        return sf_fail(SF_ERR_PARAM, "fit runs once after each measure stage");
    const int by_view = maps_by_view(s, gpu);
    if (!by_view && (st = sf_state_maps(s)))
        return st;
    memset(&in, 0, sizeof in);
    in.bkg = s->have_maps && !by_view ? &s->bkgmap : NULL;
    in.rms = s->have_maps && !by_view ? &s->rmsmap : NULL;
    in.view = by_view ? s->view : NULL;
    in.mask = (s->have & SF_DATA_MASK) && s->labels_in_mask ? &s->mask : NULL;
    in.level = (float)s->bkg.median;
    in.sigma = (float)s->bkg.sigma;
    in.subtract = 1;
    in.sources = s->sources;
    in.nobj = s->nlabels;
    in.parent = s->db_parent;
    in.nislands = s->db_parent ? s->db_nislands : s->nlabels;
    in.npix = gpu ? s->seg_npix : 0; /* the deblend stage keeps the labelled pixels */
    if (s->beam_pix > 0) { /* the beam in pixels; its angle from +x (north up, east left) */
        in.beam_maj = s->beam_pix;
        in.beam_min = s->beam_min_pix > 0 ? s->beam_min_pix : s->beam_pix;
        in.beam_angle = 90.0 + s->beam_pa_deg;
    }
    /* the GPU's components stay on the device until the runner's collect
     * brings them down with the catalogue */
    st = gpu ? sf_fit_gpu_device(s->g, &s->img, &s->labels, &in, p, &s->comps_dev, &n)
             : sf_fit_cpu(&s->img, &s->labels, &in, p, &c, &n);
    if (st)
        return st;
    s->comps = c;
    s->ncomps = n;
    s->have |= SF_DATA_COMPONENTS;
    return SF_OK;
}
static sf_status fit_cpu(sf_state *s, const void *p) { return fit_run(s, p, 0); }
static sf_status fit_gpu(sf_state *s, const void *p) { return fit_run(s, p, 1); }

/* ---- the table ----------------------------------------------------------- */
#define NP(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const sf_stage_def stages[] = {
    {"background", "sky level and noise: clipped global statistics, or local maps (SExtractor mesh, BANE)", bkg_params,
     NP(bkg_params), sizeof(sf_bkg_params), SF_DATA_IMAGE, SF_DATA_BKG, bkg_cpu, bkg_gpu,
     bkg_check},
    {"convolve", "filter the image for detection (the restoring beam: the matched filter)",
     conv_params, NP(conv_params), sizeof(sf_conv_params), SF_DATA_IMAGE, SF_DATA_FILTERED,
     conv_cpu, conv_gpu, NULL},
    {"threshold", "detection mask: seeds above nsigma times the background sigma, grown down to flood",
     thr_params,
     NP(thr_params), sizeof(sf_thresh_params), SF_DATA_IMAGE | SF_DATA_BKG, SF_DATA_MASK,
     thr_cpu, thr_gpu, NULL},
    {"segment", "connected islands of the mask, labelled 1..N in raster order", seg_params,
     NP(seg_params), sizeof(sf_seg_params), SF_DATA_MASK, SF_DATA_LABELS, seg_cpu, seg_gpu,
     NULL},
    {"deblend", "split islands into objects at levels between threshold and peak (SExtractor's "
     "multi-threshold deblending)", db_params, NP(db_params), sizeof(sf_deblend_params),
     SF_DATA_IMAGE | SF_DATA_MASK | SF_DATA_LABELS, SF_DATA_LABELS, db_cpu, db_gpu, NULL},
    {"measure", "per source: flux, peak, centroid, moments and shape, box, noise, errors, flags",
     meas_params, NP(meas_params), sizeof(sf_measure_params), SF_DATA_IMAGE | SF_DATA_LABELS, SF_DATA_SOURCES, meas_cpu,
     meas_gpu, NULL},
    {"fit", "elliptical Gaussian components fitted to every island (Levenberg-Marquardt, "
     "Condon's errors, deconvolved sizes)", fit_params, NP(fit_params), sizeof(sf_fit_params),
     SF_DATA_IMAGE | SF_DATA_BKG | SF_DATA_LABELS | SF_DATA_SOURCES, SF_DATA_COMPONENTS, fit_cpu,
     fit_gpu, NULL},
};

int sf_stage_count(void) { return NP(stages); }

const sf_stage_def *sf_stage_at(int i)
{
    return i >= 0 && i < NP(stages) ? &stages[i] : NULL;
}

const sf_stage_def *sf_stage_find(const char *name)
{
    for (int i = 0; i < NP(stages); i++)
        if (strcmp(stages[i].name, name) == 0)
            return &stages[i];
    return NULL;
}
