/* skyfind's sky simulator: Gaussian noise in Jy/beam (white, or correlated over
 * the beam) plus point and extended Gaussian sources convolved with an elliptical
 * beam, deterministic for a seed, with a truth catalogue. The bundled samples are
 * made with it. */
#ifndef SKYFIND_SIMULATE_H
#define SKYFIND_SIMULATE_H

#include "skyfind/image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int nx, ny;            /* image size (pixels) */
    unsigned long long seed; /* 1 */
    int nsrc;              /* sources; 0: noise only; < 0 (default): about one per
                              40x40 beam areas (auto) */
    double noise;          /* 1e-4 Jy/beam, rms of the Gaussian noise */
    /* 0 (default): white noise, independent pixels. 1: beam-correlated, as in an
     * image made from visibilities: white N(0,1) noise drawn on an area padded by
     * the kernel's half-widths (so edge pixels are as correlated as the interior),
     * convolved with the restoring beam as a unit-peak kernel
     * k(d) = exp(-d'C^-1 d / 2) (C the beam's covariance in pixels: FWHM bmaj,
     * bmin, PA bpa, the shape the sources are convolved with), truncated where
     * d'C^-1 d > 16 (4 sigma), then multiplied by noise / sqrt(sum k^2), so the
     * rms is `noise` in expectation. Neighbours at lag d then correlate as
     * exp(-d'C^-1 d / 4): exp(-d^2 / (4 sigma^2)) along an axis of a circular
     * beam. Own random streams: the sources do not change with it. Cost grows
     * with the beam area in pixels (direct convolution, OpenMP over rows). */
    int corr_noise;        /* 0 */
    double snr_min, snr_max; /* 3, 300: peak signal-to-noise range (power law, slope -1.5) */
    double ext_frac;       /* 0.2: fraction of extended sources */
    double pix_arcsec;     /* 2.0: pixel size */
    double bmaj_arcsec, bmin_arcsec, bpa_deg; /* 10, 7, 30: restoring beam (FWHM) */
    double ra_deg, dec_deg;  /* 150.0, -30.0: pointing at the image centre (SIN) */
    double freq_hz;        /* 1.4e9 */
    /* Blended pairs, added after the nsrc sources (from their own random
     * stream, so the other sources do not change): two point sources each,
     * the brighter with a peak SNR log-uniform in [50, 500], the fainter
     * fainter by a ratio log-uniform in [1, pair_ratio_max], separated by
     * pair_sep_min .. pair_sep_max (uniform) times the beam's FWHM (the
     * geometric mean of its axes) in a uniform direction. */
    int npairs;            /* 0 */
    double pair_sep_min, pair_sep_max; /* 0.5, 3 (beam FWHMs) */
    double pair_ratio_max; /* 10 */
} sf_sim_params;

typedef struct {
    int id;
    double x, y;           /* true centre, 0-based pixels */
    double ra, dec;        /* degrees */
    double peak;           /* peak brightness (Jy/beam) */
    double flux;           /* integrated flux density (Jy) */
    double maj_arcsec, min_arcsec, pa_deg; /* intrinsic FWHM (0 for points) */
    int pair;              /* 0, or the number (1..npairs) of the blended pair it belongs to */
    /* The observed shape, the intrinsic Gaussian convolved with the beam (the
     * beam itself for a point source): FWHM major and minor axes in arcsec, PA
     * in degrees east of north in [0, 180). peak = the convolved Gaussian's
     * peak; flux = peak * conv_maj * conv_min / (bmaj * bmin). */
    double conv_maj_arcsec, conv_min_arcsec, conv_pa_deg;
} sf_sim_source;

void sf_sim_params_default(sf_sim_params *p);

/* Image on the host (malloc) and the truth list (malloc, *ntruth entries). */
sf_status sf_simulate(const sf_sim_params *p, sf_image *img, sf_sim_source **truth,
                      int *ntruth);

/* Simulate and write FITS (NAXIS=4 RA---SIN/DEC--SIN/FREQ/STOKES, BUNIT
 * JY/BEAM, BMAJ/BMIN/BPA; SIMCORR = 'BEAM' when corr_noise is set) and a truth
 * CSV, both atomically. The CSV has one line of comment, then the columns
 * id,x,y,ra,dec,peak,flux,maj_arcsec,min_arcsec,pa_deg,pair,
 * conv_maj_arcsec,conv_min_arcsec,conv_pa_deg (the fields of sf_sim_source). */
sf_status sf_simulate_write(const sf_sim_params *p, const char *fits_path,
                            const char *truth_csv_path);

#ifdef __cplusplus
}
#endif
#endif
