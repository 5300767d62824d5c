/* The pipeline runner: allocates a run's buffers once, runs each step on
 * one backend and, on the GPU, keeps every intermediate on the device:
 * the image goes up once and only the catalogue (and whatever the caller
 * asked to keep) comes back. Times each stage and counts bytes moved.
 * The GPU's BANE maps may be left as node grids by the background stage
 * (state.h, maps_pending): each stage that reads them makes them first
 * (sf_state_maps; the threshold stage in its own pass), and so do the
 * negative pass's inversion and collect, for maps the caller keeps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "state.h"
#include "skyfind/gpu.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* GPU buffers belong to the context (sf_gpu_buffer), kept for the next run;
 * host buffers of a CPU run are freed here. */
static void state_free(sf_state *s)
{
    sf_state_drop_deblend(s); /* host memory on both backends */
    sf_state_drop_fit(s);
    sf_state_drop_view(s);
    if (s->backend == SF_BACKEND_GPU) {
        memset(s, 0, sizeof *s);
        return;
    }
    sf_image_free(&s->bkgmap, NULL);
    sf_image_free(&s->rmsmap, NULL);
    sf_image_free(&s->filt, NULL);
    sf_mask_free(&s->mask, NULL);
    sf_labels_free(&s->labels, NULL);
    free(s->sources);
    s->sources = NULL;
}

/* One of the context's kept device buffers as an image, mask or label map. */
#define SF_DEFINE_DEVBUF(type, fn, elem)                                                \
    static sf_status fn(sf_gpu *g, int slot, int nx, int ny, type *b)                    \
    {                                                                                    \
        void *p = NULL;                                                                  \
        sf_status st = sf_gpu_buffer(g, slot, sf_npix(nx, ny) * sizeof(elem), &p);       \
        if (st)                                                                          \
            return st;                                                                   \
        b->nx = nx;                                                                      \
        b->ny = ny;                                                                      \
        b->stride = (size_t)nx;                                                          \
        b->data = (elem *)p;                                                             \
        b->loc = SF_DEVICE;                                                              \
        return SF_OK;                                                                    \
    }
SF_DEFINE_DEVBUF(sf_image, devbuf_image, float)
SF_DEFINE_DEVBUF(sf_mask, devbuf_mask, uint8_t)
SF_DEFINE_DEVBUF(sf_labels, devbuf_labels, int32_t)
#undef SF_DEFINE_DEVBUF

void sf_run_result_free(sf_run_result *r)
{
    free(r->sources);
    free(r->comps);
    sf_mask_free(&r->mask, r->maps_gpu);
    sf_labels_free(&r->labels, r->maps_gpu);
    sf_image_free(&r->bkgmap, r->maps_gpu);
    sf_image_free(&r->rmsmap, r->maps_gpu);
    sf_image_free(&r->filtered, r->maps_gpu);
    memset(r, 0, sizeof *r);
}

static unsigned pipeline_gives(const sf_pipeline *pl)
{
    unsigned g = SF_DATA_IMAGE;
    for (int i = 0; i < pl->nsteps; i++)
        g |= pl->steps[i].def->gives;
    return g;
}

/* Scratch the GPU steps need, reserved once before the run. Two needs are
 * known only when their stage runs, and grow the scratch then: convolve's
 * FFT buffers (its kernel comes from the header's beam) and measure's
 * per-source accumulators (the number of islands). */
static size_t gpu_scratch_need(const sf_pipeline *pl, int nx, int ny)
{
    size_t need = 0, b;
    for (int i = 0; i < pl->nsteps; i++) {
        const char *n = pl->steps[i].def->name;
        b = 0;
        if (!strcmp(n, "background"))
            b = sf_background_gpu_scratch(nx, ny, pl->steps[i].params);
        else if (!strcmp(n, "segment"))
            b = sf_segment_gpu_scratch(nx, ny, pl->steps[i].params);
        if (b > need)
            need = b;
    }
    return need;
}

static sf_status alloc_state(sf_state *s, const sf_pipeline *pl, const sf_image *img,
                             const sf_run_opts *o)
{
    sf_status st = SF_OK;
    unsigned gives = pipeline_gives(pl);
    sf_gpu *g = o->backend == SF_BACKEND_GPU ? o->gpu : NULL;
    int nx = img->nx, ny = img->ny;
    if (gives & SF_DATA_MASK)
        if ((st = g ? devbuf_mask(g, SF_GBUF_MASK, nx, ny, &s->mask)
                    : sf_mask_alloc(&s->mask, nx, ny, SF_HOST, NULL)))
            return st;
    if (gives & SF_DATA_LABELS)
        if ((st = g ? devbuf_labels(g, SF_GBUF_LABELS, nx, ny, &s->labels)
                    : sf_labels_alloc(&s->labels, nx, ny, SF_HOST, NULL)))
            return st;
    if (gives & SF_DATA_FILTERED)
        if ((st = g ? devbuf_image(g, SF_GBUF_FILT, nx, ny, &s->filt)
                    : sf_image_alloc(&s->filt, nx, ny, SF_HOST, NULL)))
            return st;
    int mesh = 0;
    for (int i = 0; i < pl->nsteps; i++)
        if (!strcmp(pl->steps[i].def->name, "background") &&
            ((const sf_bkg_params *)pl->steps[i].params)->method != SF_BKG_GLOBAL)
            mesh = 1;
    if ((gives & SF_DATA_BKG) && ((o->keep & SF_KEEP_BKG) || mesh)) {
        if ((st = g ? devbuf_image(g, SF_GBUF_BKG, nx, ny, &s->bkgmap)
                    : sf_image_alloc(&s->bkgmap, nx, ny, SF_HOST, NULL)))
            return st;
        if ((st = g ? devbuf_image(g, SF_GBUF_RMS, nx, ny, &s->rmsmap)
                    : sf_image_alloc(&s->rmsmap, nx, ny, SF_HOST, NULL)))
            return st;
    }
    if (g)
        st = sf_gpu_reserve(g, gpu_scratch_need(pl, nx, ny));
    return st;
}

/* Bring back what the caller keeps, and the catalogue. */
static sf_status collect(sf_state *s, const sf_run_opts *o, sf_run_result *r)
{
    sf_status st = SF_OK;
    int gpu = o->backend == SF_BACKEND_GPU;
    /* kept maps the background stage left as node grids (no stage read them) */
    if ((o->keep & SF_KEEP_BKG) && (st = sf_state_maps(s)))
        return st;
    r->have_bkg = !!(s->have & SF_DATA_BKG);
    r->bkg = s->bkg;
    r->nlabels = s->nlabels;
    r->nislands = s->db_nchild ? s->db_nislands : s->nlabels;
    r->nsplit = r->nsplit_objects = 0;
    r->deblend_host = s->db_host;
    for (int j = 1; s->db_nchild && j <= s->db_nislands; j++)
        if (s->db_nchild[j] > 1) {
            r->nsplit++;
            r->nsplit_objects += s->db_nchild[j];
        }
    r->box = s->box;
    r->have_filtered = s->have_filt;
    r->filter_sum = s->filt_sum;
    r->filter_gain = s->filt_gain;
    snprintf(r->filter_desc, sizeof r->filter_desc, "%s", s->filt_desc);
    r->nsources = (s->have & SF_DATA_SOURCES) ? s->nsources : -1;
    if (r->nsources >= 0) {
        r->sources = malloc(((size_t)r->nsources + 1) * sizeof(sf_source));
        if (!r->sources)
            return sf_fail(SF_ERR_NOMEM, "catalogue of %d sources", r->nsources);
        if (gpu && r->nsources > 0)
            st = sf_gpu_to_host(o->gpu, r->sources, s->sources, (size_t)r->nsources * sizeof(sf_source));
        else if (r->nsources > 0)
            memcpy(r->sources, s->sources, (size_t)r->nsources * sizeof(sf_source));
        if (st)
            return st;
        if (s->db_parent) /* a deblend stage: each object's island */
            for (int i = 0; i < r->nsources; i++) {
                sf_source *o = &r->sources[i];
                int isl = o->id >= 1 && o->id <= r->nsources ? s->db_parent[o->id] : 0;
                o->parent = isl;
                o->nchildren = isl >= 1 && isl <= s->db_nislands ? s->db_nchild[isl] : 0;
                if (o->nchildren > 1)
                    o->flags |= SF_SRC_DEBLENDED;
            }
    }
    /* the fitted components (host memory on both backends), handed over */
    r->ncomps = (s->have & SF_DATA_COMPONENTS) ? s->ncomps : -1;
    if (r->ncomps >= 0) {
        if (!s->comps) { /* the GPU's, down now (not inside the fit stage); none: an empty table */
            r->comps = malloc(((size_t)r->ncomps + 1) * sizeof *r->comps);
            if (!r->comps)
                return sf_fail(SF_ERR_NOMEM, "%d fitted components", r->ncomps);
            if (r->ncomps > 0 && (st = sf_gpu_to_host(o->gpu, r->comps, s->comps_dev,
                                                      (size_t)r->ncomps * sizeof *r->comps)))
                return st;
            s->comps_dev = NULL;
        } else {
            r->comps = s->comps;
            s->comps = NULL;
        }
        s->ncomps = 0;
        if (s->db_nchild)
            for (int i = 0; i < r->ncomps; i++) {
                const int k = r->comps[i].island;
                if (k >= 1 && k <= s->db_nislands && s->db_nchild[k] > 1)
                    r->comps[i].flags |= SF_SRC_DEBLENDED;
            }
    }
    /* kept maps: host copies, or (SF_KEEP_DEVICE on the GPU) device copies */
    const int dev = gpu && (o->keep & SF_KEEP_DEVICE);
    if (dev)
        r->maps_gpu = o->gpu;
#define KEEP(flag, have, field, src, kind)                                                    \
    if ((o->keep & flag) && (have)) {                                                         \
        size_t nb = sf_npix(s->img.nx, s->img.ny) * sizeof *r->field.data;                    \
        if ((st = sf_##kind##_alloc(&r->field, s->img.nx, s->img.ny, dev ? SF_DEVICE : SF_HOST, \
                                    dev ? o->gpu : NULL)))                                    \
            return st;                                                                        \
        if (dev)                                                                              \
            st = sf_gpu_copy(o->gpu, r->field.data, s->src.data, nb);                         \
        else if (gpu)                                                                         \
            st = sf_##kind##_download(o->gpu, &s->src, &r->field);                            \
        else                                                                                  \
            memcpy(r->field.data, s->src.data, nb);                                           \
        if (st)                                                                               \
            return st;                                                                        \
    }
    KEEP(SF_KEEP_MASK, s->have & SF_DATA_MASK, mask, mask, mask)
    KEEP(SF_KEEP_LABELS, s->have & SF_DATA_LABELS, labels, labels, labels)
    KEEP(SF_KEEP_FILTERED, s->have_filt, filtered, filt, image)
    if (s->bkgmap.data) {
        KEEP(SF_KEEP_BKG, s->have & SF_DATA_BKG, bkgmap, bkgmap, image)
        KEEP(SF_KEEP_BKG, s->have & SF_DATA_BKG, rmsmap, rmsmap, image)
    }
#undef KEEP
    r->have_mask = r->mask.data != NULL;
    r->have_labels = r->labels.data != NULL;
    return SF_OK;
}

/* Run steps [from, to); each stage's time is added to its step's slot (the
 * negative pass of threshold sign=both runs the later steps again). On the
 * GPU an event marks each stage's end without waiting for it (a wait at
 * every stage's end left the GPU idle while the host woke and queued the
 * next stage's first launches); the times are read after the last. */
static sf_status run_steps(sf_state *s, const sf_pipeline *pl, int from, int to, int gpu,
                           sf_gpu_timer *timer, sf_run_result *r)
{
    sf_status st;
    if (gpu && (st = sf_gpu_timer_mark(timer, from)))
        return st;
    for (int i = from; i < to; i++) {
        const sf_pipe_step *step = &pl->steps[i];
        double w = now_ms();
        st = gpu ? step->def->gpu(s, step->params) : step->def->cpu(s, step->params);
        if (st) {
            sf_errcontext("stage %s (%s)%s", step->def->name, gpu ? "gpu" : "cpu",
                          s->negated ? ", negative detections" : "");
            return st;
        }
        if (gpu && (st = sf_gpu_timer_mark(timer, i + 1)))
            return st;
        r->stage[i] = step->def->name;
        if (!gpu)
            r->stage_ms[i] += now_ms() - w;
        if (r->nstages < i + 1)
            r->nstages = i + 1;
    }
    for (int i = from; gpu && i < to; i++) {
        double ms = 0;
        if ((st = sf_gpu_timer_between(timer, i, i + 1, &ms)))
            return st;
        r->stage_ms[i] += ms;
    }
    return SF_OK;
}

/* The first threshold step and its sign parameter (-1 and POSITIVE without one). */
static int threshold_step(const sf_pipeline *pl, int *sign)
{
    *sign = SF_SIGN_POSITIVE;
    for (int i = 0; i < pl->nsteps; i++)
        if (!strcmp(pl->steps[i].def->name, "threshold")) {
            *sign = ((const sf_thresh_params *)pl->steps[i].params)->sign;
            return i;
        }
    return -1;
}

/* Invert what the steps after the background read (the image, the filtered
 * image, the background map and level; the noise stays): the negative pass
 * detects and measures the inverted image. Exact and undone by a second call.
 * On the CPU the caller's image is not written: a negated copy (own) is. */
static sf_status flip_state(sf_state *s, const sf_image *orig, sf_image *own)
{
    sf_status st = sf_state_maps(s); /* the maps of the image before it is inverted */
    sf_gpu *g = s->backend == SF_BACKEND_GPU ? s->g : NULL;
    if (st)
        return st;
    if (g) {
        if ((st = sf_image_negate(g, &s->img)))
            return st;
    } else if (!s->negated) {
        if (!own->data) {
            if ((st = sf_image_alloc(own, orig->nx, orig->ny, SF_HOST, NULL)))
                return st;
            for (int y = 0; y < orig->ny; y++) { /* copied and negated in one pass */
                const float *a = orig->data + (size_t)y * orig->stride;
                float *b = own->data + (size_t)y * own->stride;
                for (int x = 0; x < orig->nx; x++)
                    b[x] = -a[x];
            }
        }
        s->img = *own;
    } else {
        s->img = *orig;
    }
    if (s->have_filt && (st = sf_image_negate(g, &s->filt)))
        return st;
    if (s->have_maps && (st = sf_image_negate(g, &s->bkgmap)))
        return st;
    s->bkg.median = -s->bkg.median;
    s->bkg.mean = -s->bkg.mean;
    s->negated = !s->negated;
    return SF_OK;
}

/* Forget a pass's detections before the next one. */
static void drop_detections(sf_state *s)
{
    s->have &= ~(unsigned)(SF_DATA_MASK | SF_DATA_LABELS | SF_DATA_SOURCES | SF_DATA_COMPONENTS);
    sf_state_drop_deblend(s);
    sf_state_drop_fit(s);
    s->nlabels = s->nsources = 0;
    s->labels_in_mask = 0;
}

/* The kept maps of r (host copies) moved to the device of g: after the
 * negative pass of threshold sign=negative|both, whose masks and labels are
 * merged on the host. The uploads count in the run's bytes. */
static sf_status maps_to_device(sf_run_result *r, sf_gpu *g)
{
    sf_status st = SF_OK;
#define TODEV(field, kind)                                                                  \
    if (r->field.data && st == SF_OK) {                                                    \
        __typeof__(r->field) d;                                                            \
        memset(&d, 0, sizeof d);                                                           \
        if ((st = sf_##kind##_alloc(&d, r->field.nx, r->field.ny, SF_DEVICE, g)) == SF_OK &&  \
            (st = sf_##kind##_upload(g, &r->field, &d)) == SF_OK) {                        \
            sf_##kind##_free(&r->field, NULL);                                             \
            r->field = d;                                                                  \
        } else {                                                                           \
            sf_##kind##_free(&d, g);                                                       \
        }                                                                                  \
    }
    TODEV(mask, mask)
    TODEV(labels, labels)
    TODEV(bkgmap, image)
    TODEV(rmsmap, image)
    TODEV(filtered, image)
#undef TODEV
    /* a mix of host and device maps cannot be freed: on failure, none is kept */
    if (st) {
        for (int dev = 0; dev < 2; dev++) {
            sf_gpu *h = dev ? g : NULL;
#define DROP(field, kind)                                                                   \
    if (r->field.data && (r->field.loc == SF_DEVICE) == dev)                               \
        sf_##kind##_free(&r->field, h);
            DROP(mask, mask) DROP(labels, labels) DROP(bkgmap, image) DROP(rmsmap, image) DROP(filtered, image)
#undef DROP
        }
        r->have_mask = r->have_labels = 0;
        return st;
    }
    r->maps_gpu = g;
    return SF_OK;
}

/* Pixels set in the mask, where it is on the host (the CPU, or a kept GPU
 * mask); -1 for a GPU mask left on the device. */
static long long count_mask(const sf_state *s, const sf_run_result *r, int gpu)
{
    const uint8_t *m = r->have_mask && !r->maps_gpu ? r->mask.data : gpu ? NULL : s->mask.data;
    const long long n = (long long)sf_npix(s->img.nx, s->img.ny);
    long long c = 0;
    if (!(s->have & SF_DATA_MASK))
        return 0;
    if (!m)
        return -1;
    /* on all threads, 64K bytes a chunk counted in a 32-bit counter (which
     * the compiler vectorises): on one thread this pass took 10-15 ms of a
     * CPU run at 8192^2 on the H100 machine, outside every stage's time;
     * on its 16 cores 1.1-1.5 ms */
#pragma omp parallel for schedule(static) reduction(+ : c)
    for (long long k0 = 0; k0 < n; k0 += 65536) {
        const long long k1 = k0 + 65536 < n ? k0 + 65536 : n;
        unsigned part = 0;
        for (long long k = k0; k < k1; k++)
            part += m[k] != 0;
        c += part;
    }
    return c;
}

const double sf_fdr_snr[SF_FDR_NBINS] = {3, 4, 5, 6, 7, 8, 10, 20};

void sf_run_fdr_add(const sf_run_result *r, long long pos[SF_FDR_NBINS], long long neg[SF_FDR_NBINS])
{
    for (int i = 0; i < r->nsources; i++) {
        const sf_source *q = &r->sources[i];
        double a = fabs(q->snr);
        for (int k = 0; k < SF_FDR_NBINS && a >= sf_fdr_snr[k]; k++) /* NaN counts nowhere */
            (q->sign < 0 ? neg : pos)[k]++;
    }
}

static void neg_flip(double *v) { if (*v == *v) *v = -*v; }
static void neg_flipf(float *v) { if (*v == *v) *v = -*v; }

/* The negative pass's result n, measured on the inverted image, into r:
 * its sources with sign -1, negative id and parent, and the image's signs of
 * flux_sum, peak, snr and bkg; its mask in bits 2-3 (4 seed, 8 flood) and its
 * labels as -id in the kept maps; its counts added. r may be empty
 * (sign=negative), then it takes n's maps and background as they are. */
static sf_status merge_negative(sf_run_result *r, sf_run_result *n, int have_pos)
{
    for (int i = 0; i < n->nsources; i++) {
        sf_source *q = &n->sources[i];
        q->sign = -1;
        q->id = -q->id;
        q->parent = -q->parent;
        neg_flip(&q->flux_sum);
        neg_flip(&q->snr);
        neg_flipf(&q->peak);
        neg_flipf(&q->bkg);
    }
    for (int i = 0; i < n->ncomps; i++) {
        sf_component *c = &n->comps[i];
        c->sign = -1;
        c->island = -c->island;
        c->source = -c->source;
        neg_flip(&c->peak);
        neg_flip(&c->flux);
        neg_flipf(&c->bkg);
    }
    if (n->have_mask)
        for (size_t k = 0; k < sf_npix(n->nx, n->ny); k++)
            n->mask.data[k] = (uint8_t)(n->mask.data[k] << 2);
    if (n->have_labels)
        for (size_t k = 0; k < sf_npix(n->nx, n->ny); k++)
            n->labels.data[k] = -n->labels.data[k];
    if (!have_pos) {
        sf_run_result keep = *r; /* the timings, byte counts and pass totals of r */
        *r = *n;
        memset(n, 0, sizeof *n);
        r->nstages = keep.nstages;
        memcpy(r->stage, keep.stage, sizeof r->stage);
        memcpy(r->stage_ms, keep.stage_ms, sizeof r->stage_ms);
        r->upload_ms = keep.upload_ms;
        r->nneg = r->nsources;
        return SF_OK;
    }
    if (n->nsources > 0) {
        sf_source *all = realloc(r->sources, ((size_t)r->nsources + n->nsources + 1) * sizeof *all);
        if (!all)
            return sf_fail(SF_ERR_NOMEM, "catalogue of %d sources", r->nsources + n->nsources);
        memcpy(all + r->nsources, n->sources, (size_t)n->nsources * sizeof *all);
        r->sources = all;
        r->nsources += n->nsources;
    }
    r->nneg = n->nsources;
    if (n->ncomps > 0) {
        sf_component *all = realloc(r->comps, ((size_t)(r->ncomps > 0 ? r->ncomps : 0) + n->ncomps + 1) * sizeof *all);
        if (!all)
            return sf_fail(SF_ERR_NOMEM, "%d components", r->ncomps + n->ncomps);
        memcpy(all + (r->ncomps > 0 ? r->ncomps : 0), n->comps, (size_t)n->ncomps * sizeof *all);
        r->comps = all;
        r->ncomps = (r->ncomps > 0 ? r->ncomps : 0) + n->ncomps;
    }
    if (r->have_mask && n->have_mask)
        for (size_t k = 0; k < sf_npix(r->nx, r->ny); k++)
            r->mask.data[k] |= n->mask.data[k];
    if (r->have_labels && n->have_labels)
        for (size_t k = 0; k < sf_npix(r->nx, r->ny); k++)
            if (n->labels.data[k])
                r->labels.data[k] = n->labels.data[k];
    r->nlabels += n->nlabels;
    r->nislands += n->nislands;
    r->nsplit += n->nsplit;
    r->nsplit_objects += n->nsplit_objects;
    r->deblend_host |= n->deblend_host;
    r->nmask = r->nmask < 0 || n->nmask < 0 ? -1 : r->nmask + n->nmask;
    return SF_OK;
}

sf_status sf_pipeline_run(const sf_pipeline *pl, const sf_image *img, const sf_run_opts *o,
                          sf_run_result *r)
{
    sf_status st = SF_OK;
    sf_state s;
    sf_gpu_timer *timer = NULL;
    int gpu = o->backend == SF_BACKEND_GPU;
    uint64_t h0 = 0, d0 = 0, h1, d1;
    double t0 = now_ms();
    int ithr, sign, uploaded = 0;
    sf_image own; /* the CPU's negated copy of the image (negative pass) */

    memset(&own, 0, sizeof own);
    memset(&s, 0, sizeof s);
    memset(r, 0, sizeof *r);
    r->nsources = -1;
    r->ncomps = -1;
    r->nx = img->nx;
    r->ny = img->ny;
    if (img->loc != SF_HOST && !(gpu && img->loc == SF_DEVICE))
        return sf_fail(SF_ERR_INTERNAL, "sf_pipeline_run: a device image needs the GPU backend");
    s.backend = o->backend;
    s.g = o->gpu;
    s.beam_pix = o->beam_pix;
    s.beam_min_pix = o->beam_min_pix;
    s.beam_pa_deg = o->beam_pa_deg;
    s.pix_arcsec = o->pix_arcsec;
    if (gpu) {
        if (!o->gpu)
            return sf_fail(SF_ERR_NO_GPU, "GPU backend without a GPU context");
        sf_gpu_bytes(o->gpu, &h0, &d0);
        if ((st = sf_gpu_timer_create(o->gpu, &timer)) ||
            (st = sf_gpu_timer_marks(timer, pl->nsteps + 1)))
            goto fail;
    }
    if ((st = alloc_state(&s, pl, img, o)))
        goto fail;
    if (gpu && img->loc == SF_DEVICE) {
        s.img = *img; /* already on the device (the batch engine decoded it there) */
    } else if (gpu) {
        if ((st = devbuf_image(o->gpu, SF_GBUF_IMAGE, img->nx, img->ny, &s.img)))
            goto fail;
        /* the upload's time is read after the stages: a wait for it here
         * left the GPU idle while the host woke and queued the first stage */
        if ((st = sf_gpu_timer_start(timer)) || (st = sf_image_upload(o->gpu, img, &s.img)) ||
            (st = sf_gpu_timer_lap(timer)))
            goto fail;
        uploaded = 1;
    } else {
        s.img = *img;
    }
    s.have = SF_DATA_IMAGE;
    ithr = threshold_step(pl, &sign);
    if (ithr < 0 || sign == SF_SIGN_POSITIVE) {
        if ((st = run_steps(&s, pl, 0, pl->nsteps, gpu, timer, r)) || (st = collect(&s, o, r)))
            goto fail;
        r->nmask = count_mask(&s, r, gpu);
    } else {
        /* threshold sign=negative|both: the steps from threshold on run on
         * the image (both) and then on the inverted image; the two passes'
         * maps are merged on the host (and moved to the device after, if
         * asked: SF_KEEP_DEVICE) */
        sf_run_result n;
        sf_run_opts oh = *o;
        oh.keep &= ~(unsigned)SF_KEEP_DEVICE;
        memset(&n, 0, sizeof n);
        if ((st = run_steps(&s, pl, 0, ithr, gpu, timer, r)))
            goto fail;
        if (sign == SF_SIGN_BOTH) {
            if ((st = run_steps(&s, pl, ithr, pl->nsteps, gpu, timer, r)) || (st = collect(&s, &oh, r)))
                goto fail;
            r->nmask = count_mask(&s, r, gpu);
            drop_detections(&s);
        }
        if ((st = flip_state(&s, img, &own)) || (st = run_steps(&s, pl, ithr, pl->nsteps, gpu, timer, r)) ||
            (st = flip_state(&s, img, &own)))
            goto fail;
        n.nx = r->nx;
        n.ny = r->ny;
        if ((st = collect(&s, &oh, &n))) {
            sf_run_result_free(&n);
            goto fail;
        }
        n.nmask = count_mask(&s, &n, gpu);
        st = merge_negative(r, &n, sign == SF_SIGN_BOTH);
        sf_run_result_free(&n);
        if (st)
            goto fail;
        if (gpu && (o->keep & SF_KEEP_DEVICE) && (st = maps_to_device(r, o->gpu)))
            goto fail;
    }
    if (uploaded && (st = sf_gpu_timer_read(timer, &r->upload_ms)))
        goto fail;
    r->sign = ithr < 0 ? SF_SIGN_POSITIVE : sign;
    r->total_ms = now_ms() - t0;
    if (gpu) {
        sf_gpu_bytes(o->gpu, &h1, &d1);
        r->h2d = h1 - h0;
        r->d2h = d1 - d0;
    }
    state_free(&s);
    sf_image_free(&own, NULL);
    sf_gpu_timer_destroy(timer);
    return SF_OK;
fail:
    {
        sf_status keep = st;
        char detail[1024];
        snprintf(detail, sizeof detail, "%s", sf_errdetail());
        if (s.negated && gpu) /* the caller's device image (the batch engine's) back as it was */
            (void)sf_image_negate(o->gpu, &s.img);
        state_free(&s);
        sf_image_free(&own, NULL);
        sf_gpu_timer_destroy(timer);
        sf_run_result_free(r);
        sf_fail(keep, "%s", detail);
        return keep;
    }
}
