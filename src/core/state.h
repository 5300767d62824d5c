/* The buffers of one pipeline run, shared by the stage wrappers of the
 * registry (src/core/stages.c) and the runner (src/core/run.c). Everything lives where
 * the backend computes: host memory for the CPU, device memory for the GPU. */
#ifndef SKYFIND_STATE_H
#define SKYFIND_STATE_H

#include <stdlib.h>
#include "skyfind/pipeline.h"
#include "skyfind/threshold.h"
#include "skyfind/segment.h"

struct sf_state {
    sf_backend backend;
    sf_gpu *g;
    sf_image img;
    unsigned have;          /* SF_DATA_* present */
    sf_bkg_stats bkg;
    sf_image bkgmap, rmsmap; /* allocated for method=mesh, or when kept */
    int have_maps;          /* the background stage produced per-pixel maps */
    int maps_pending;       /* ... which are not made yet. The GPU's method=bane
                               leaves node grids (grid): the threshold stage
                               makes the maps in its pass, or sf_state_maps
                               before anything else reads them. The CPU's mesh
                               and bane leave a view: the threshold's pass
                               makes their rows and drops them, the deblend,
                               measure and fit stages read their pixels from
                               the view, and sf_state_maps makes them only for
                               a caller who keeps them, or the negative pass */
    sf_bane_grid grid;      /* the GPU's (in the context's buffer) */
    sf_bkg_view *view;      /* the CPU's maps before they are made (method=mesh or
                               bane; this state's to free): maps_pending */
    sf_mask mask;
    sf_labels labels;
    int nlabels;
    sf_source *sources;     /* backend location, nsources entries */
    int nsources;
    long long nmask;
    double beam_pix;        /* restoring-beam FWHM (major) in pixels, 0 if unknown */
    double beam_min_pix, beam_pa_deg, pix_arcsec; /* see sf_run_opts */
    sf_image filt;          /* the convolved image (allocated when a convolve stage exists) */
    int have_filt;          /* filt holds the detection image */
    double filt_sum;        /* the kernel's sum: the filtered level is level * filt_sum */
    double filt_gain;       /* the filtered noise is rms * filt_gain */
    char filt_desc[256];
    int box;                /* the mesh size used, 0 for method=global */
    sf_thresh_params thr;   /* the threshold stage's parameters as it ran (filtered scales set) */
    int seg_min_area, seg_conn; /* the segment stage's resolved min_area and connectivity */
    long long seg_npix;     /* GPU: the pixels the segment stage labelled, 0 unknown (for
                               the deblend stage: sf_deblend_in.npix) */
    int labels_in_mask;     /* the labels were made from the current mask (a segment stage
                               since the last threshold; the deblend stage splits islands
                               in place): every labelled pixel is set in it (the fit
                               and measure stages' GPU read labels only there:
                               sf_fit_in.mask, sf_measure_aux.labels_in_mask) */
    int *db_parent;         /* host, after a deblend stage: island of each object (nlabels + 1) */
    int *db_nchild;         /* host: objects of each island (db_nislands + 1) */
    int db_nislands;
    int db_host;            /* the GPU backend deblended on the host (no room on the GPU) */
    sf_component *comps;    /* host, after a fit stage (sf_fit_finish done) */
    const sf_component *comps_dev; /* GPU: the fit's components on the device (the context's
                                      buffer), brought down by the runner's collect */
    int ncomps;
    int negated;            /* the negative pass: image, filtered image, background map
                               and level are inverted (src/core/run.c flip_state) */
};

/* The background maps made now if the background stage left them as node
 * grids (maps_pending): every reader of bkgmap or rmsmap but the threshold
 * stage, which makes them itself, calls it first (the deblend, measure and
 * fit stages in src/core/stages.c; the runner's inversion and collect). */
sf_status sf_state_maps(sf_state *s);

/* Forget the CPU's view of the maps (the GPU's grids belong to its context). */
static inline void sf_state_drop_view(sf_state *s)
{
    sf_bkg_view_free(s->view);
    s->view = NULL;
}

/* Forget a deblend stage's tables (host memory on both backends). */
static inline void sf_state_drop_deblend(sf_state *s)
{
    free(s->db_parent);
    free(s->db_nchild);
    s->db_parent = s->db_nchild = NULL;
    s->db_host = 0;
}

/* Forget a fit stage's components. */
static inline void sf_state_drop_fit(sf_state *s)
{
    free(s->comps);
    s->comps = NULL;
    s->comps_dev = NULL;
    s->ncomps = 0;
}

#endif
