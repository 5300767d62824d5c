/* Pieces shared by `skyfind run` (src/cli/cli_run.c) and `skyfind compare`
 * (src/cli/cli_compare.c): their options, pipeline loading and input reading. */
#ifndef SKYFIND_CLI_RUN_H
#define SKYFIND_CLI_RUN_H

#include "skyfind/fits.h"
#include "skyfind/pipeline.h"

enum { SAVE_SEG = 1, SAVE_MASK = 2, SAVE_BKG = 4, SAVE_RMS = 8, SAVE_PNG = 16, SAVE_FILT = 32,
       SAVE_RESID = 64, SAVE_MODEL = 128, /* the fit stage's residual and model images */
       SAVE_FIT_NAMED = 256 /* residual or model named, not only through all: a note when
                               the pipeline has no fit stage */ };

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
    /* run only: the batch */
    int plane_all;         /* --plane all */
    int jobs, threads, queue, readers, overlap;
    int devices[64], ndevices; /* --devices (0: all visible) */
    const char *name_tpl;  /* --name (NULL: {stem}, or {stem}_p{plane} with --plane all) */
    const char *merge;     /* --merge FILE */
    int resume;
    int shard_k, shard_n;  /* --shard K/N (0/0: none) */
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
/* File name without folder, extended-name brackets and FITS extensions. */
void file_stem(const char *path, char *stem, size_t n);
/* Create a folder and its parents (concurrent creators are fine); 0 or -1 with errno. */
int ensure_dir(const char *dir);
/* The per-file report on stderr (stages, device time, bytes moved) and the
 * per-file JSON object on f. */
void report_text(const char *file, const sf_run_result *r, const char *backend, const char *dev,
                 const sf_pipeline *pl);
void report_json(FILE *f, const char *file, const sf_run_result *r, const char *backend,
                 const sf_pipeline *pl, const char *catalog, const char *err);
/* The false-detection estimate (threshold sign=both or negative): one text
 * line after prefix, or the members of a JSON object ("negatives":..). */
void report_fdr_text(const char *prefix, long long nneg, const long long *pos, const long long *neg);
void report_fdr_json(FILE *f, long long nneg, const long long *pos, const long long *neg);
/* ',"negatives":{...}' for a run that detected on the inverted image; nothing otherwise */
void report_run_fdr_json(FILE *f, const sf_run_result *r);
/* Write the catalogues (OUTDIR/NAME.cat.csv, ...) and the check images asked
 * for; catalog gets the first catalogue's path. */
sf_status write_outputs(const char *file, const char *name, const run_args *a,
                        const sf_pipeline *pl, const char *backend, const sf_fits_info *info,
                        const sf_image *img, const sf_run_result *r, char *catalog, size_t catn);
#endif
