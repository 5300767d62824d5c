/* The buffers of one pipeline run, shared by the stage wrappers of the
 * registry (src/stages.c) and the runner (src/run.c). Everything lives where
 * the backend computes: host memory for the CPU, device memory for the GPU. */
#ifndef SKYFIND_STATE_H
#define SKYFIND_STATE_H

#include "skyfind/pipeline.h"
#include "skyfind/threshold.h"
#include "skyfind/segment.h"

struct sf_state {
    sf_backend backend;
    sf_gpu *g;
    sf_image img;
    unsigned have;          /* SF_DATA_* present */
    sf_bkg_stats bkg;
    sf_image bkgmap, rmsmap; /* allocated only when kept */
    sf_mask mask;
    sf_labels labels;
    int nlabels;
    sf_source *sources;     /* backend location, nsources entries */
    int nsources;
    long long nmask;
};

#endif
