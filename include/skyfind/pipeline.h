/* The stage registry, the .pipe pipeline description and the runner.
 * Every stage is listed once (name, description, typed parameters with
 * defaults, ranges and units, CPU and GPU entry points); the parser,
 * `skyfind stages`, `--set stage.param=value` and the man page read it. */
#ifndef SKYFIND_PIPELINE_H
#define SKYFIND_PIPELINE_H

#include <stdint.h>
#include "skyfind/image.h"
#include "skyfind/background.h"
#include "skyfind/measure.h"
#include "skyfind/threshold.h"
#include "skyfind/fit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SF_PT_INT, SF_PT_REAL, SF_PT_CHOICE, SF_PT_BOOL, SF_PT_STRING } sf_ptype;

/* SF_PT_STRING values live in char[SF_PARAM_STRMAX] fields. */
#define SF_PARAM_STRMAX 512

typedef struct {
    const char *name;
    sf_ptype type;       /* INT and CHOICE and BOOL are stored as int, REAL as double,
                            STRING as char[SF_PARAM_STRMAX] */
    const char *def;     /* default, as written in a .pipe file */
    double min, max;     /* allowed range for INT and REAL */
    const char *choices; /* "a|b|c" for CHOICE: stored as the index */
    const char *unit;    /* "sigma", "pixels", "" */
    const char *help;
    size_t offset;       /* where the value lives in the stage's parameter struct */
} sf_param_spec;

/* What a stage reads and writes, for pipeline validation. */
enum {
    SF_DATA_IMAGE = 1,
    SF_DATA_BKG = 2,
    SF_DATA_MASK = 4,
    SF_DATA_LABELS = 8,
    SF_DATA_SOURCES = 16,
    SF_DATA_FILTERED = 32, /* the convolved (detection) image */
    SF_DATA_COMPONENTS = 64 /* fitted Gaussian components */
};

typedef struct sf_state sf_state;

typedef struct {
    const char *name;
    const char *desc;
    const sf_param_spec *params;
    int nparams;
    size_t params_size;
    unsigned needs, gives;
    sf_status (*cpu)(sf_state *s, const void *params);
    sf_status (*gpu)(sf_state *s, const void *params);
    sf_status (*check)(const void *params); /* rules across parameters, or NULL */
} sf_stage_def;

int sf_stage_count(void);
/* The build of the CPU stages' vectorised loops that runs in this process:
 * "avx512" where the CPU has AVX2, FMA and AVX-512F (the AVX2 loops, and the
 * 2-D direct convolution in AVX-512), "avx2+fma" with AVX2 and FMA (or
 * SKYFIND_SIMD=avx2), "avx2" with AVX2 alone, else, or with SKYFIND_SIMD=0
 * in the environment, "baseline" (x86-64's SSE2). Every build gives the
 * same bits. src/calc/simd.h. */
const char *sf_simd_name(void);
const sf_stage_def *sf_stage_at(int i);
const sf_stage_def *sf_stage_find(const char *name);
/* Parse value into the stage's parameter struct; detail says what is wrong. */
sf_status sf_param_set(const sf_stage_def *d, void *params, const char *key, const char *value);
/* Format the current value of parameter i ("3", "4.5", "global"). */
void sf_param_format(const sf_stage_def *d, const void *params, int i, char *buf, size_t n);

#define SF_PIPE_MAXSTEPS 32

typedef struct {
    const sf_stage_def *def;
    void *params;        /* malloc'd, def->params_size bytes */
    int line;            /* line in the .pipe file (0 when built in code) */
} sf_pipe_step;

typedef struct {
    char source[1024];   /* file name, for messages */
    char name[128];      /* stem of the file ("lesson") */
    int nsteps;
    sf_pipe_step steps[SF_PIPE_MAXSTEPS];
} sf_pipeline;

/* Parse .pipe text; errors are SF_ERR_PIPE with detail "source:line: message". */
sf_status sf_pipeline_parse(const char *text, const char *source, sf_pipeline *pl);
sf_status sf_pipeline_load(const char *path, sf_pipeline *pl);
/* Apply "stage.param=value" to every step of that stage (SF_ERR_PARAM if none). */
sf_status sf_pipeline_set(sf_pipeline *pl, const char *assignment);
void sf_pipeline_free(sf_pipeline *pl);
/* Find a pipeline by name ("lesson") or path; writes the path found. */
sf_status sf_pipeline_find(const char *name, char *path, size_t n);

typedef enum { SF_BACKEND_CPU = 0, SF_BACKEND_GPU = 1 } sf_backend;

enum {
    SF_KEEP_MASK = 1,    /* bring the mask back to the host */
    SF_KEEP_LABELS = 2,  /* bring the label map back */
    SF_KEEP_BKG = 4,     /* background and rms maps */
    SF_KEEP_FILTERED = 8, /* the convolved image */
    SF_KEEP_DEVICE = 16   /* GPU backend: the kept maps stay in device memory (copies
                             owned by the result, freed with it), not brought back */
};

typedef struct {
    sf_backend backend;
    sf_gpu *gpu;         /* required for SF_BACKEND_GPU */
    unsigned keep;       /* SF_KEEP_* */
    double beam_pix;     /* restoring-beam FWHM (major axis) in pixels, 0 if unknown */
    double beam_min_pix; /* minor axis FWHM in pixels (0: as the major axis) */
    double beam_pa_deg;  /* position angle of the major axis, degrees east of north */
    double pix_arcsec;   /* pixel size in arcsec, 0 if unknown (convolve unit=arcsec) */
} sf_run_opts;

#define SF_RUN_MAXSTAGES SF_PIPE_MAXSTEPS

typedef struct {
    int nx, ny;
    int have_bkg;
    sf_bkg_stats bkg;
    int have_mask, have_labels;
    long long nmask;            /* pixels set in the mask */
    int nsources;               /* -1 when no measure stage ran */
    sf_source *sources;         /* host, nsources entries */
    int ncomps;                 /* fitted Gaussian components; -1 when no fit stage ran */
    sf_component *comps;        /* host, ncomps entries (sf_fit_finish done): islands in
                                   order, negative ones (sign -1) after the positive */
    sf_mask mask;               /* copies, when kept: on the host, or on the device of
                                   maps_gpu (SF_KEEP_DEVICE) */
    sf_labels labels;
    sf_image bkgmap, rmsmap;
    sf_image filtered;          /* host copy of the convolved image, when kept */
    int have_filtered;          /* a convolve stage filtered the image */
    char filter_desc[256];      /* the kernel used (or why the stage did nothing) */
    double filter_sum, filter_gain; /* the filtered level is level * sum, its noise rms * gain */
    int nlabels;                /* labels of the final map (objects after a deblend stage) */
    int nislands;               /* islands of the segment stage */
    int nsplit, nsplit_objects; /* deblend: islands split, and the objects cut from them */
    int deblend_host;           /* 1: the GPU backend deblended on the host (its trees did not
                                 * fit the GPU's memory; the same result) */
    int box;                    /* mesh size used by method=mesh, 0 otherwise */
    int sign;                   /* threshold sign (SF_SIGN_*) the run used */
    int nneg;                   /* negative detections among the sources (sign -1, listed
                                   after the positive ones) */
    int nstages;
    const char *stage[SF_RUN_MAXSTAGES];
    double stage_ms[SF_RUN_MAXSTAGES]; /* device time (GPU, CUDA events) or wall time (CPU) */
    double total_ms;
    double upload_ms;           /* GPU: the image's upload */
    uint64_t h2d, d2h;          /* bytes moved by this run */
    sf_gpu *maps_gpu;           /* the context whose memory holds the kept maps (SF_KEEP_DEVICE);
                                   NULL: they are host memory. It must outlive the result. */
} sf_run_result;

/* Run every step on one backend. img is on the host; on the GPU it is
 * uploaded once and only the catalogue (and what opts->keep asks for) comes
 * back. */
sf_status sf_pipeline_run(const sf_pipeline *pl, const sf_image *img, const sf_run_opts *o,
                          sf_run_result *r);
void sf_run_result_free(sf_run_result *r);

/* The false-detection estimate of threshold sign=both: in an image whose
 * noise is symmetric, the detections of the inverted image count the false
 * detections among the positive ones. pos[k] and neg[k] (added to) are the
 * positive and negative sources with |snr| >= sf_fdr_snr[k] (the catalogue's
 * snr, peak / rms); neg[k] / pos[k] estimates the false fraction there. */
#define SF_FDR_NBINS 8
extern const double sf_fdr_snr[SF_FDR_NBINS];
void sf_run_fdr_add(const sf_run_result *r, long long pos[SF_FDR_NBINS], long long neg[SF_FDR_NBINS]);

#ifdef __cplusplus
}
#endif
#endif
