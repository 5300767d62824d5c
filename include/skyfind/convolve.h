/* Stage `convolve`: filter the image for detection (the matched filter for
 * unresolved sources is the restoring beam). Two methods on each backend:
 * direct (tiled; a separable row+column path when the kernel is rank one)
 * and FFT (cuFFT on the GPU, FFTW on the CPU), with the same definition:
 *
 *   out[y][x] = sum_{j<ky, i<kx} w[j*kx+i] * in_ext[y - j + ky/2][x - i + kx/2]
 *
 * (integer division), which is scipy.ndimage.convolve(in, w, mode=edge) with
 * origin 0 for odd and even kernel sizes alike. in_ext is the image extended
 * by the edge mode, as scipy.ndimage names them:
 *   zero    ... 0 0 | a b c d | 0 0 ...            (scipy "constant", cval 0)
 *   nearest ... a a | a b c d | d d ...
 *   reflect ... b a | a b c d | d c ...            (half-sample symmetric)
 *   wrap    ... c d | a b c d | a b ...            (periodic)
 * for any kernel size, also kernels larger than the image.
 *
 * NaN pixels are ignored: the kernel is renormalised over the valid (non-NaN)
 * pixels under it (normalised convolution),
 *   out = sum_valid(w * v) / sum_valid(w) * sum(w),
 * pixels outside the image count as the edge mode makes them (zero: valid
 * zeros); a NaN input pixel stays NaN, and a pixel whose valid weights sum
 * to zero is NaN. Without NaN under the kernel (its nx x ny footprint) the
 * plain sum is returned. */
#ifndef SKYFIND_CONVOLVE_H
#define SKYFIND_CONVOLVE_H

#include "skyfind/image.h"
#include "skyfind/background.h" /* sf_bkg_params, sf_bkg_stats (sf_convolve_noise_gpu) */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SF_EDGE_ZERO = 0, SF_EDGE_NEAREST = 1, SF_EDGE_REFLECT = 2, SF_EDGE_WRAP = 3 } sf_edge;
typedef enum { SF_CONV_AUTO = 0, SF_CONV_DIRECT = 1, SF_CONV_FFT = 2 } sf_conv_method;

/* The direct method's general (not rank-one) 2-D sums add their kernel
 * rows' float partials in float up to this many taps and in double above,
 * on both backends alike (gpu/convolve.cu, cpu/convolve_fma.h): the same
 * bits. */
#define SF_CONV_FLOAT_ROWS_MAX 225

/* Largest kernel side the direct methods take (the GPU keeps the weights in
 * constant memory); the FFT methods take any size. */
#define SF_KERNEL_MAX 127

typedef struct {
    int nx, ny;          /* kernel size (any >= 1; need not be odd) */
    float *w;            /* nx*ny weights, row-major: w[j*nx + i], host (malloc) */
    float *row, *col;    /* when the kernel is rank one (separable): w[j*nx+i] ==
                            col[j] * row[i] in float; NULL otherwise */
    double sum, sum2;    /* sum of the weights and of their squares */
    char desc[160];      /* what it is, for reports and FITS HISTORY */
} sf_kernel;

/* Kernel constructors: on success *k is filled (release it with
 * sf_kernel_free); on failure it is left as it was. */

/* Elliptical Gaussian, FWHM in pixels along the major and minor axes
 * (0 < fwhm_min <= fwhm_maj), position angle in degrees measured from +y
 * (north) towards -x (east, for the usual north-up east-left image), centred
 * on index size/2. size 0: the odd side 2*ceil(3 sigma_maj)+1, at most
 * SF_KERNEL_MAX. Normalised to unit sum. Separable (row/col set, each of unit
 * sum) when round or pa is a multiple of 90 degrees. */
sf_status sf_kernel_gauss(sf_kernel *k, double fwhm_maj, double fwhm_min, double pa_deg, int size);
/* Top-hat disc: pixels whose centre is within radius of the centre pixel;
 * side 2*ceil(radius)+1, unit sum. */
sf_status sf_kernel_tophat(sf_kernel *k, double radius);
/* A SExtractor filter file: "CONV NORM" or "CONV NONORM" on the first line
 * (plain "CONV" counts as NORM, as in SExtractor), then rows of weights of
 * equal length (the first row written is row 0); '#' starts a comment, blank
 * lines are skipped. NORM divides by the sum of the absolute weights, as
 * SExtractor's getconv() does: unit sum for non-negative masks, less for
 * masks with negative weights (Mexican hats, whose sum may be 0). Errors
 * name the file and line. SExtractor applies the mask unflipped (a
 * correlation), so an asymmetric mask filters here point-reflected relative
 * to SExtractor; the masks SExtractor ships are symmetric. */
sf_status sf_kernel_read_conv(sf_kernel *k, const char *path);
/* A kernel from the first 2-D plane of a FITS image (a PSF, a dirty beam);
 * normalise: divide by the sum. NaN weights are an error naming the file. */
sf_status sf_kernel_read_fits(sf_kernel *k, const char *path, int normalise);
/* From an array (copied); normalise as above. Non-finite weights are an
 * error. */
sf_status sf_kernel_from_array(sf_kernel *k, const float *w, int nx, int ny, int normalise);
/* Divide by the sum (SF_ERR_PARAM when the sum is 0 or not finite). */
sf_status sf_kernel_normalise(sf_kernel *k);
/* Recompute sum, sum2 and the separable factors from w: factors that
 * reproduce w exactly are kept; otherwise w is tested for rank one, and
 * row/col are set when col[j]*row[i] matches every weight to 1e-6 of
 * max|w| (NULL otherwise). */
void sf_kernel_update(sf_kernel *k);
void sf_kernel_free(sf_kernel *k);

/* Noise of a filtered image: for white noise of rms s, the convolution with
 * k has rms s * sqrt(sum2), and a constant level b becomes b * sum. Returns
 * sqrt(sum2) / |sum|, the factor by which the rms grows relative to the
 * filtered level (+inf for a zero-sum kernel). */
double sf_kernel_noise_gain(const sf_kernel *k);

/* in and out: same shape, same backend location (out is fully written; it
 * must not alias in). method AUTO picks by sf_convolve_pick. nan: 1 if in
 * may hold NaN, 0 if it holds none (faster), -1 unknown (checked here; on the
 * GPU that costs one 4-byte read back). */
sf_status sf_convolve_cpu(const sf_image *in, const sf_kernel *k, int method, int edge, int nan,
                          sf_image *out);
sf_status sf_convolve_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                          int edge, int nan, sf_image *out);

/* Rows y0, y0 + step, ... of sf_convolve_gpu's output for an image without
 * NaN, the same bits, without filtering the rest: out is a device image of
 * in->nx x ((in->ny - 1 - y0) / step + 1). *done 0 (nothing launched) where
 * sf_convolve_gpu would not take its register-blocked direct kernel
 * (separable kernels, kernels over 24 columns, the FFT) or for more than
 * 65535 rows. */
sf_status sf_convolve_rows_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                               int edge, int y0, int step, sf_image *out, int *done);

/* sf_convolve_gpu (nan must be 0) with convolve noise=measured's two
 * clipped statistics (bp, method=global) measured beside it: *sa of rows
 * y0, y0 + step, ... of the image, *sb of the same rows of the filtered
 * image (sf_convolve_rows_gpu's), each clipping on a side stream in a few
 * blocks while the convolution runs; *sta and *stb their statuses
 * (SF_ERR_EMPTY as sf_background_gpu's). *done 0 (nothing launched) where it
 * does not apply: NaN or an unknown, step < 2, rows sf_convolve_rows_gpu
 * declines, or SKYFIND_NOISE_SERIAL=1. */
sf_status sf_convolve_noise_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                                int edge, int nan, int y0, int step, const sf_bkg_params *bp,
                                sf_image *out, sf_bkg_stats *sa, sf_bkg_stats *sb, sf_status *sta,
                                sf_status *stb, int *done);

/* The method AUTO uses for this kernel and image on one backend (gpu 0/1):
 * FFT for a side over SF_KERNEL_MAX; direct for rank-one kernels on the GPU
 * and for other kernels up to 225 taps on the GPU and on a CPU with FMA
 * (the same fused multiply-add sums: the same bits), FFT above; on a CPU
 * without FMA, and for rank-one kernels on the CPU, the cheaper by a cost
 * model (constants and measurements in cpu/convolve.c). It depends on the
 * CPU, not on SKYFIND_SIMD. */
int sf_convolve_pick(const sf_kernel *k, int nx, int ny, int gpu);
/* The fast transform length used for n + k - 1 (a 2^a 3^b 5^c 7^d size). */
int sf_fft_size(int n);

/* Parameters of stage `convolve` (the kernel is built when it runs, from
 * these and the header's restoring beam). */
typedef enum {
    SF_KER_BEAM = 0, SF_KER_GAUSS = 1, SF_KER_TOPHAT = 2, SF_KER_FILE = 3,
    SF_KER_AUTO = 4 /* the beam when it raises a point source's SNR by SF_CONV_AUTO_GAIN */
} sf_kernel_kind;

/* kernel=auto filters with the restoring beam when that multiplies the peak
 * signal-to-noise of an unresolved source by at least this much, measured
 * on the image: G = sum(k^2) / (max(k) * rho), rho the ratio of the clipped
 * sigmas of the filtered and the unfiltered image. For white noise
 * G = sqrt(sum b^2) of the beam b (peak 1): sqrt(pi sigma_x sigma_y), 3.1
 * for a 5 x 3.5 px beam; for noise correlated over the beam, as in a
 * restored radio image, G is about 1/sqrt(2) (measured 0.5-1.1 on the real
 * radio images of the test data). */
#define SF_CONV_AUTO_GAIN 1.5
typedef struct {
    int kernel;          /* SF_KER_*; beam: the restoring beam (the stage does nothing
                            when the header has none) */
    double fwhm, fwhm_min, pa; /* gauss: FWHM of the axes (fwhm_min 0: round), degrees */
    int unit;            /* 0: pixels, 1: arcsec (fwhm, fwhm_min, radius) */
    double radius;       /* tophat */
    int size;            /* gauss and beam: kernel side, 0: auto */
    char file[512];      /* file: a SExtractor .conv file or a FITS image */
    int normalise;       /* file (FITS): divide by the sum */
    int method;          /* SF_CONV_* */
    int edge;            /* SF_EDGE_* */
    int noise;           /* 0 white: the filtered noise is rms * sqrt(sum k^2);
                            1 measured: rms * (clipped sigma of the filtered image /
                            clipped sigma of the image), for correlated noise;
                            2 none: the unfiltered rms (SExtractor's convention) */
} sf_conv_params;

/* Device scratch bytes sf_convolve_gpu needs (FFT buffers; plans and the
 * kernel spectrum are cached in the context and reused across images of one
 * size). */
size_t sf_convolve_gpu_scratch(int nx, int ny, const sf_kernel *k, int method);

#ifdef __cplusplus
}
#endif
#endif
