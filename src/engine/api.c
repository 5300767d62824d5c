/* sf_find and sf_find_file (include/skyfind/skyfind.h): a pipeline run on
 * an array in memory or a FITS plane, its catalogue returned as the CSV
 * writer's columns (src/io/catalog_columns.c), so a program gets what
 * `skyfind run` writes. A header given as text is read by the FITS reader
 * itself: its cards, behind a stub of one pixel, go through
 * sf_fits_read_mem, so BUNIT, the beam (BMAJ or the AIPS HISTORY card) and
 * the WCS are found exactly as in a file. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "skyfind/skyfind.h"
#include "skyfind/catalog.h"
#include "skyfind/fits.h"
#include "skyfind/fits_mem.h"
#include "skyfind/gpu.h"
#include "skyfind/wcs.h"
#include "catalog_columns.h"
#include "fits_internal.h"

struct sf_found {
    sf_run_result r;
    int nrows, ncols;
    sf_cat_col col[SF_CAT_MAXCOL];
    double *val[SF_CAT_MAXCOL];
    char backend[8];
};

/* ---- GPU contexts: one per device, made on first use, kept -------------- */

#define API_MAXDEV 16
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t dev_lock[API_MAXDEV] = {[0 ... API_MAXDEV - 1] = PTHREAD_MUTEX_INITIALIZER};
static sf_gpu *ctx[API_MAXDEV];

static sf_status api_gpu(int dev, sf_gpu **g)
{
    sf_status st = SF_OK;
    pthread_mutex_lock(&ctx_lock);
    if (!ctx[dev])
        st = sf_gpu_create(&ctx[dev], dev);
    *g = ctx[dev];
    pthread_mutex_unlock(&ctx_lock);
    return st;
}

/* ---- the header text, through the FITS reader ---------------------------- */

/* A card of the layout (SIMPLE, BITPIX, NAXISn, BSCALE, ...: the rule that
 * keeps such cards out of skyfind's output images), left out of the stub. */
static int structural(const char *card)
{
    char key[9];
    sf_card_key(card, key);
    return sf_fits_structural(key, card);
}

/* info from the header text: the cards behind SIMPLE/BITPIX/NAXIS of a
 * 1x1 float image, read back by sf_fits_read_mem. */
static sf_status header_info(const char *text, sf_fits_info *info)
{
    static const char *stub[] = {"SIMPLE  =                    T", "BITPIX  =                  -32",
                                 "NAXIS   =                    2", "NAXIS1  =                    1",
                                 "NAXIS2  =                    1"};
    size_t len = text ? strlen(text) : 0, cap, n = 0, pos = 0;
    int lines = text && strchr(text, '\n');
    char *buf;
    sf_image one;
    sf_status st;
    cap = (5 + len / (lines ? 1 : 80) + 2) * 80 / 2880 * 2880 + 2 * 2880;
    if (len > ((size_t)1 << 26) || !(buf = malloc(cap)))
        return sf_fail(SF_ERR_NOMEM, "header: %zu characters", len);
    memset(buf, ' ', cap);
    for (int k = 0; k < 5; k++, n += 80)
        memcpy(buf + n, stub[k], strlen(stub[k]));
    while (pos < len) { /* 80-character cards, or lines when the text has newlines */
        char card[81];
        size_t m = 0;
        memset(card, ' ', 80);
        card[80] = '\0';
        while (pos < len && m < 80 && !(lines && (text[pos] == '\n' || text[pos] == '\r')))
            card[m++] = text[pos++];
        if (lines) /* the rest of a long line, and the line end */
            while (pos < len && text[pos] != '\n')
                pos++;
        if (lines && pos < len)
            pos++;
        if (!strncmp(card, "END     ", 8))
            break;
        if (card[0] == ' ' || structural(card))
            continue;
        memcpy(buf + n, card, 80);
        n += 80;
    }
    memcpy(buf + n, "END", 3);
    n = (n + 80 + 2879) / 2880 * 2880;
    memset(buf + n, 0, 2880); /* the one pixel: 0.0 */
    st = sf_fits_read_mem(buf, n + 2880, "header", -1, &one, info);
    free(buf);
    if (st == SF_OK)
        sf_image_free(&one, NULL);
    return st;
}

/* ---- pixels --------------------------------------------------------------- */

static size_t dt_size(int dt)
{
    switch (dt) {
    case SF_DT_UINT8: case SF_DT_INT8: return 1;
    case SF_DT_UINT16: case SF_DT_INT16: return 2;
    case SF_DT_UINT32: case SF_DT_INT32: case SF_DT_FLOAT32: return 4;
    case SF_DT_UINT64: case SF_DT_INT64: case SF_DT_FLOAT64: return 8;
    default: return 0;
    }
}

static void convert_row(const void *src, int dt, int nx, float *out)
{
#define ROW(T)                                                   \
    for (int x = 0; x < nx; x++)                                 \
        out[x] = sf_pixel_clean((float)(double)((const T *)src)[x]);
    switch (dt) {
    case SF_DT_UINT8: ROW(uint8_t) break;
    case SF_DT_INT8: ROW(int8_t) break;
    case SF_DT_UINT16: ROW(uint16_t) break;
    case SF_DT_INT16: ROW(int16_t) break;
    case SF_DT_UINT32: ROW(uint32_t) break;
    case SF_DT_INT32: ROW(int32_t) break;
    case SF_DT_UINT64: ROW(uint64_t) break;
    case SF_DT_INT64: ROW(int64_t) break;
    case SF_DT_FLOAT32: ROW(float) break;
    default: ROW(double) break;
    }
#undef ROW
}

/* ---- the run -------------------------------------------------------------- */

static sf_status load_pipeline(const sf_find_opts *o, sf_pipeline *pl)
{
    const char *p = o && o->pipeline ? o->pipeline : "radio";
    char path[4096];
    sf_status st;
    if (strchr(p, '\n'))
        st = sf_pipeline_parse(p, "pipeline text", pl);
    else if ((st = sf_pipeline_find(p, path, sizeof path)) == SF_OK)
        st = sf_pipeline_load(path, pl);
    for (int i = 0; st == SF_OK && o && i < o->nset; i++)
        if (!o->set[i])
            st = sf_fail(SF_ERR_PARAM, "set: assignment %d is NULL", i);
        else
            st = sf_pipeline_set(pl, o->set[i]);
    if (st)
        sf_pipeline_free(pl);
    return st;
}

/* img: the pixels on the host; or dsrc (on_gpu), imported on its device. */
static sf_status run(const char *input, const sf_image *img, const sf_array *dsrc,
                     const sf_fits_info *info, const sf_find_opts *o, sf_found **out)
{
    const char *b = o && o->backend ? o->backend : "auto";
    int gpu, ngpu, dev = 0;
    sf_pipeline pl;
    sf_run_opts ro;
    sf_beam_pixels beam;
    sf_found *f;
    const int nx = dsrc ? dsrc->nx : img->nx, ny = dsrc ? dsrc->ny : img->ny;
    sf_status st;
    sf_wcs *w;
    if (strcasecmp(b, "cpu") && strcasecmp(b, "gpu") && strcasecmp(b, "auto"))
        return sf_fail(SF_ERR_PARAM, "backend '%s': cpu, gpu or auto", b);
    ngpu = strcasecmp(b, "cpu") ? sf_gpu_count() : 0;
    gpu = !strcasecmp(b, "gpu") || (!strcasecmp(b, "auto") && ngpu > 0);
    if (!strcasecmp(b, "gpu") && ngpu < 1)
        return sf_fail(SF_ERR_NO_GPU, "no CUDA device found: cannot use backend gpu (use cpu or auto)");
    if (dsrc) {
        if (!gpu)
            return sf_fail(SF_ERR_PARAM, "an image in GPU memory needs backend gpu or auto, not %s", b);
        if ((dev = sf_gpu_pointer_device(dsrc->data)) < 0)
            return sf_fail(SF_ERR_PARAM, "on_gpu is set but the pixels are not in CUDA device memory");
        if (dev >= API_MAXDEV)
            return sf_fail(SF_ERR_PARAM, "the pixels are on CUDA device %d (at most %d)", dev, API_MAXDEV - 1);
    }
    if ((st = load_pipeline(o, &pl)))
        return st;
    if (!(f = calloc(1, sizeof *f))) {
        sf_pipeline_free(&pl);
        return sf_fail(SF_ERR_NOMEM, "sf_find: no memory");
    }
    memset(&ro, 0, sizeof ro);
    ro.backend = gpu ? SF_BACKEND_GPU : SF_BACKEND_CPU;
    ro.keep = o ? o->keep & (SF_KEEP_MASK | SF_KEEP_LABELS | SF_KEEP_BKG | SF_KEEP_FILTERED) : 0;
    if (dsrc) /* the maps of a device image stay on its device */
        ro.keep |= SF_KEEP_DEVICE;
    sf_fits_beam_pixels(info, nx, ny, &beam);
    sf_run_opts_beam(&ro, &beam);
    if (gpu && (st = api_gpu(dev, &ro.gpu)) == SF_OK) {
        sf_image dimg;
        memset(&dimg, 0, sizeof dimg);
        pthread_mutex_lock(&dev_lock[dev]);
        if ((st = sf_gpu_bind(ro.gpu)) == SF_OK && dsrc)
            st = sf_gpu_import_f32(ro.gpu, dsrc->data, dsrc->row_bytes, dsrc->nx, dsrc->ny, &dimg);
        if (st == SF_OK)
            st = sf_pipeline_run(&pl, dsrc ? &dimg : img, &ro, &f->r);
        if (dimg.data)
            sf_image_free(&dimg, ro.gpu);
        pthread_mutex_unlock(&dev_lock[dev]);
    } else if (!gpu) {
        st = sf_pipeline_run(&pl, img, &ro, &f->r);
    }
    snprintf(f->backend, sizeof f->backend, "%s", gpu ? "gpu" : "cpu");
    if (st == SF_OK) { /* the CSV writer's columns and values */
        sf_catalog_meta m;
        w = f->r.nsources >= 0 ? sf_wcs_open(info, nx, ny) : NULL;
        sf_catalog_meta_init(&m, input, pl.name, f->backend, info, &f->r, w);
        f->nrows = f->r.nsources > 0 ? f->r.nsources : 0;
        f->ncols = sf_cat_columns(&m, f->col);
        for (int j = 0; j < f->ncols && st == SF_OK; j++)
            if (!(f->val[j] = malloc(((size_t)f->nrows + 1) * sizeof(double))))
                st = sf_fail(SF_ERR_NOMEM, "sf_find: %d rows", f->nrows);
        for (int i = 0; i < f->nrows && st == SF_OK; i++) {
            sf_cat_row row = sf_cat_row_of(&f->r.sources[i], &m);
            for (int j = 0; j < f->ncols; j++)
                f->val[j][i] = f->col[j].get(&row);
        }
        sf_wcs_close(w);
    }
    sf_pipeline_free(&pl);
    if (st) {
        sf_found_free(f);
        return st;
    }
    *out = f;
    return SF_OK;
}

sf_status sf_find(const sf_array *a, const sf_find_opts *o, sf_found **out)
{
    size_t es;
    sf_image img;
    sf_fits_info info;
    sf_status st;
    *out = NULL;
    sf_fits_threads_init(); /* CFITSIO's lazy set-up, once, before threads read headers */
    if (!a || !a->data)
        return sf_fail(SF_ERR_PARAM, "sf_find: no pixels");
    if (!(es = dt_size(a->dtype)))
        return sf_fail(SF_ERR_PARAM, "sf_find: pixel type %d is not one of sf_dtype", a->dtype);
    if (a->nx < 1 || a->ny < 1)
        return sf_fail(SF_ERR_PARAM, "sf_find: the image is %d x %d pixels", a->nx, a->ny);
    if (a->row_bytes < (long long)(es * (size_t)a->nx))
        return sf_fail(SF_ERR_PARAM, "sf_find: rows of %lld bytes hold fewer than %d pixels of %zu bytes",
                       a->row_bytes, a->nx, es);
    if (a->on_gpu && a->dtype != SF_DT_FLOAT32)
        return sf_fail(SF_ERR_PARAM, "sf_find: an image in GPU memory must be float32 (convert it on "
                       "the GPU first)");
    if ((st = header_info(a->header, &info)))
        return st;
    if (a->on_gpu) {
        st = run("array", NULL, a, &info, o, out);
        sf_fits_info_free(&info);
        return st;
    }
    if ((st = sf_image_alloc(&img, a->nx, a->ny, SF_HOST, NULL))) {
        sf_fits_info_free(&info);
        return st;
    }
    for (int y = 0; y < a->ny; y++)
        convert_row((const char *)a->data + (size_t)y * (size_t)a->row_bytes, a->dtype, a->nx,
                    img.data + (size_t)y * img.stride);
    st = run("array", &img, NULL, &info, o, out);
    sf_image_free(&img, NULL);
    sf_fits_info_free(&info);
    return st;
}

sf_status sf_find_file(const char *path, int plane, const sf_find_opts *o, sf_found **out)
{
    sf_image img;
    sf_fits_info info;
    sf_status st;
    *out = NULL;
    sf_fits_threads_init();
    if (!path)
        return sf_fail(SF_ERR_PARAM, "sf_find_file: no path");
    if (plane < 0)
        return sf_fail(SF_ERR_PARAM, "%s: plane %d (1-based; 0 for the first)", path, plane);
    if ((st = sf_fits_read(path, plane ? plane - 1 : -1, NULL, &img, &info)))
        return st;
    st = run(path, &img, NULL, &info, o, out);
    sf_image_free(&img, NULL);
    sf_fits_info_free(&info);
    return st;
}

int sf_found_nrows(const sf_found *f) { return f ? f->nrows : 0; }
int sf_found_ncols(const sf_found *f) { return f ? f->ncols : 0; }

const char *sf_found_colname(const sf_found *f, int j)
{
    return f && j >= 0 && j < f->ncols ? f->col[j].name : NULL;
}

const char *sf_found_colunit(const sf_found *f, int j)
{
    return f && j >= 0 && j < f->ncols ? f->col[j].unit : NULL;
}

const char *sf_found_colfmt(const sf_found *f, int j)
{
    return f && j >= 0 && j < f->ncols ? f->col[j].fmt : NULL;
}

int sf_found_colint(const sf_found *f, int j)
{
    return f && j >= 0 && j < f->ncols && f->col[j].type != SF_COL_REAL;
}

const double *sf_found_column(const sf_found *f, int j)
{
    return f && j >= 0 && j < f->ncols ? f->val[j] : NULL;
}

const char *sf_found_backend(const sf_found *f) { return f ? f->backend : NULL; }

double sf_found_stat(const sf_found *f, const char *key)
{
    double sum = 0;
    if (!f || !key)
        return NAN;
    if (!strcmp(key, "h2d_bytes"))
        return (double)f->r.h2d;
    if (!strcmp(key, "d2h_bytes"))
        return (double)f->r.d2h;
    if (!strcmp(key, "total_ms"))
        return f->r.total_ms;
    if (!strcmp(key, "upload_ms"))
        return f->r.upload_ms;
    if (strcmp(key, "stages_ms"))
        return NAN;
    for (int i = 0; i < f->r.nstages; i++)
        sum += f->r.stage_ms[i];
    return sum;
}
const sf_run_result *sf_found_result(const sf_found *f) { return f ? &f->r : NULL; }

int sf_found_nstages(const sf_found *f) { return f ? f->r.nstages : 0; }

const char *sf_found_stage(const sf_found *f, int i, double *ms)
{
    if (!f || i < 0 || i >= f->r.nstages)
        return NULL;
    if (ms)
        *ms = f->r.stage_ms[i];
    return f->r.stage[i];
}

const void *sf_found_map(const sf_found *f, const char *name, int *nx, int *ny,
                         long long *row_bytes, int *dtype, int *on_gpu)
{
    const void *p = NULL;
    size_t stride = 0, es = 4;
    int t = SF_DT_FLOAT32, w = 0, h = 0;
    if (!f || !name)
        return NULL;
#define MAP(n, field, type, size)                                                            \
    if (!strcmp(name, n) && f->r.field.data) {                                               \
        p = f->r.field.data;                                                                 \
        w = f->r.field.nx;                                                                   \
        h = f->r.field.ny;                                                                   \
        stride = f->r.field.stride;                                                          \
        t = type;                                                                            \
        es = size;                                                                           \
    }
    MAP("background", bkgmap, SF_DT_FLOAT32, 4)
    MAP("rms", rmsmap, SF_DT_FLOAT32, 4)
    MAP("filtered", filtered, SF_DT_FLOAT32, 4)
    MAP("segmentation", labels, SF_DT_INT32, 4)
    MAP("mask", mask, SF_DT_UINT8, 1)
#undef MAP
    if (!p)
        return NULL;
    if (nx)
        *nx = w;
    if (ny)
        *ny = h;
    if (row_bytes)
        *row_bytes = (long long)(stride * es);
    if (dtype)
        *dtype = t;
    if (on_gpu)
        *on_gpu = f->r.maps_gpu != NULL;
    return p;
}

void sf_found_free(sf_found *f)
{
    if (!f)
        return;
    for (int j = 0; j < f->ncols; j++)
        free(f->val[j]);
    sf_run_result_free(&f->r);
    free(f);
}
