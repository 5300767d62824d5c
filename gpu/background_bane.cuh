// What gpu/background_bane.cu's runner (bane_run) calls in
// gpu/background_bane_grid.cu: the filled grids' packing for the maps and
// the run summary on the device (the maps themselves: sf_bane_maps_gpu, in
// skyfind/background.h).
#ifndef SKYFIND_GPU_BACKGROUND_BANE_CUH
#define SKYFIND_GPU_BACKGROUND_BANE_CUH

#include "skyfind/background.h"
#include "skyfind/gpu.h"

// The run summary, 40 bytes that come back to the host.
struct bane_summary_out {
    double mean;
    long long nfinite;
    float median, sigma, first;
    int niter;
};

// bane_summary on g->stream into out (device memory): the grids fb, fs of
// nb nodes and their passes iters; the finite count from nfinite (the packed
// cells' last offset) or from ccnt (the nc cells' counts), whichever is given.
sf_status sf_bane_summary_launch(sf_gpu *g, const float *fb, const float *fs, const int *iters,
                                 int nb, const long long *nfinite, const int *ccnt, int nc,
                                 bane_summary_out *out);

// The filled grids fb, fs (ncx x ncy nodes every step pixels of an nx x ny
// image) packed into the context's SF_GBUF_NODES, described by *gr.
sf_status sf_bane_pack_grid(sf_gpu *g, const float *fb, const float *fs, int nb, int nx, int ny,
                            int step, int ncx, int ncy, sf_bane_grid *gr);

#endif
