/* The stage registry: each stage once, with its typed parameters and the
 * wrappers that call its CPU twin or GPU version on the run's buffers. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "state.h"
#include "skyfind/gpu.h"

/* ---- background ---------------------------------------------------------- */
static const sf_param_spec bkg_params[] = {
    {"method", SF_PT_CHOICE, "global", 0, 0, "global|mesh", "",
     "global: one level and sigma by kappa-sigma clipping around the median; mesh: local "
     "maps from a grid of meshes (SExtractor/SEP)",
     offsetof(sf_bkg_params, method)},
    {"kappa", SF_PT_REAL, "3", 0.1, 100, NULL, "sigma",
     "clip pixels further than kappa*sigma from the median", offsetof(sf_bkg_params, kappa)},
    {"maxiter", SF_PT_INT, "100", 1, 10000, NULL, "",
     "most clipping iterations (stops earlier when nothing is clipped)",
     offsetof(sf_bkg_params, maxiter)},
    {"box", SF_PT_INT, "64", 1, 65536, "auto", "pixels",
     "mesh: mesh size; auto: 4 beam widths when the header has a beam, else 64",
     offsetof(sf_bkg_params, box)},
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
    if (q.method == SF_BKG_MESH && q.box == 0) /* box=auto: 4 beam widths, else 64 */
        q.box = s->beam_pix > 0 ? (int)lround(4.0 * s->beam_pix) : 64;
    if (q.box < 1)
        q.box = 1;
    st = gpu ? sf_background_gpu(s->g, &s->img, &q, &s->bkg, b, r)
             : sf_background_cpu(&s->img, &q, &s->bkg, b, r);
    if (st == SF_OK) {
        s->have |= SF_DATA_BKG;
        s->have_maps = q.method == SF_BKG_MESH;
        s->box = q.method == SF_BKG_MESH ? q.box : 0;
    }
    return st;
}
static sf_status bkg_cpu(sf_state *s, const void *p) { return bkg_run(s, p, 0); }
static sf_status bkg_check(const void *pp)
{
    sf_bkg_params q = *(const sf_bkg_params *)pp;
    if (q.box == 0) /* auto: resolved at run time */
        q.box = 64;
    return sf_bkg_check_params(&q);
}
static sf_status bkg_gpu(sf_state *s, const void *p) { return bkg_run(s, p, 1); }

/* ---- threshold ----------------------------------------------------------- */
static const sf_param_spec thr_params[] = {
    {"nsigma", SF_PT_REAL, "5", -1e6, 1e6, NULL, "sigma",
     "detection threshold in units of the background sigma", offsetof(sf_thresh_params, nsigma)},
    {"subtract", SF_PT_BOOL, "yes", 0, 1, NULL, "",
     "subtract the background level first (no: v > nsigma*sigma, as the lesson)",
     offsetof(sf_thresh_params, subtract)},
};

static sf_status thr_run(sf_state *s, const void *pp, int gpu)
{
    const sf_thresh_params *p = pp;
    const sf_image *b = s->have_maps ? &s->bkgmap : NULL, *r = s->have_maps ? &s->rmsmap : NULL;
    sf_status st = gpu ? sf_threshold_gpu(s->g, &s->img, p, &s->bkg, b, r, &s->mask)
                       : sf_threshold_cpu(&s->img, p, &s->bkg, b, r, &s->mask);
    if (st == SF_OK)
        s->have |= SF_DATA_MASK;
    return st;
}
static sf_status thr_cpu(sf_state *s, const void *p) { return thr_run(s, p, 0); }
static sf_status thr_gpu(sf_state *s, const void *p) { return thr_run(s, p, 1); }

/* ---- segment ------------------------------------------------------------- */
static const sf_param_spec seg_params[] = {
    {"connectivity", SF_PT_INT, "8", 4, 8, "4|8", "",
     "4: pixels sharing an edge; 8: an edge or a corner", offsetof(sf_seg_params, connectivity)},
    {"min_area", SF_PT_INT, "1", 1, 1e9, NULL, "pixels",
     "islands with fewer pixels are dropped", offsetof(sf_seg_params, min_area)},
};

static sf_status seg_run(sf_state *s, const void *pp, int gpu)
{
    const sf_seg_params *p = pp;
    sf_status st;
    if (p->connectivity != 4 && p->connectivity != 8)
        return sf_fail(SF_ERR_PARAM, "segment connectivity must be 4 or 8, not %d", p->connectivity);
    st = gpu ? sf_segment_gpu(s->g, &s->mask, p, &s->labels, &s->nlabels)
             : sf_segment_cpu(&s->mask, p, &s->labels, &s->nlabels);
    if (st == SF_OK)
        s->have |= SF_DATA_LABELS;
    return st;
}
static sf_status seg_cpu(sf_state *s, const void *p) { return seg_run(s, p, 0); }
static sf_status seg_gpu(sf_state *s, const void *p) { return seg_run(s, p, 1); }

/* ---- measure ------------------------------------------------------------- */
static sf_status meas_run(sf_state *s, const void *pp, int gpu)
{
    const sf_measure_params *p = pp;
    sf_status st = SF_OK;
    /* the catalogue's buffer: its size is known only now */
    if (gpu) {
        sf_gpu_free(s->g, s->sources);
        s->sources = NULL;
        st = sf_gpu_malloc(s->g, (void **)&s->sources, (size_t)s->nlabels * sizeof(sf_source));
    } else {
        free(s->sources);
        s->sources = malloc(((size_t)s->nlabels + 1) * sizeof(sf_source));
        if (!s->sources)
            st = sf_fail(SF_ERR_NOMEM, "catalogue of %d sources", s->nlabels);
    }
    if (st)
        return st;
    st = gpu ? sf_measure_gpu(s->g, &s->img, &s->labels, s->nlabels, p, s->sources)
             : sf_measure_cpu(&s->img, &s->labels, s->nlabels, p, s->sources);
    if (st == SF_OK) {
        s->nsources = s->nlabels;
        s->have |= SF_DATA_SOURCES;
    }
    return st;
}
static sf_status meas_cpu(sf_state *s, const void *p) { return meas_run(s, p, 0); }
static sf_status meas_gpu(sf_state *s, const void *p) { return meas_run(s, p, 1); }

/* ---- the table ----------------------------------------------------------- */
#define NP(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const sf_stage_def stages[] = {
    {"background", "sky level and noise: clipped global statistics, or local maps from a mesh grid", bkg_params,
     NP(bkg_params), sizeof(sf_bkg_params), SF_DATA_IMAGE, SF_DATA_BKG, bkg_cpu, bkg_gpu,
     bkg_check},
    {"threshold", "detection mask: pixels above nsigma times the background sigma", thr_params,
     NP(thr_params), sizeof(sf_thresh_params), SF_DATA_IMAGE | SF_DATA_BKG, SF_DATA_MASK,
     thr_cpu, thr_gpu, NULL},
    {"segment", "connected islands of the mask, labelled 1..N in raster order", seg_params,
     NP(seg_params), sizeof(sf_seg_params), SF_DATA_MASK, SF_DATA_LABELS, seg_cpu, seg_gpu,
     NULL},
    {"measure", "per source: pixels, flux sum, peak, flux-weighted centroid", NULL, 0,
     sizeof(sf_measure_params), SF_DATA_IMAGE | SF_DATA_LABELS, SF_DATA_SOURCES, meas_cpu,
     meas_gpu, NULL},
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
