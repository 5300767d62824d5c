/* Pieces shared by `skyfind run` (src/cli_run.c) and `skyfind compare`
 * (src/cli_compare.c): their options, pipeline loading and input reading. */
#ifndef SKYFIND_CLI_RUN_H
#define SKYFIND_CLI_RUN_H

#include "skyfind/fits.h"
#include "skyfind/pipeline.h"

enum { SAVE_SEG = 1, SAVE_MASK = 2, SAVE_BKG = 4, SAVE_RMS = 8, SAVE_PNG = 16, SAVE_FILT = 32 };

typedef struct {
    const char *pipe;
    char pipe_path[4096];
    const char *backend;   /* cpu, gpu, auto */
    const char *outdir;
    const char **sets;
    int nsets;
    unsigned save;
    int plane;             /* 1-based; 0 = not given */
    int json;
    int device;
    double tol;            /* compare: relative tolerance */
    int stretch;           /* PNG previews: SF_STRETCH_ASINH or SF_STRETCH_ZSCALE */
    int formats[4];        /* catalogue formats (sf_catalog_format) */
    int nformats;
} run_args;

/* Parse the options of run (compare = 0) or compare (1); 0 or an exit code. */
int parse_args(int argc, char **argv, run_args *a, int compare, int *first);
/* Load the pipeline and apply --set; 0 or an exit code. */
int load_pipeline(run_args *a, sf_pipeline *pl);
/* Read one plane of a file, with the cube note. */
sf_status read_input(const char *file, const run_args *a, sf_gpu *g, sf_image *img,
                     sf_fits_info *info);
/* The beam (major and minor FWHM in pixels, position angle) and the pixel
 * size of the header into the run options (zeros where unknown). */
void set_beam(sf_run_opts *o, const sf_fits_info *info, int nx, int ny);

#endif
