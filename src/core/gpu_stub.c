/* CPU-only build: the GPU context and every stage's GPU entry point report
 * that this skyfind was built without CUDA. */
#include <stddef.h>
#include <stdlib.h>
#include "skyfind/gpu.h"
#include "skyfind/background.h"
#include "skyfind/threshold.h"
#include "skyfind/segment.h"
#include "skyfind/deblend.h"
#include "skyfind/measure.h"
#include "skyfind/fit.h"
#include "skyfind/convolve.h"
#include "skyfind/decode.h"

#define NO_GPU sf_fail(SF_ERR_NO_GPU, "this skyfind was built without CUDA (no nvcc at configure time)")

int sf_gpu_compiled(void) { return 0; }
int sf_gpu_used(void) { return 0; }
int sf_gpu_count(void) { return 0; }
sf_status sf_gpu_create(sf_gpu **g, int device) { *g = NULL; return NO_GPU; }
void sf_gpu_destroy(sf_gpu *g) { (void)g; }
const char *sf_gpu_name(const sf_gpu *g) { return "none"; }
sf_status sf_gpu_sync(sf_gpu *g) { return NO_GPU; }
sf_status sf_gpu_reserve(sf_gpu *g, size_t bytes) { return NO_GPU; }
sf_status sf_gpu_scratch(sf_gpu *g, size_t bytes, void **ptr) { *ptr = NULL; return NO_GPU; }
sf_status sf_gpu_malloc(sf_gpu *g, void **ptr, size_t bytes) { *ptr = NULL; return NO_GPU; }
void sf_gpu_free(sf_gpu *g, void *ptr) { }
sf_status sf_gpu_buffer(sf_gpu *g, int slot, size_t bytes, void **ptr) { *ptr = NULL; return NO_GPU; }
void *sf_gpu_stream(sf_gpu *g) { return NULL; }
int sf_gpu_device(const sf_gpu *g) { return -1; }
sf_status sf_gpu_bind(sf_gpu *g) { return NO_GPU; }
sf_status sf_gpu_use_device(int device) { return NO_GPU; }
int sf_gpu_sticky_error(sf_gpu *g) { return 0; }
sf_status sf_pinned_alloc(void **ptr, size_t bytes)
{
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? SF_OK : sf_fail(SF_ERR_NOMEM, "malloc of %.1f MB failed", bytes / 1e6);
}
void sf_pinned_free(void *ptr) { free(ptr); }
sf_status sf_host_register(void *ptr, size_t bytes) { return NO_GPU; }
void sf_host_unregister(void *ptr) { }
sf_status sf_gpu_upload_lane(sf_gpu *g, void *d, const void *s, size_t n, double *ms) { return NO_GPU; }
sf_status sf_gpu_meminfo(sf_gpu *g, size_t *f, size_t *t) { *f = *t = 0; return NO_GPU; }
sf_status sf_gpu_host_malloc(sf_gpu *g, void **ptr, size_t bytes) { *ptr = NULL; return NO_GPU; }
void sf_gpu_host_free(sf_gpu *g, void *ptr) { }
sf_status sf_gpu_to_device(sf_gpu *g, void *d, const void *s, size_t n) { return NO_GPU; }
sf_status sf_gpu_to_host(sf_gpu *g, void *d, const void *s, size_t n) { return NO_GPU; }
sf_status sf_gpu_copy(sf_gpu *g, void *d, const void *s, size_t n) { return NO_GPU; }
sf_status sf_gpu_memset(sf_gpu *g, void *d, int v, size_t n) { return NO_GPU; }
sf_status sf_gpu_negate(sf_gpu *g, float *d, size_t n) { return NO_GPU; }
int sf_gpu_pointer_device(const void *ptr) { return -1; }
sf_status sf_gpu_import_f32(sf_gpu *g, const void *src, long long row_bytes, int nx, int ny, sf_image *dst)
{
    return NO_GPU;
}
sf_status sf_gpu_rows(sf_gpu *g, const sf_image *in, int y0, int step, sf_image *out) { return NO_GPU; }
void sf_gpu_bytes(const sf_gpu *g, uint64_t *h2d, uint64_t *d2h)
{
    if (h2d) *h2d = 0;
    if (d2h) *d2h = 0;
}
void sf_gpu_reset_bytes(sf_gpu *g) { }
sf_status sf_gpu_timer_create(sf_gpu *g, sf_gpu_timer **t) { *t = NULL; return NO_GPU; }
void sf_gpu_timer_destroy(sf_gpu_timer *t) { }
sf_status sf_gpu_timer_start(sf_gpu_timer *t) { return NO_GPU; }
sf_status sf_gpu_timer_stop(sf_gpu_timer *t, double *ms) { *ms = 0; return NO_GPU; }
sf_status sf_gpu_timer_lap(sf_gpu_timer *t) { return NO_GPU; }
sf_status sf_gpu_timer_read(sf_gpu_timer *t, double *ms) { *ms = 0; return NO_GPU; }
sf_status sf_gpu_timer_mark(sf_gpu_timer *t, int k) { return NO_GPU; }
sf_status sf_gpu_timer_marks(sf_gpu_timer *t, int n) { return NO_GPU; }
sf_status sf_gpu_timer_between(sf_gpu_timer *t, int k0, int k1, double *ms) { *ms = 0; return NO_GPU; }
sf_status sf_gpu_copy_bandwidth(sf_gpu *g, size_t bytes, double *gbps) { *gbps = 0; return NO_GPU; }

sf_status sf_background_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                            sf_bkg_stats *st, sf_image *bkg, sf_image *rms) { return NO_GPU; }
size_t sf_background_gpu_scratch(int nx, int ny, const sf_bkg_params *p) { return 0; }
sf_status sf_bkg_mesh_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                          sf_bkg_mesh *mesh) { return NO_GPU; }
sf_status sf_bkg_interp_gpu(sf_gpu *g, const sf_bkg_mesh *mesh, const sf_bkg_params *p,
                            const sf_image *img, sf_image *bkg, sf_image *rms) { return NO_GPU; }
sf_status sf_background_mesh_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                 sf_bkg_stats *st, sf_image *bkg, sf_image *rms) { return NO_GPU; }
size_t sf_background_mesh_gpu_scratch(int nx, int ny, const sf_bkg_params *p) { return 0; }
sf_status sf_background_bane_grid_gpu(sf_gpu *g, const sf_image *img, const sf_bkg_params *p,
                                      sf_bkg_stats *st, sf_bane_grid *grid)
{
    return NO_GPU;
}
sf_status sf_bane_maps_gpu(sf_gpu *g, const sf_image *img, const sf_bane_grid *grid, sf_image *bkg,
                           sf_image *rms)
{
    return NO_GPU;
}
sf_status sf_threshold_bane_gpu(sf_gpu *g, const sf_image *img, const sf_image *orig,
                                const sf_bane_grid *grid, const sf_thresh_params *p,
                                const sf_bkg_stats *st, sf_image *bkg, sf_image *rms, int use_rms,
                                sf_mask *mask)
{
    return NO_GPU;
}
sf_status sf_threshold_gpu(sf_gpu *g, const sf_image *img, const sf_thresh_params *p,
                           const sf_bkg_stats *st, const sf_image *bkg, const sf_image *rms,
                           sf_mask *mask) { return NO_GPU; }
sf_status sf_segment_gpu(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                         sf_labels *labels, int *nlabels) { return NO_GPU; }
sf_status sf_segment_gpu_counted(sf_gpu *g, const sf_mask *mask, const sf_seg_params *p,
                                 sf_labels *labels, int *nlabels, long long *npix) { return NO_GPU; }
size_t sf_segment_gpu_scratch(int nx, int ny, const sf_seg_params *p) { return 0; }
sf_status sf_deblend_gpu(sf_gpu *g, const sf_image *det, const sf_deblend_in *in,
                         const sf_deblend_params *p, const sf_mask *mask, sf_labels *labels,
                         int nislands, int *nobj, int **parent, int **nchildren)
{
    *nobj = 0;
    *parent = *nchildren = NULL;
    return NO_GPU;
}
sf_status sf_measure_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                         int nlabels, const sf_measure_aux *aux, const sf_measure_params *p,
                         sf_source *out) { return NO_GPU; }
size_t sf_measure_gpu_scratch(int nx, int ny, int nlabels, const sf_measure_params *p) { return 0; }
sf_status sf_fit_gpu(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                     const sf_fit_in *in, const sf_fit_params *p, sf_component **comps,
                     int *ncomps)
{
    *comps = NULL;
    *ncomps = 0;
    return NO_GPU;
}
sf_status sf_fit_gpu_device(sf_gpu *g, const sf_image *img, const sf_labels *labels,
                            const sf_fit_in *in, const sf_fit_params *p,
                            const sf_component **dcomps, int *ncomps)
{
    *dcomps = NULL;
    *ncomps = 0;
    return NO_GPU;
}
sf_status sf_convolve_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                          int edge, int nan, sf_image *out) { return NO_GPU; }
size_t sf_convolve_gpu_scratch(int nx, int ny, const sf_kernel *k, int method) { return 0; }
sf_status sf_convolve_rows_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                               int edge, int y0, int step, sf_image *out, int *done)
{
    *done = 0;
    return NO_GPU;
}
sf_status sf_convolve_noise_gpu(sf_gpu *g, const sf_image *in, const sf_kernel *k, int method,
                                int edge, int nan, int y0, int step, const sf_bkg_params *bp,
                                sf_image *out, sf_bkg_stats *sa, sf_bkg_stats *sb, sf_status *sta,
                                sf_status *stb, int *done)
{
    *done = 0;
    return NO_GPU;
}
sf_status sf_decode_gpu(sf_gpu *g, const void *raw, const sf_raw_layout *l, sf_image *out,
                        long long *nblank) { return NO_GPU; }
