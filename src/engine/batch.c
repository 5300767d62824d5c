/* The batch engine (include/skyfind/batch.h): reader threads -> a bounded
 * pool of host buffers (pinned by the uploader once reused) -> per GPU an uploader thread
 * (copy lane, a few device slots ahead) and a compute thread (decode on the
 * device, then sf_pipeline_run), or N CPU workers (4-byte pixels decoded in
 * the pool's buffer itself, run_cpu) -> writer threads (the
 * catalogues, check images and markers of different images at once).
 * Memory is bounded by the pool (opts.queue buffers) and the device slots,
 * whatever the number of files. In this file, in order: a bounded queue; the
 * engine's state, the buffer pool and the readers; the CPU workers; the GPU
 * workers (uploader, compute thread, the retirement of a GPU after a sticky
 * error, the pinner); the writers and the statistics; the serial path
 * (--no-overlap, and one image on the CPU); sf_batch_run, which sizes and
 * starts all of it. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "skyfind/batch.h"
#include "skyfind/gpu.h"

#define SLOTS 3 /* device raw slots per GPU: the upload runs up to two images ahead */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- a bounded queue of pointers ------------------------------------------ */

typedef struct {
    void **v;
    int cap, head, n, closed;
    pthread_mutex_t m;
    pthread_cond_t can_pop, can_push;
} bq;

static int bq_init(bq *q, int cap)
{
    memset(q, 0, sizeof *q);
    q->v = calloc((size_t)cap, sizeof *q->v);
    q->cap = cap;
    pthread_mutex_init(&q->m, NULL);
    pthread_cond_init(&q->can_pop, NULL);
    pthread_cond_init(&q->can_push, NULL);
    return q->v ? 0 : -1;
}

static void bq_free(bq *q)
{
    free(q->v);
    pthread_mutex_destroy(&q->m);
    pthread_cond_destroy(&q->can_pop);
    pthread_cond_destroy(&q->can_push);
}

static void bq_push(bq *q, void *p)
{
    pthread_mutex_lock(&q->m);
    while (q->n == q->cap)
        pthread_cond_wait(&q->can_push, &q->m);
    q->v[(q->head + q->n) % q->cap] = p;
    q->n++;
    pthread_cond_signal(&q->can_pop);
    pthread_mutex_unlock(&q->m);
}

/* NULL once the queue is closed and empty. */
static void *bq_pop(bq *q)
{
    void *p = NULL;
    pthread_mutex_lock(&q->m);
    while (q->n == 0 && !q->closed)
        pthread_cond_wait(&q->can_pop, &q->m);
    if (q->n) {
        p = q->v[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
        pthread_cond_signal(&q->can_push);
    }
    pthread_mutex_unlock(&q->m);
    return p;
}

static void bq_close(bq *q)
{
    pthread_mutex_lock(&q->m);
    q->closed = 1;
    pthread_cond_broadcast(&q->can_pop);
    pthread_mutex_unlock(&q->m);
}

/* ---- the engine ------------------------------------------------------------ */

typedef struct {
    sf_batch_item it;
    sf_beam_pixels beam; /* the beam in pixels (read with the header, off the GPU's thread) */
    int pb;         /* pool buffer holding the pixels, -1 when released */
    void *raw;      /* its memory */
    int slot;       /* device slot holding the pixels (GPU), -1 none */
    int epoch;      /* the worker's context epoch the pixels were uploaded in */
    double t_ready; /* when it entered the ready queue */
} bitem;

typedef struct engine engine;

typedef struct {
    engine *e;
    int dev;
    sf_gpu *g;
    double create_ms;
    sf_status st;
    char err[1024];
    bq devq;        /* uploaded items waiting for the compute thread */
    bq slots;       /* free device slots (as 1 + index) */
    pthread_t up;
    int up_started;
    pthread_rwlock_t ctx_lock; /* the uploader's CUDA calls, against a retirement */
    int epoch;      /* the context's generation the slots belong to */
    volatile int dead; /* retired after a sticky error: takes no more images */
} gworker;

struct engine {
    const sf_batch_opts *o;
    const char *const *inputs;
    int n;
    pthread_mutex_t lock; /* next(), the stats */
    int seq;
    /* the buffer pool */
    int npool, pin;       /* pin: the uploader pins each pool buffer after its first use */
    void **pool;
    size_t *cap;
    int *pinned;          /* pool buffer i is registered with CUDA (cudaHostRegister): 1, failed -1 */
    int *pin_sent;        /* buffer i went to the pinner */
    pthread_mutex_t *pin_lock; /* buffer i's memory while the pinner registers it */
    bq pinq;              /* buffers to pin (as 1 + index), for the pinner thread */
    int pin_device;       /* the device the pinner makes current */
    bq freebufs;          /* free pool buffers (as 1 + index) */
    bq ready;             /* read, waiting for a worker */
    bq done;              /* finished, waiting for the writer */
    int producers;        /* readers and workers still running; done closes at 0 */
    int readers_left;
    int nreaders;         /* reader threads started (set before they start) */
    sf_batch_stats st;
    double t0;
    gworker *serial;      /* no overlap: the one GPU worker (NULL on the CPU) */
    int cpu_decode;       /* the images run on the CPU in their buffers: decoded as they are read */
    int abort;            /* take no more inputs */
    int finished;         /* the writers have handed on every image */
    int writers_left;
    pthread_cond_t fin;   /* signalled with finished, under lock */
    int workers_alive;    /* GPU workers with a context; the last to fail drains the queue */
};

static void engine_lock(engine *e) { pthread_mutex_lock(&e->lock); }
static void engine_unlock(engine *e) { pthread_mutex_unlock(&e->lock); }

static int take_next(engine *e)
{
    int i;
    engine_lock(e);
    if (e->abort)
        i = -1;
    else if (e->o->next)
        i = e->o->next(e->o->ctx);
    else
        i = e->seq < e->n ? e->seq++ : -1;
    if (i >= 0)
        e->st.ninputs_done++;
    engine_unlock(e);
    return i;
}

static void producer_done(engine *e)
{
    int last;
    engine_lock(e);
    last = --e->producers == 0;
    engine_unlock(e);
    if (last)
        bq_close(&e->done);
}

static int pool_acquire(engine *e) { return (int)(intptr_t)bq_pop(&e->freebufs) - 1; }

static void pool_release(engine *e, bitem *b)
{
    if (b->pb >= 0)
        bq_push(&e->freebufs, (void *)(intptr_t)(b->pb + 1));
    b->pb = -1;
    b->raw = NULL;
}

typedef struct {
    engine *e;
    int pb;
} pool_req;

/* sf_fits_read_raw's buffer: the pool buffer, grown to `bytes` when smaller
 * (16-byte multiples, so the device copy can be read in 16-byte words). */
static void *pool_get(void *ctx, size_t bytes)
{
    pool_req *r = ctx;
    engine *e = r->e;
    size_t want = (bytes + 15) & ~(size_t)15;
    if (e->cap[r->pb] < want) {
        void *p = NULL;
        pthread_mutex_lock(&e->pin_lock[r->pb]);
        if (e->pinned[r->pb] == 1)
            sf_host_unregister(e->pool[r->pb]);
        e->pinned[r->pb] = 0;
        e->pin_sent[r->pb] = 0;
        sf_host_free(e->pool[r->pb]);
        e->pool[r->pb] = NULL;
        e->cap[r->pb] = 0;
        want = (want + 4095) & ~(size_t)4095;
        /* page-aligned, as cudaHostRegister wants (sf_host_alloc's blocks
         * are; large ones 2 MB-aligned, on huge pages) */
        if ((p = sf_host_alloc(want)) != NULL) {
            e->pool[r->pb] = p;
            e->cap[r->pb] = want;
        }
        pthread_mutex_unlock(&e->pin_lock[r->pb]);
        if (!p)
            return NULL;
    }
    return e->pool[r->pb];
}

static void item_fail(sf_batch_item *it, sf_status st, const char *what)
{
    char msg[1024];
    it->status = st;
    snprintf(msg, sizeof msg, "%.1000s", what && *what ? what : sf_errdetail());
    if (!strstr(msg, it->path))
        snprintf(it->error, sizeof it->error, "%s: %s", it->path, msg);
    else
        snprintf(it->error, sizeof it->error, "%s", msg);
}

static void item_free(bitem *b)
{
    sf_run_result_free(&b->it.result);
    sf_fits_info_free(&b->it.info);
    sf_image_free(&b->it.host_img, NULL);
    free(b);
}

/* Read one plane into a pool buffer; never NULL (a failed read is an item
 * with its error, its buffer already returned). */
static bitem *read_one(engine *e, int idx, int plane)
{
    bitem *b = calloc(1, sizeof *b);
    pool_req rq = {e, -1};
    double t;
    sf_status st;
    if (!b)
        return NULL;
    b->slot = -1;
    b->it.index = idx;
    b->it.path = e->inputs[idx];
    b->it.plane = plane;
    b->it.nplanes = 1;
    b->it.device = -1;
    b->it.plane_given = e->o->plane != SF_PLANE_FIRST;
    b->pb = rq.pb = pool_acquire(e);
    t = now_ms();
    st = (e->cpu_decode ? sf_fits_read_raw_cpu : sf_fits_read_raw)(b->it.path, plane, pool_get, &rq, &b->raw,
                                                                   &b->it.layout, &b->it.info);
    b->it.t_read = now_ms() - t;
    if (st) {
        item_fail(&b->it, st, NULL);
        pool_release(e, b);
        return b;
    }
    b->it.nplanes = b->it.info.nplanes;
    b->it.bytes_read = sf_raw_bytes(&b->it.layout);
    sf_fits_beam_pixels(&b->it.info, b->it.layout.nx, b->it.layout.ny, &b->beam);
    return b;
}

/* Hand a read item on: to the workers, or to the writer when it failed. */
static void dispatch(engine *e, bitem *b)
{
    if (b->it.status) {
        bq_push(&e->done, b);
        return;
    }
    b->t_ready = now_ms();
    bq_push(&e->ready, b);
}

/* Every image of one input: its plane, or every plane with SF_PLANE_ALL. */
static void read_input(engine *e, int idx, void (*sink)(engine *, bitem *))
{
    const sf_batch_opts *o = e->o;
    int all = o->plane == SF_PLANE_ALL;
    int p = o->plane >= 0 ? o->plane : 0, nplanes = 1;
    do {
        int skip = o->done && o->done(o->ctx, idx, p);
        if (skip && !(all && p == 0)) { /* complete: not even read */
            engine_lock(e);
            e->st.nskipped++;
            engine_unlock(e);
        } else {
            bitem *b = read_one(e, idx, p);
            if (!b)
                break;
            if (b->it.status == SF_OK)
                nplanes = b->it.nplanes;
            if (skip) { /* plane 1 was read only to count the planes */
                pool_release(e, b);
                item_free(b);
                engine_lock(e);
                e->st.nskipped++;
                engine_unlock(e);
            } else {
                sink(e, b);
            }
        }
        p++;
    } while (all && p < nplanes);
}

static int cpu_cores(const sf_batch_opts *o);

static void *reader_main(void *arg)
{
    engine *e = arg;
    int idx;
#ifdef _OPENMP
    /* a large plane is read in chunks by a team of threads (src/io/fits.c):
     * the readers together use about as many threads as the run's cores */
    {
        int per = cpu_cores(e->o) / (e->nreaders > 0 ? e->nreaders : 1);
        omp_set_num_threads(per < 1 ? 1 : per);
    }
#endif
    while ((idx = take_next(e)) >= 0)
        read_input(e, idx, dispatch);
    engine_lock(e);
    int last = --e->readers_left == 0;
    engine_unlock(e);
    if (last)
        bq_close(&e->ready);
    producer_done(e);
    return NULL;
}

/* The run options of one image: what to keep and its beam from the header. */
static void run_opts_for(const engine *e, const bitem *b, sf_backend be, sf_gpu *g, sf_run_opts *ro)
{
    memset(ro, 0, sizeof *ro);
    ro->backend = be;
    ro->gpu = g;
    ro->keep = e->o->keep;
    sf_run_opts_beam(ro, &b->beam);
}

/* CPU: decode the raw pixels on the host and run the CPU twins. raw is the
 * item's buffer (host). in_place (the CPU workers, whose buffer goes back to
 * the pool only after the run): where a pixel takes 4 bytes (BITPIX -32 and
 * 32, CFITSIO's floats) and nobody keeps the image (no previews or residual),
 * the pixels are decoded in the buffer itself and the image is a view of it,
 * which saves an image-sized allocation, its first-touch page faults and a
 * pass of writes (the separate decode took 82-130 ms at 8192^2 on one thread
 * of the H100 machine; tests/bench/RESULTS.md). */
static void run_cpu(engine *e, bitem *b, void *raw, int in_place)
{
    sf_image img = {0};
    sf_run_opts ro;
    sf_status st;
    const sf_raw_layout *l = &b->it.layout;
    const int view = in_place && !e->o->host_image && sf_raw_pixel_bytes(l) == sizeof(float);
    double t = now_ms();
    b->it.device = -1;
    b->it.backend = "cpu";
    if (view) {
        img.nx = l->nx;
        img.ny = l->ny;
        img.stride = (size_t)l->nx;
        img.data = (float *)raw;
        img.loc = SF_HOST;
        if (l->decoded) { /* by the reader, as it read (sf_fits_read_raw_cpu) */
            b->it.nblank = l->nblank;
            st = SF_OK;
        } else {
            st = sf_decode_cpu(raw, l, &img, &b->it.nblank);
        }
    } else if (l->decoded) {
        st = sf_fail(SF_ERR_INTERNAL, "the CPU worker got decoded pixels it cannot run in place");
    } else if (!(st = sf_image_alloc(&img, l->nx, l->ny, SF_HOST, NULL))) {
        st = sf_decode_cpu(raw, l, &img, &b->it.nblank);
    }
    if (st) {
        item_fail(&b->it, st, NULL);
        if (!view)
            sf_image_free(&img, NULL);
        return;
    }
    b->it.t_decode = now_ms() - t;
    run_opts_for(e, b, SF_BACKEND_CPU, NULL, &ro);
    st = sf_pipeline_run(e->o->pl, &img, &ro, &b->it.result);
    if (st)
        item_fail(&b->it, st, NULL);
    if (view)
        return; /* the pool's buffer */
    if (e->o->host_image && st == SF_OK)
        b->it.host_img = img;
    else
        sf_image_free(&img, NULL);
}

/* ---- CPU workers ----------------------------------------------------------- */

typedef struct {
    engine *e;
    int omp_threads;
} cworker;

static void *cpu_main(void *arg)
{
    cworker *w = arg;
    engine *e = w->e;
    bitem *b;
#ifdef _OPENMP
    omp_set_num_threads(w->omp_threads);
#endif
    while ((b = bq_pop(&e->ready))) {
        b->it.t_queue = now_ms() - b->t_ready;
        run_cpu(e, b, b->raw, 1);
        pool_release(e, b);
        bq_push(&e->done, b);
    }
    producer_done(e);
    return NULL;
}

/* ---- GPU workers ----------------------------------------------------------- */

static void gw_fail(gworker *w, sf_status st)
{
    w->st = st;
    snprintf(w->err, sizeof w->err, "%s", sf_errdetail());
}

/* Decode the raw slot into the context's image buffer and run the stages;
 * on -b auto, an image the GPU has no memory for runs on the CPU. */
/* After a CUDA error that sticks to the context (an illegal address, a
 * launch failure) every later call on that GPU fails, and making the context
 * anew (cudaDeviceReset) leaves cuFFT's state behind: the worker retires
 * instead. Its images, and with it the last GPU those still waiting, run on
 * the CPU twins under -b auto, or fail naming the error under -b gpu. */
static void gpu_retire(gworker *w, const char *why)
{
    engine *e = w->e;
    if (w->dead)
        return;
    w->dead = 1;
    snprintf(w->err, sizeof w->err, "%.1000s", why);
    engine_lock(e);
    e->st.gpus_retired++;
    engine_unlock(e);
    if (e->o->notice) {
        char msg[1300];
        snprintf(msg, sizeof msg, "GPU %d is out of use after a sticky CUDA error (%.1000s); %s", w->dev,
                 why, e->o->fallback_cpu ? "its images run on the CPU" : "its images fail");
        e->o->notice(e->o->ctx, msg);
    }
}

/* An image the retired GPU cannot take: the CPU twins, or a failure. */
static void run_retired(gworker *w, bitem *b)
{
    engine *e = w->e;
    sf_run_result_free(&b->it.result);
    sf_image_free(&b->it.host_img, NULL);
    if (e->o->fallback_cpu) {
        run_cpu(e, b, b->raw, 0);
        if (b->it.status == SF_OK)
            snprintf(b->it.error, sizeof b->it.error, "%s: ran on the CPU: GPU %d is out of use",
                     b->it.path, w->dev);
    } else {
        char msg[1200];
        snprintf(msg, sizeof msg, "GPU %d is out of use after a sticky CUDA error (%.1000s)", w->dev, w->err);
        item_fail(&b->it, SF_ERR_CUDA, msg);
    }
}

/* Decode the raw slot into the context's image buffer and run the stages. */
static sf_status run_gpu_once(gworker *w, bitem *b)
{
    engine *e = w->e;
    sf_gpu *g = w->g;
    sf_image dimg = {0};
    sf_gpu_timer *tm = NULL;
    sf_run_opts ro;
    void *raw = NULL, *p = NULL;
    size_t bytes = sf_raw_bytes(&b->it.layout);
    sf_status st;
    if ((st = sf_gpu_buffer(g, SF_GBUF_RAW0 + b->slot, (bytes + 15) & ~(size_t)15, &raw)))
        goto fail;
    if (b->epoch != w->epoch) { /* the uploader's copy failed: up again here */
        if ((st = sf_gpu_upload_lane(g, raw, b->raw, bytes, &b->it.t_upload)))
            goto fail;
        b->epoch = w->epoch;
    }
    if ((st = sf_gpu_buffer(g, SF_GBUF_IMAGE, sf_npix(b->it.layout.nx, b->it.layout.ny) * sizeof(float), &p)))
        goto fail;
    dimg.nx = b->it.layout.nx;
    dimg.ny = b->it.layout.ny;
    dimg.stride = (size_t)dimg.nx;
    dimg.data = p;
    dimg.loc = SF_DEVICE;
    if ((st = sf_gpu_timer_create(g, &tm)) || (st = sf_gpu_timer_start(tm)) ||
        (st = sf_decode_gpu(g, raw, &b->it.layout, &dimg, &b->it.nblank)) ||
        (st = sf_gpu_timer_stop(tm, &b->it.t_decode)))
        goto fail;
    if (e->o->host_image) {
        if ((st = sf_image_alloc(&b->it.host_img, dimg.nx, dimg.ny, SF_HOST, NULL)) ||
            (st = sf_image_download(g, &dimg, &b->it.host_img)))
            goto fail;
    }
    run_opts_for(e, b, SF_BACKEND_GPU, g, &ro);
    st = sf_pipeline_run(e->o->pl, &dimg, &ro, &b->it.result);
fail:
    sf_gpu_timer_destroy(tm);
    return st;
}

/* One image on the GPU. After a sticky CUDA error the GPU retires (its
 * images go to the CPU twins under -b auto: their pixels are still in their
 * host buffers), so one bad launch does not fail every image after it; on
 * -b auto an image the GPU has no memory for runs on the CPU twins. */
static void run_gpu(gworker *w, bitem *b)
{
    engine *e = w->e;
    sf_status st;
    if (w->dead) {
        run_retired(w, b);
        return;
    }
    b->it.device = w->dev;
    b->it.backend = "gpu";
    st = run_gpu_once(w, b);
    if ((st == SF_ERR_CUDA || st == SF_ERR_CUFFT) && sf_gpu_sticky_error(w->g)) {
        char why[1024];
        snprintf(why, sizeof why, "%.1000s", sf_errdetail());
        gpu_retire(w, why);
        run_retired(w, b);
        return;
    }
    if (st == SF_ERR_GPU_NOMEM && e->o->fallback_cpu) { /* the host buffer still holds the pixels */
        char why[1024];
        snprintf(why, sizeof why, "%s", sf_errdetail());
        sf_run_result_free(&b->it.result);
        sf_image_free(&b->it.host_img, NULL);
        run_cpu(e, b, b->raw, 0);
        if (b->it.status == SF_OK)
            snprintf(b->it.error, sizeof b->it.error, "%s: ran on the CPU: %s", b->it.path, why);
        return;
    }
    if (st)
        item_fail(&b->it, st, NULL);
}

static void *gpu_upload_main(void *arg)
{
    gworker *w = arg;
    engine *e = w->e;
    bitem *b;
    if (sf_gpu_bind(w->g)) {
        gw_fail(w, SF_ERR_CUDA);
        bq_close(&w->devq);
        return NULL;
    }
    for (;;) {
        int slot = (int)(intptr_t)bq_pop(&w->slots) - 1; /* a free device slot first */
        void *d = NULL;
        size_t bytes;
        sf_status st;
        if (slot < 0 || w->dead || !(b = bq_pop(&e->ready)))
            break;
        b->it.t_queue = now_ms() - b->t_ready;
        bytes = sf_raw_bytes(&b->it.layout);
        pthread_rwlock_rdlock(&w->ctx_lock);
        st = w->g ? sf_gpu_buffer(w->g, SF_GBUF_RAW0 + slot, (bytes + 15) & ~(size_t)15, &d)
                  : SF_ERR_CUDA;
        if (st == SF_OK)
            st = sf_gpu_upload_lane(w->g, d, b->raw, bytes, &b->it.t_upload);
        b->epoch = w->epoch;
        pthread_rwlock_unlock(&w->ctx_lock);
        if (st == SF_ERR_CUDA || st == SF_ERR_CUFFT) {
            /* the compute thread tries the copy again, and retires the GPU if it sticks */
            b->epoch = -1;
            st = SF_OK;
        }
        if (st == SF_OK && e->pin && !e->pin_sent[b->pb]) {
            /* the pinner pins it beside the uploads: the next images in this
             * buffer go up at full PCIe speed */
            e->pin_sent[b->pb] = 1;
            bq_push(&e->pinq, (void *)(intptr_t)(b->pb + 1));
        }
        if (st == SF_ERR_GPU_NOMEM && e->o->fallback_cpu) { /* -b auto: the CPU takes it */
            char why[1024];
            snprintf(why, sizeof why, "%s", sf_errdetail());
            run_cpu(e, b, b->raw, 0);
            if (b->it.status == SF_OK)
                snprintf(b->it.error, sizeof b->it.error, "%s: ran on the CPU: %s", b->it.path, why);
            pool_release(e, b);
            bq_push(&w->slots, (void *)(intptr_t)(slot + 1));
            bq_push(&e->done, b);
            continue;
        }
        if (st) {
            pool_release(e, b);
            b->it.device = w->dev;
            item_fail(&b->it, st, NULL);
            bq_push(&w->slots, (void *)(intptr_t)(slot + 1));
            bq_push(&e->done, b);
            continue;
        }
        b->slot = slot; /* the host buffer stays with the image until the GPU is done with it */
        bq_push(&w->devq, b);
    }
    bq_close(&w->devq);
    return NULL;
}

/* A GPU worker: creates its context (while the readers already read), starts
 * its uploader, then runs the images the uploader hands over. A worker whose
 * context cannot be made leaves the images to the others; the last one to
 * fail fails every image left, with the reason. */
static void *gpu_compute_main(void *arg)
{
    gworker *w = arg;
    engine *e = w->e;
    bitem *b;
    int bound;
    if (!w->g) {
        double t = now_ms();
        sf_status st = sf_gpu_create(&w->g, w->dev);
        w->create_ms = now_ms() - t;
        if (st || pthread_create(&w->up, NULL, gpu_upload_main, w) != 0) {
            int last;
            char msg[1200];
            if (!st)
                st = sf_fail(SF_ERR_INTERNAL, "cannot start a thread");
            gw_fail(w, st);
            snprintf(msg, sizeof msg, "GPU %d: %s", w->dev, w->err);
            engine_lock(e);
            last = --e->workers_alive == 0;
            engine_unlock(e);
            while (last && (b = bq_pop(&e->ready))) {
                item_fail(&b->it, st, msg);
                pool_release(e, b);
                bq_push(&e->done, b);
            }
            producer_done(e);
            return NULL;
        }
        w->up_started = 1;
    }
    bound = sf_gpu_bind(w->g) == SF_OK;
    while ((b = bq_pop(&w->devq))) {
        if (bound)
            run_gpu(w, b);
        else
            item_fail(&b->it, SF_ERR_CUDA, NULL);
        pool_release(e, b);
        bq_push(&w->slots, (void *)(intptr_t)(b->slot + 1));
        b->slot = -1;
        bq_push(&e->done, b);
    }
    if (w->up_started)
        pthread_join(w->up, NULL);
    if (w->dead) { /* the last GPU left takes care of the images still waiting */
        int last;
        engine_lock(e);
        last = --e->workers_alive == 0;
        engine_unlock(e);
        while (last && (b = bq_pop(&e->ready))) {
            b->it.device = w->dev;
            run_retired(w, b);
            pool_release(e, b);
            bq_push(&e->done, b);
        }
    }
    producer_done(e);
    return NULL;
}

static void *gpu_create_main(void *arg)
{
    gworker *w = arg;
    double t = now_ms();
    sf_status st = sf_gpu_create(&w->g, w->dev);
    w->create_ms = now_ms() - t;
    if (st)
        gw_fail(w, st);
    return NULL;
}

/* The pinner: registers the pool's buffers with CUDA once their size is
 * known, off the uploaders' copy lane (pinning costs about 2.5 times a
 * pageable upload). A buffer that cannot be pinned stays pageable: its
 * uploads are slower, still correct. */
static void *pinner_main(void *arg)
{
    engine *e = arg;
    void *v;
    sf_gpu_use_device(e->pin_device); /* not device 0's context when it is not used */
    while ((v = bq_pop(&e->pinq))) {
        int pb = (int)(intptr_t)v - 1;
        double t = now_ms();
        pthread_mutex_lock(&e->pin_lock[pb]);
        if (e->pinned[pb] == 0 && e->pool[pb])
            e->pinned[pb] = sf_host_register(e->pool[pb], e->cap[pb]) == SF_OK ? 1 : -1;
        pthread_mutex_unlock(&e->pin_lock[pb]);
        engine_lock(e);
        e->st.pin_ms += now_ms() - t;
        engine_unlock(e);
    }
    return NULL;
}

/* ---- the writer and the statistics --------------------------------------- */

static void account(engine *e, bitem *b)
{
    const sf_run_result *r = &b->it.result;
    engine_lock(e);
    e->st.nitems++;
    if (b->it.status)
        e->st.nfailed++;
    else
        e->st.nok++;
    e->st.bytes_read += b->it.bytes_read;
    e->st.read_ms += b->it.t_read;
    e->st.upload_ms += b->it.t_upload;
    e->st.decode_ms += b->it.t_decode;
    e->st.write_ms += b->it.t_write;
    for (int i = 0; i < r->nstages; i++)
        e->st.stages_ms += r->stage_ms[i];
    if (r->nsources > 0)
        e->st.nsources += r->nsources;
    if (r->nsources >= 0 && r->sign != SF_SIGN_POSITIVE) {
        e->st.nsigned++;
        e->st.nneg += r->nneg;
        sf_run_fdr_add(r, e->st.fdr_pos, e->st.fdr_neg);
    }
    e->st.last_done_ms = now_ms() - e->t0;
    if (e->st.nitems == 1)
        e->st.first_done_ms = e->st.last_done_ms;
    engine_unlock(e);
}

static void write_one(engine *e, bitem *b)
{
    double t = now_ms();
    if (e->o->write) {
        sf_status st = e->o->write(e->o->ctx, &b->it);
        if (st && b->it.status == SF_OK)
            item_fail(&b->it, st, NULL);
    }
    b->it.t_write = now_ms() - t;
    account(e, b);
    item_free(b);
}

static void *writer_main(void *arg)
{
    engine *e = arg;
    bitem *b;
    while ((b = bq_pop(&e->done)))
        write_one(e, b);
    engine_lock(e);
    if (--e->writers_left == 0) {
        e->finished = 1;
        pthread_cond_broadcast(&e->fin);
    }
    engine_unlock(e);
    return NULL;
}

/* ---- no overlap: one image at a time on the calling thread ----------------- */

static void serial_sink(engine *e, bitem *b)
{
    gworker *serial_worker = e->serial;
    if (b->it.status == SF_OK) {
        if (serial_worker) {
            void *d = NULL;
            size_t bytes = sf_raw_bytes(&b->it.layout);
            sf_status st = sf_gpu_buffer(serial_worker->g, SF_GBUF_RAW0, (bytes + 15) & ~(size_t)15, &d);
            if (st == SF_OK)
                st = sf_gpu_upload_lane(serial_worker->g, d, b->raw, bytes, &b->it.t_upload);
            b->epoch = serial_worker->epoch;
            b->slot = 0;
            if (st == SF_ERR_CUDA || st == SF_ERR_CUFFT || st == SF_OK) {
                if (st)
                    b->epoch = -1; /* run_gpu tries the copy again */
                run_gpu(serial_worker, b);
            } else {
                b->it.device = serial_worker->dev;
                item_fail(&b->it, st, NULL);
            }
        } else {
            run_cpu(e, b, b->raw, 1);
        }
    }
    pool_release(e, b);
    write_one(e, b);
}

/* ---- the run --------------------------------------------------------------- */

/* The cores this process may run on: its affinity (taskset, a Slurm cpuset,
 * mpirun's binding), not every core of the node. */
static int ncores(void)
{
    cpu_set_t set;
    long n;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The cores the CPU workers share: --threads, else OMP_NUM_THREADS, else
 * every core this process may use. */
static int cpu_cores(const sf_batch_opts *o)
{
#ifdef _OPENMP
    const char *env = getenv("OMP_NUM_THREADS");
    if (o->threads <= 0 && env && *env)
        return omp_get_max_threads();
#endif
    return o->threads > 0 ? o->threads : ncores();
}

/* CPU workers: -j, else one per core but no more than the images (a single
 * image gets every core for its stages' threads). */
static int cpu_workers(const sf_batch_opts *o, size_t n)
{
    int cores = cpu_cores(o);
    if (o->jobs > 0)
        return o->jobs;
    if (o->plane != SF_PLANE_ALL && n > 0 && (size_t)cores > n)
        return (int)n;
    return cores;
}

/* Threads of each of nworkers CPU workers: the cores shared out, one at least. */
static int worker_threads(const sf_batch_opts *o, int nworkers)
{
    int t = cpu_cores(o) / (nworkers > 0 ? nworkers : 1);
    return t > 1 ? t : 1;
}

/* GPUs this process will likely see, without starting CUDA (for sizing the
 * readers and the pool while the driver starts): CUDA_VISIBLE_DEVICES's
 * entries, else the /dev/nvidiaN nodes; at least 1. */
static int guess_gpus(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0;
    if (v) {
        for (const char *p = v; *p; p++)
            n += *p == ',';
        return *v ? n + 1 : 1;
    }
    for (int i = 0; i < SF_BATCH_MAXDEV; i++) {
        char path[32];
        snprintf(path, sizeof path, "/dev/nvidia%d", i);
        if (access(path, F_OK) == 0)
            n++;
    }
    return n > 0 ? n : 1;
}

/* Every visible GPU, counted now (the driver's start); 0 when none. */
static int count_gpus(engine *e, int *devices)
{
    double t = now_ms();
    int n = sf_gpu_count();
    e->st.count_ms = now_ms() - t;
    if (n > SF_BATCH_MAXDEV)
        n = SF_BATCH_MAXDEV;
    for (int i = 0; i < n; i++)
        devices[i] = i;
    return n;
}

static sf_status start_gpu_workers(engine *e, gworker **gwp, int n, const int *devices)
{
    gworker *gw = calloc((size_t)n, sizeof *gw);
    *gwp = gw;
    if (!gw)
        return sf_fail(SF_ERR_NOMEM, "batch engine: no memory for its workers");
    for (int i = 0; i < n; i++) {
        gw[i].e = e;
        gw[i].dev = devices[i];
        pthread_rwlock_init(&gw[i].ctx_lock, NULL);
        if (bq_init(&gw[i].devq, SLOTS) || bq_init(&gw[i].slots, SLOTS))
            return sf_fail(SF_ERR_NOMEM, "batch engine: no memory for its queues");
        for (int k = 0; k < SLOTS; k++)
            bq_push(&gw[i].slots, (void *)(intptr_t)(k + 1));
    }
    e->workers_alive = n;
    return SF_OK;
}

sf_status sf_batch_run(const sf_batch_opts *o, const char *const *inputs, int n,
                       sf_batch_stats *stats)
{
    engine e;
    gworker *gw = NULL;
    cworker *cw = NULL;
    pthread_t *rt = NULL, *ct = NULL, wt[16], pinner;
    int pinner_started = 0;
    int gpu = o->backend == SF_BACKEND_GPU;
    int resolve = gpu && o->ndevices == 0; /* every visible GPU: counted beside the first reads */
    int devices[SF_BATCH_MAXDEV];
    int nworkers = gpu ? (resolve ? guess_gpus() : o->ndevices) : cpu_workers(o, n);
    int nreaders, started_readers = 0, started_workers = 0, writer = 0, nwriters;
    /* One image on the CPU has nothing to overlap (a GPU run overlaps the
     * file's read with CUDA's start): it is read, run and written on this
     * thread, where the reader, worker and writer threads and the writer's
     * own OpenMP team cost it time (one 4096^2 lesson.pipe run on 2 threads
     * of the VM: 237-448 ms against 207-242 ms without them) */
    const int overlap = o->overlap && (gpu || n > 1 || o->plane == SF_PLANE_ALL);
    sf_status st = SF_OK;

    sf_fits_threads_init();
    memset(&e, 0, sizeof e);
    memset(stats, 0, sizeof *stats);
    e.o = o;
    e.inputs = inputs;
    e.n = n;
    e.t0 = now_ms();
    /* The readers fill pageable buffers (they never wait for CUDA to start);
     * pinning a buffer costs about 2.5 times its pageable upload, so the
     * uploader pins a buffer after its first use only when each buffer will
     * carry four images or more. */
    pthread_mutex_init(&e.lock, NULL);
    pthread_cond_init(&e.fin, NULL);
    if (!resolve)
        memcpy(devices, o->devices, sizeof(int) * (size_t)(o->ndevices > 0 ? o->ndevices : 0));
    if (resolve && !overlap) { /* nothing to overlap with: count now */
        nworkers = count_gpus(&e, devices);
        resolve = 0;
        if (nworkers == 0 && !o->fallback_cpu) {
            st = sf_fail(SF_ERR_NO_GPU, "no CUDA device found: cannot use --backend gpu (use -b cpu or -b auto)");
            goto out;
        }
        if (nworkers == 0) {
            gpu = 0;
            nworkers = cpu_workers(o, n);
            if (o->notice)
                o->notice(o->ctx, "no CUDA device found: running on the CPU");
        }
    }
    if (gpu && (nworkers < 1 || nworkers > SF_BATCH_MAXDEV))
        return sf_fail(SF_ERR_PARAM, "%d GPUs asked for", nworkers);
    e.cpu_decode = !gpu && !o->host_image;
    if (!overlap) {
        nreaders = 0;
        e.npool = 1;
    } else {
        nreaders = o->readers > 0 ? o->readers : (gpu ? 2 + 2 * nworkers : nworkers);
        if (nreaders > 64)
            nreaders = 64;
        if (!gpu && nreaders > nworkers + 1)
            nreaders = nworkers + 1;
        /* the images on a GPU's slots keep their host buffers (for the CPU
         * twins if the GPU fails): SLOTS more per GPU */
        e.npool = o->queue > 0 ? o->queue : nreaders + (gpu ? (2 + SLOTS) * nworkers : nworkers);
        if (e.npool < 1)
            e.npool = 1;
    }
    e.pin = gpu && overlap && (o->plane == SF_PLANE_ALL || n >= 4 * e.npool);
    /* SKYFIND_BATCH_PIN=0|1 overrides that rule (a developer knob, for the
     * measurements of tests/gpu/batch-queue.sh) */
    if (getenv("SKYFIND_BATCH_PIN") && gpu && overlap)
        e.pin = atoi(getenv("SKYFIND_BATCH_PIN")) != 0;
    e.pool = calloc((size_t)e.npool, sizeof *e.pool);
    e.cap = calloc((size_t)e.npool, sizeof *e.cap);
    e.pinned = calloc((size_t)e.npool, sizeof *e.pinned);
    e.pin_sent = calloc((size_t)e.npool, sizeof *e.pin_sent);
    e.pin_lock = calloc((size_t)e.npool, sizeof *e.pin_lock);
    for (int i = 0; e.pin_lock && i < e.npool; i++)
        pthread_mutex_init(&e.pin_lock[i], NULL);
    if (!e.pool || !e.cap || !e.pinned || !e.pin_sent || !e.pin_lock || bq_init(&e.pinq, e.npool) || bq_init(&e.freebufs, e.npool) || bq_init(&e.ready, e.npool) ||
        bq_init(&e.done, e.npool + 2 * nworkers + 2)) {
        st = sf_fail(SF_ERR_NOMEM, "batch engine: no memory for its queues");
        goto out;
    }
    for (int i = 0; i < e.npool; i++)
        bq_push(&e.freebufs, (void *)(intptr_t)(i + 1));

    /* GPU workers; without overlap their contexts are made here, otherwise
     * each worker makes its own while the readers start */
    if (gpu && !resolve) {
        if ((st = start_gpu_workers(&e, &gw, nworkers, devices)))
            goto out;
        if (!overlap) {
            gpu_create_main(&gw[0]);
            e.st.startup_ms = gw[0].create_ms;
            if (gw[0].st) {
                st = sf_fail(gw[0].st, "GPU %d: %s", gw[0].dev, gw[0].err);
                goto out;
            }
        }
    }

    if (!overlap) { /* one image at a time, on this thread */
        int idx;
        e.serial = gpu ? &gw[0] : NULL;
        if (gpu)
            sf_gpu_bind(gw[0].g);
#ifdef _OPENMP
        else
            omp_set_num_threads(cpu_cores(o));
#endif
        while ((idx = take_next(&e)) >= 0)
            read_input(&e, idx, serial_sink);
        goto out;
    }

    e.readers_left = nreaders;
    e.nreaders = nreaders;
    e.producers = nreaders + (resolve ? 1 : nworkers); /* 1: the workers still to come */
    rt = calloc((size_t)nreaders, sizeof *rt);
    ct = calloc(SF_BATCH_MAXDEV + (size_t)cpu_workers(o, n), sizeof *ct);
    cw = calloc(SF_BATCH_MAXDEV + (size_t)cpu_workers(o, n), sizeof *cw);
    if (!rt || !ct || !cw) {
        st = sf_fail(SF_ERR_NOMEM, "batch engine: no memory for its threads");
        goto out;
    }
    /* writers: one image's outputs take a few ms (world coordinates of every
     * source, the catalogue text, check images), longer than its GPU stages */
    nwriters = o->writers > 0 ? o->writers : (gpu ? 1 + 2 * nworkers : 2);
    if (nwriters > 16)
        nwriters = 16;
    e.writers_left = nwriters;
    for (int i = 0; i < nwriters; i++)
        if (pthread_create(&wt[i], NULL, writer_main, &e) == 0)
            writer++;
    if (writer < nwriters) {
        engine_lock(&e);
        e.writers_left -= nwriters - writer;
        engine_unlock(&e);
    }
    for (int i = 0; i < nreaders; i++)
        if (pthread_create(&rt[i], NULL, reader_main, &e) == 0)
            started_readers++;
    if (started_readers < nreaders) { /* fewer readers than planned: account for the rest */
        engine_lock(&e);
        e.readers_left -= nreaders - started_readers;
        e.producers -= nreaders - started_readers;
        int none = e.readers_left == 0;
        engine_unlock(&e);
        if (none)
            bq_close(&e.ready);
    }
    if (resolve) { /* the readers are reading: now start the driver and count the GPUs */
        int ng = count_gpus(&e, devices);
        if (ng > 0) {
            nworkers = ng;
            st = start_gpu_workers(&e, &gw, nworkers, devices);
        } else if (o->fallback_cpu) {
            gpu = 0;
            e.pin = 0;
            nworkers = cpu_workers(o, n);
            if (o->notice)
                o->notice(o->ctx, "no CUDA device found: running on the CPU");
        } else {
            st = sf_fail(SF_ERR_NO_GPU, "no CUDA device found: cannot use --backend gpu (use -b cpu or -b auto)");
        }
        if (st) { /* no workers: stop reading, drop what was read, unwrite nothing */
            bitem *b;
            char keep[1024];
            snprintf(keep, sizeof keep, "%s", sf_errdetail());
            engine_lock(&e);
            e.abort = 1;
            engine_unlock(&e);
            while ((b = bq_pop(&e.ready))) {
                pool_release(&e, b);
                item_free(b);
            }
            producer_done(&e);
            for (int i = 0; i < started_readers; i++)
                pthread_join(rt[i], NULL);
            started_readers = 0;
            for (int i = 0; i < writer; i++)
                pthread_join(wt[i], NULL);
            writer = 0;
            sf_fail(st, "%s", keep);
            goto out;
        }
        engine_lock(&e);
        e.producers += nworkers - 1;
        engine_unlock(&e);
    }
    if (gpu)
        e.pin_device = gw[0].dev;
    if (gpu && e.pin && pthread_create(&pinner, NULL, pinner_main, &e) == 0)
        pinner_started = 1;
    for (int i = 0; i < nworkers; i++) {
        if (gpu) {
            pthread_create(&ct[i], NULL, gpu_compute_main, &gw[i]);
        } else {
            cw[i].e = &e;
            cw[i].omp_threads = worker_threads(o, nworkers);
            pthread_create(&ct[i], NULL, cpu_main, &cw[i]);
        }
        started_workers++;
    }
    /* progress while the threads work: woken by the writer's end, or every 0.5 s */
    engine_lock(&e);
    while (!e.finished && writer) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 500 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&e.fin, &e.lock, &ts);
        if (!e.finished && o->progress) {
            sf_batch_stats snap = e.st;
            snap.wall_ms = now_ms() - e.t0;
            engine_unlock(&e);
            o->progress(o->ctx, &snap, n);
            engine_lock(&e);
        }
    }
    engine_unlock(&e);
    for (int i = 0; i < started_readers; i++)
        pthread_join(rt[i], NULL);
    for (int i = 0; i < started_workers; i++)
        pthread_join(ct[i], NULL);
    bq_close(&e.pinq);
    if (pinner_started)
        pthread_join(pinner, NULL);
    for (int i = 0; gw && i < nworkers; i++)
        if (gw[i].create_ms > e.st.startup_ms)
            e.st.startup_ms = gw[i].create_ms;
    for (int i = 0; i < writer; i++)
        pthread_join(wt[i], NULL);
out:
    e.st.wall_ms = now_ms() - e.t0;
    e.st.gpu = gpu;
    e.st.workers = nworkers;
    e.st.threads = gpu ? 0 : worker_threads(o, nworkers);
    *stats = e.st;
    if (gw) {
        for (int i = 0; i < nworkers; i++) {
            if (!o->exiting)
                sf_gpu_destroy(gw[i].g);
            if (gw[i].devq.v)
                bq_free(&gw[i].devq);
            if (gw[i].slots.v)
                bq_free(&gw[i].slots);
            pthread_rwlock_destroy(&gw[i].ctx_lock);
        }
        free(gw);
    }
    free(cw);
    free(rt);
    free(ct);
    for (int i = 0; e.pool && i < e.npool; i++) {
        if (e.pinned[i] == 1)
            sf_host_unregister(e.pool[i]);
        sf_host_free(e.pool[i]);
    }
    free(e.pool);
    free(e.cap);
    free(e.pinned);
    free(e.pin_sent);
    for (int i = 0; e.pin_lock && i < e.npool; i++)
        pthread_mutex_destroy(&e.pin_lock[i]);
    free(e.pin_lock);
    if (e.pinq.v)
        bq_free(&e.pinq);
    if (e.freebufs.v)
        bq_free(&e.freebufs);
    if (e.ready.v)
        bq_free(&e.ready);
    if (e.done.v)
        bq_free(&e.done);
    pthread_cond_destroy(&e.fin);
    pthread_mutex_destroy(&e.lock);
    sf_host_cache_release(); /* the freed image buffers kept for the next image */
    return st;
}
