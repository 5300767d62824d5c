/* Stage `fit`: elliptical Gaussian components fitted to every island, the
 * catalogue radio astronomers publish (Aegean, PyBDSF, PySE, Selavy).
 *
 * The island is the segment stage's island (all the objects a deblend stage
 * cut from it together). Its components are the deblend stage's objects
 * (components=objects; one per island without a deblend stage) or the local
 * maxima of the island (components=maxima, Aegean's summits: a pixel whose
 * m is larger than every pixel of the island within half the beam's minor
 * FWHM (at least the 8 neighbours, at most 8 pixels), ties going to the
 * first in raster order, with m >= peak_nsigma * rms), the brightest
 * max_components of them (by peak, ties in label or raster order; the
 * island's brightest pixel when no maximum qualifies).
 *
 * The data are the measure stage's m_i (the unfiltered image less the
 * background map or level, float32) with weights 1 / r_i^2 (the rms map or
 * the global sigma); pixels with m or r not finite, or r <= 0, are left out.
 * The model is a sum of Gaussians
 *     A exp(-(P dx^2 + 2 R dx dy + Q dy^2) / 2),  dx = x - x0, dy = y - y0,
 * six parameters each, fitted by Levenberg-Marquardt (Marquardt's diagonal
 * scaling, lambda from 1e-3, x10 on a rejected step and /10 on an accepted
 * one) with bounds: 0 <= A <= 2 max m of the island, x0 and y0 within the
 * island's box widened by one pixel, and the Gaussian's sigmas within
 * [smin, smax] (smin = 0.8 of the beam's minor sigma, Aegean's bound, or
 * 0.3 px without a beam; smax = the larger side of the island's box, at
 * least 2 beam sigmas), enforced by projection after every step
 * (eigenvalues of the matrix [[P, R], [R, Q]] clamped). It stops when an accepted step lowers
 * chi^2 by less than 1e-9 of it or by less than 0.01 (the minimum is then
 * nearer than about a tenth of an error: chi^2 rises by 1 at one error), or
 * when lambda passes 1e10 (no step helps):
 * status SF_FIT_OK; SF_FIT_MAXITER after max_iter iterations;
 * SF_FIT_FAILED when chi^2 is not finite; SF_FIT_SKIPPED when the island has
 * fewer usable pixels than parameters (its components keep their initial
 * guesses and get NaN errors).
 *
 * Initial guesses: A the component's peak m, (x0, y0) its peak pixel, the
 * shape the beam's (or, when larger, the object's second moments; without
 * a beam, the moments, at least a 1.5-px sigma).
 *
 * Both backends compute every sum in one order (32 lanes, lane l adding the
 * pixels l, l + 32, ... in raster order, the lanes reduced by a fixed
 * butterfly), with
 * IEEE operations that round alike and an exp of their own
 * (src/calc/fit_calc.h), so GPU components are the CPU twin's bit for bit.
 *
 * Derived values (sf_fit_finish; the GPU computes them on the device by the
 * same operations, fit_calc.h's sf_fit_finish_one): FWHM axes
 * and angle, the integrated flux 2 pi A sigma_maj sigma_min, errors after
 * Condon (1997): rho^2 = (theta_M theta_m / (4 theta_N^2))
 * (1 + (theta_N/theta_M)^2)^aM (1 + (theta_N/theta_m)^2)^am A^2 / sigma^2,
 * (aM, am) = (3/2, 3/2) for A, (5/2, 1/2) for the position along and the
 * size of the major axis, (1/2, 5/2) for those of the minor axis and the
 * angle; sigma(A)/A = sqrt(2)/rho, sigma(x_M) = sigma_M sqrt(2)/rho,
 * sigma(theta_M)/theta_M = sqrt(2)/rho, sigma(phi) = sqrt(2)/rho
 * 2 sigma_M sigma_m / (sigma_M^2 - sigma_m^2) (at most 90 deg), and
 * (sigma(S)/S)^2 = (sigma(A)/A)^2 + theta_N^2 / (theta_M theta_m)
 * ((sigma(theta_M)/theta_M)^2 + (sigma(theta_m)/theta_m)^2). theta_N is
 * the noise's correlation FWHM: the beam's geometric mean (noise=beam) or,
 * for white noise, pixels of side h: theta_N^2 = 2 ln 2 h^2 / pi with the
 * brackets left out (Condon's independent-pixel case). The deconvolved shape
 * is the fitted Gaussian's FWHM matrix less the beam's; an axis whose
 * difference is not positive is 0 and flags the component unresolved; its
 * error is theta theta_err / theta_d (d(theta_d^2) = d(theta^2)). */
#ifndef SKYFIND_FIT_H
#define SKYFIND_FIT_H

#include "skyfind/image.h"
#include "skyfind/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SF_FIT_MAXCOMP 16 /* components fitted together in one island, at most */

enum { SF_FIT_OBJECTS = 0, SF_FIT_MAXIMA = 1 };
enum { SF_FIT_NOISE_AUTO = 0, SF_FIT_NOISE_BEAM = 1, SF_FIT_NOISE_WHITE = 2 };

typedef struct {
    int components;     /* SF_FIT_OBJECTS: one per object (deblend stage); SF_FIT_MAXIMA:
                           the island's local maxima */
    double peak_nsigma; /* 4; components=maxima: a maximum needs m >= peak_nsigma * rms */
    int max_components; /* 8; components per island (1..SF_FIT_MAXCOMP), the brightest */
    int max_iter;       /* 100; Levenberg-Marquardt iterations per island */
    int noise;          /* SF_FIT_NOISE_*: the noise correlation for the errors (auto: the
                           beam when the image has one, else white) */
} sf_fit_params;

void sf_fit_params_default(sf_fit_params *p);

/* Fit status of an island (every component of it carries it). */
enum { SF_FIT_OK = 0, SF_FIT_MAXITER = 1, SF_FIT_FAILED = 2, SF_FIT_SKIPPED = 3 };

/* Bits of sf_component.flags above the island's sf_source flags (1..16). */
enum {
    SF_COMP_UNRESOLVED = 32, /* the deconvolution left an axis of zero size */
    SF_COMP_AT_BOUND = 64,   /* a parameter ended on its bound */
    SF_COMP_TOO_MANY = 128   /* the island had more components than max_components */
};

typedef struct {
    /* filled by the fit (both backends) */
    int island;      /* segment island, 1..N (negative for the inverted image's) */
    int component;   /* 1..ncomp in the island, brightest first */
    int ncomp;       /* components fitted together */
    int source;      /* the object (label) whose peak seeded it, or the label at the maximum */
    int status;      /* SF_FIT_* of the island */
    int niter;       /* iterations of the island's fit */
    int flags;       /* the source's SF_SRC_* flags | SF_COMP_* */
    int sign;        /* 1; -1 for the inverted image (the runner flips the signs back) */
    int px, py;      /* 0-based pixel of the initial guess */
    int npix;        /* pixels fitted in the island */
    float bkg, rms;  /* background and noise at (px, py) */
    double amp, x0, y0, cP, cQ, cR; /* the fitted parameters (0-based pixels) */
    double chi2;     /* weighted chi^2 of the island */
    double resid_ss; /* sum of (m - model)^2 over the island (image units^2) */
    /* derived (sf_fit_finish; the GPU's on the device, the same bits) */
    double x, y, x_err, y_err;        /* 0-based pixels */
    double peak, peak_err;            /* image units */
    double flux, flux_err;            /* 2 pi A sigma_maj sigma_min: image units x pixels */
    double maj, min, pa;              /* FWHM (pix); angle of the major axis, degrees
                                         counter-clockwise from +x, (-90, 90] */
    double maj_err, min_err, pa_err;  /* pix, pix, deg */
    double dmaj, dmin, dpa;           /* deconvolved FWHM (pix) and angle (deg); NaN without
                                         a beam */
    double dmaj_err, dmin_err;        /* their errors: maj maj_err / dmaj (the fitted size's
                                         error carried through the subtraction of the beam's
                                         square); NaN for an axis of 0 */
    double resid_rms;                 /* sqrt(resid_ss / npix) */
} sf_component;

/* What the fit reads besides the image and labels (all with the image's
 * location), set by the runner. */
typedef struct {
    const sf_image *bkg, *rms;  /* maps, or NULL: the global level and sigma */
    const sf_mask *mask;        /* the threshold mask the labels were made from, or NULL;
                                   the GPU reads labels only where it is set */
    float level, sigma;         /* global values (used without maps) */
    int subtract;               /* m = v - background (the measure stage's rule) */
    const sf_source *sources;   /* the measure stage's table (nobj entries, same location);
                                   the GPU makes room for an island's pixels from its
                                   objects' npix (more usable pixels than that: an error) */
    int nobj;                   /* objects (labels) */
    const int *parent;          /* host: island of each object (nobj + 1 entries), NULL
                                   without a deblend stage (island = object) */
    int nislands;
    long long npix;             /* GPU: the pixels the segment stage labelled (they bound the
                                   islands' usable pixels: the pixel buffers are sized by it
                                   without reading the exact total back), 0 unknown */
    double beam_maj, beam_min, beam_angle; /* beam FWHM (pix) and angle of its major axis
                                              (deg counter-clockwise from +x); 0: none */
    const sf_bkg_view *view;    /* CPU: both maps before they are made (sf_measure_aux's
                                   view), bkg and rms NULL; or NULL */
} sf_fit_in;

/* Fit every island. *comps (malloc'd on the host, *ncomps entries, island
 * order then component order) gets the fitted fields and the derived ones
 * (sf_fit_finish's). The GPU version reads the image, maps, labels and
 * sources on the device, derives the values there too, and brings only the
 * finished components back. */
sf_status sf_fit_cpu(const sf_image *img, const sf_labels *labels, const sf_fit_in *in,
                     const sf_fit_params *p, sf_component **comps, int *ncomps);
sf_status sf_fit_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                     const sf_fit_in *in, const sf_fit_params *p, sf_component **comps,
                     int *ncomps);
/* sf_fit_gpu without the download: *dcomps is the finished components on
 * the device (*ncomps of them, queued on the context's stream; valid until
 * the next fit on g), for a pipeline that brings them down with its
 * catalogue after the last stage. */
sf_status sf_fit_gpu_device(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                            const sf_fit_in *in, const sf_fit_params *p,
                            const sf_component **dcomps, int *ncomps);

/* The derived values of n components from their fitted fields (both
 * stage functions return them done; call it again after changing a fitted
 * field): on all OpenMP threads, each component alone, by the arithmetic
 * the GPU version runs on the device, so the same bits either way. */
void sf_fit_finish(sf_component *c, int n, const sf_fit_in *in, const sf_fit_params *p);

/* Add the fitted model of n components to img (host), each Gaussian out to
 * where it falls below 1e-7 of its amplitude (at most the image). */
void sf_fit_render(const sf_component *c, int n, float scale, sf_image *img);

#ifdef __cplusplus
}
#endif
#endif
