/* Stage `background`: the sky level and noise of an image.
 * method=global: iterative kappa-sigma clipping around the median (the
 * GPU-programming lesson's estimator), giving one level and one sigma.
 * method=mesh: local background and rms maps from statistics on a grid of
 * meshes (SExtractor, SEP), filtered and interpolated to every pixel.
 * method=bane: local maps from sigma-clipped statistics in overlapping boxes
 * around a grid of nodes, bilinear between them (BANE, Aegean's companion). */
#ifndef SKYFIND_BACKGROUND_H
#define SKYFIND_BACKGROUND_H

#include "skyfind/image.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SF_BKG_GLOBAL = 0, SF_BKG_MESH = 1, SF_BKG_BANE = 2 } sf_bkg_method;
typedef enum { SF_BKG_EST_SEXTRACTOR = 0, SF_BKG_EST_MEDIAN = 1, SF_BKG_EST_MEAN = 2 } sf_bkg_estimator;
typedef enum { SF_BKG_INTERP_BICUBIC = 0, SF_BKG_INTERP_BILINEAR = 1 } sf_bkg_interp;

typedef struct {
    int method;       /* SF_BKG_GLOBAL, SF_BKG_MESH or SF_BKG_BANE */
    double kappa;     /* 3.0; clip at kappa sigma (global: around the median; mesh: per mesh) */
    int maxiter;      /* 100; most clipping iterations */
    /* method=mesh and bane */
    int box;          /* 64 pixels; mesh: mesh size (the runner turns box=auto, 0 here, into
                         4 restoring-beam widths when the header has a beam, else 64);
                         bane: the box around each node (auto: 6 steps) */
    int step;         /* bane: grid step in pixels (the runner turns step=auto, 0 here,
                         into 4 beam widths when the header has a beam, else 16) */
    /* method=mesh only */
    int filter;       /* 3; median filter over filter x filter meshes (1: none) */
    int estimator;    /* SF_BKG_EST_SEXTRACTOR: 2.5 median - 1.5 mean, or the median
                         when |mean - median| / sigma >= 0.3 (SExtractor, SEP) */
    int interp;       /* SF_BKG_INTERP_BICUBIC (spline through the meshes, as SExtractor) */
    double min_valid; /* 0.5; fraction of valid pixels a mesh needs, else it is filled
                         from its neighbours */
} sf_bkg_params;

typedef struct {
    double median;    /* clipped median (image units); mesh: median of the mesh levels */
    double sigma;     /* clipped standard deviation, ddof=0; mesh: median of the mesh rms */
    double mean;      /* clipped mean; mesh: mean of the mesh levels */
    long long nused;  /* pixels left after clipping (global) */
    long long nvalid; /* non-NaN pixels in the image */
    int niter;        /* clipping iterations run (the last one clipped nothing if converged) */
    int converged;    /* 1 if an iteration clipped no pixel before maxiter */
    int npasses;      /* method=global: iterations that read the whole image (the
                         others read only the values kept near the bounds) */
} sf_bkg_stats;

/* The mesh grid of method=mesh: nbx x nby meshes of box x box pixels (the
 * last column and row may be narrower: partial meshes as in SExtractor),
 * levels and rms after filling and filtering, row-major. */
typedef struct {
    int nbx, nby, box;
    float *bkg, *rms;  /* nbx*nby values each */
    sf_loc loc;
} sf_bkg_mesh;

void sf_bkg_params_default(sf_bkg_params *p);
/* box=auto and step=auto (0 in p) for an image whose restoring beam is
 * bmaj_pix x bmin_pix pixels (0: no beam). mesh: box 4 beam widths
 * (BMAJ), else 64. bane: step 4 beam widths (sqrt(BMAJ BMIN)) rounded up,
 * else 16 (BANE's get_step_size); box 6 steps. */
void sf_bkg_resolve_auto(sf_bkg_params *p, double bmaj_pix, double bmin_pix);
/* SF_ERR_PARAM with a detail when p is not usable (both backends call it). */
sf_status sf_bkg_check_params(const sf_bkg_params *p);

/* method=global: bkg and rms may be NULL (the level is a scalar); when given
 * they are filled with the constant level and sigma. method=mesh: bkg and
 * rms are required and receive the full-resolution maps (NaN where the
 * image is NaN). The GPU version takes img, bkg, rms on the device and
 * returns st on the host. */
sf_status sf_background_cpu(const sf_image *img, const sf_bkg_params *p,
                            sf_bkg_stats *st, sf_image *bkg, sf_image *rms);
sf_status sf_background_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                            sf_bkg_stats *st, sf_image *bkg, sf_image *rms);

/* The two halves of method=mesh, for tests and benchmarks: the mesh grid
 * (mesh->bkg/rms allocated by the caller with nbx*nby floats in the
 * backend's memory; sf_bkg_mesh_shape gives nbx, nby), and the
 * interpolation of a grid to full-resolution maps. */
void sf_bkg_mesh_shape(int nx, int ny, int box, int *nbx, int *nby);
sf_status sf_bkg_mesh_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_mesh *mesh);
sf_status sf_bkg_mesh_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                          sf_bkg_mesh *mesh);
sf_status sf_bkg_interp_cpu(const sf_bkg_mesh *mesh, const sf_bkg_params *p, const sf_image *img,
                            sf_image *bkg, sf_image *rms);
sf_status sf_bkg_interp_gpu(sf_gpu *g, const sf_bkg_mesh *mesh, const sf_bkg_params *p,
                            const sf_image *img, sf_image *bkg, sf_image *rms);

/* A row function of the CPU's map passes: called on row y of both maps (b,
 * r) just after they are made, on the thread that made them. */
typedef void (*sf_bkg_row_fn)(void *ctx, int y, const float *b, const float *r);

/* method=bane with its maps left for later (the runner's way on both
 * backends, src/core/stages.c). On the GPU: the filled node grids, which the maps
 * interpolate, packed in the context's buffer SF_GBUF_NODES, from which
 * sf_bane_maps_gpu, or the threshold stage's sf_threshold_bane_gpu (the
 * maps made in the pass that thresholds, so they are written once and not
 * read back), make the maps with the same bits sf_background_gpu writes.
 * st as sf_background_gpu's. The grid stays valid until the next
 * background stage on the context. The pack holds the node values widened
 * to double (exactly: the maps' operands, src/calc/background_bane.h) and each
 * column's and row's place between nodes, so that making a map pixel
 * neither divides nor converts a node value.
 * sf_bane_at: a pixel's place along an axis (sf_bane_axis): between node k
 * and k + 1, at fraction t. */
typedef struct {
    double t;
    int k, pad_;
} sf_bane_at;
typedef struct {
    const double *level, *rms; /* ncx * ncy filled node values each (the float
                                  values, widened: the maps' operands); device
                                  memory from the GPU, host from the CPU */
    const sf_bane_at *ax, *ay; /* the place of each column (nx) and row (ny) */
    int nx, ny, step, ncx, ncy;
    int nan;                  /* the image has non-finite pixels: read it where
                                 the maps are made (they are NaN where it is NaN) */
} sf_bane_grid;
sf_status sf_background_bane_grid_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                      sf_bkg_stats *st, sf_bane_grid *grid);
/* Both maps of a grid (img: the image the grid was made from, for its NaN). */
sf_status sf_bane_maps_gpu(sf_gpu *g, const sf_image *img, const sf_bane_grid *grid, sf_image *bkg,
                           sf_image *rms);
/* The CPU twins. sf_background_bane_grid_cpu: the grid in host memory (one
 * block, freed by sf_bane_grid_free_cpu), st as sf_background_cpu's. sf_bane_maps_cpu: both maps, the
 * same bits as sf_background_cpu's, a row at a time; row_fn (NULL: none) is
 * called on each row y just after it is made, on the thread that made it,
 * with its rows of both maps (b, r) in that core's cache: the threshold
 * stage's pass (sf_threshold_bane_cpu). With row_fn, bkg and rms may be
 * NULL: the rows are then made in each thread's scratch (with level_only
 * the levels alone, row_fn's r NULL) and the maps are never written (the CPU runner's way: the stages after the threshold read
 * the few pixels they need from the grid, sf_bane_grid_at, and the maps'
 * memory is never touched unless they are kept). */
sf_status sf_background_bane_grid_cpu(const sf_image *img, const sf_bkg_params *p,
                                      sf_bkg_stats *st, sf_bane_grid *grid);
sf_status sf_bane_maps_cpu(const sf_image *img, const sf_bane_grid *grid, sf_image *bkg,
                           sf_image *rms, int level_only, sf_bkg_row_fn row_fn, void *ctx);
void sf_bane_grid_free_cpu(sf_bane_grid *grid);

/* The CPU runner's local maps before they are made (method=mesh or bane):
 * the grid they are interpolated from, with the image they belong to (it
 * must outlive the view). sf_background_view_cpu: the stage but for its
 * maps, st as sf_background_cpu's; SF_ERR_PARAM for method=global.
 * sf_bkg_view_at: map r (0 the level, 1 the rms) at one pixel, the bits
 * sf_background_cpu writes there. sf_bkg_view_rows: both maps a row at a
 * time into bkg and rms (the maps themselves), or, both NULL, into each
 * thread's scratch rows for row_fn alone (with level_only the levels alone,
 * and row_fn's r NULL; sf_bane_maps_cpu's rule). The
 * threshold stage makes its mask in that pass (sf_threshold_view_cpu), the
 * deblend, measure and fit stages read the few pixels they need (their
 * inputs' view), and the maps are made only when a caller keeps them. */
typedef struct sf_bkg_view sf_bkg_view;
sf_status sf_background_view_cpu(const sf_image *img, const sf_bkg_params *p, sf_bkg_stats *st,
                                 sf_bkg_view **view);
float sf_bkg_view_at(const sf_bkg_view *v, int r, int x, int y);
sf_status sf_bkg_view_rows(const sf_bkg_view *v, sf_image *bkg, sf_image *rms, int level_only,
                           sf_bkg_row_fn row_fn, void *ctx);
void sf_bkg_view_free(sf_bkg_view *v);

/* Device scratch bytes sf_background_gpu needs for an nx x ny image. */
size_t sf_background_gpu_scratch(int nx, int ny, const sf_bkg_params *p);

#ifdef __cplusplus
}
#endif
#endif
