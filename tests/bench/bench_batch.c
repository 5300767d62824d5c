/* The floor of a batch: how fast its files can be read on the host (the
 * batch engine's own read, sf_fits_read_raw, with R reader threads into
 * pinned buffers, as `skyfind run` reads them) and how fast their pixels go
 * up PCIe from pinned memory (the copy lane, CUDA events). The slower of the
 * two bounds `skyfind run`'s files/s; tests/gpu/run-all.sh batch compares.
 * Usage: bench_batch [--readers R] [--device N] FILE... */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "skyfind/fits.h"
#include "skyfind/gpu.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

typedef struct {
    char **files;
    int n, next, fail;
    size_t *bytes;
    pthread_mutex_t m;
} job;

typedef struct {
    void *p;
    size_t cap;
} pbuf;

static void *get(void *ctx, size_t bytes)
{
    pbuf *b = ctx;
    if (b->cap < bytes) {
        sf_pinned_free(b->p);
        b->p = NULL;
        b->cap = 0;
        if (sf_pinned_alloc(&b->p, bytes))
            return NULL;
        b->cap = bytes;
    }
    return b->p;
}

static void *reader(void *arg)
{
    job *j = arg;
    pbuf b = {0};
    for (;;) {
        int i;
        void *raw = NULL;
        sf_raw_layout l;
        sf_fits_info in;
        pthread_mutex_lock(&j->m);
        i = j->next < j->n ? j->next++ : -1;
        pthread_mutex_unlock(&j->m);
        if (i < 0)
            break;
        if (sf_fits_read_raw(j->files[i], 0, get, &b, &raw, &l, &in)) {
            fprintf(stderr, "bench_batch: %s\n", sf_errdetail());
            j->fail = 1;
            continue;
        }
        j->bytes[i] = sf_raw_bytes(&l);
        sf_fits_info_free(&in);
    }
    sf_pinned_free(b.p);
    return NULL;
}

int main(int argc, char **argv)
{
    int readers = 4, dev = 0, first = 1;
    while (first < argc && argv[first][0] == '-' && argv[first][1] == '-') {
        if (!strcmp(argv[first], "--readers") && first + 1 < argc)
            readers = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--device") && first + 1 < argc)
            dev = atoi(argv[first + 1]);
        else {
            fprintf(stderr, "usage: bench_batch [--readers R] [--device N] FILE...\n");
            return 2;
        }
        first += 2;
    }
    job j = {argv + first, argc - first, 0, 0, NULL, PTHREAD_MUTEX_INITIALIZER};
    if (j.n < 1 || readers < 1) {
        fprintf(stderr, "usage: bench_batch [--readers R] [--device N] FILE...\n");
        return 2;
    }
    j.bytes = calloc((size_t)j.n, sizeof *j.bytes);
    sf_gpu *g = NULL;
    if (sf_gpu_create(&g, dev)) {
        fprintf(stderr, "bench_batch: %s\n", sf_errdetail());
        return 1;
    }
    /* 1. the host: R readers through the page cache into pinned buffers (twice:
     * the first pass warms the page cache and the pinned pool, the second is timed) */
    double tr = 0;
    for (int pass = 0; pass < 2; pass++) {
        pthread_t *t = calloc((size_t)readers, sizeof *t);
        j.next = 0;
        double t0 = now_s();
        for (int i = 0; i < readers; i++)
            pthread_create(&t[i], NULL, reader, &j);
        for (int i = 0; i < readers; i++)
            pthread_join(t[i], NULL);
        tr = now_s() - t0;
        free(t);
    }
    size_t total = 0, maxb = 0;
    for (int i = 0; i < j.n; i++) {
        total += j.bytes[i];
        if (j.bytes[i] > maxb)
            maxb = j.bytes[i];
    }
    /* 2. PCIe: each file's pixel bytes from one pinned buffer, CUDA events */
    void *h = NULL, *d = NULL;
    double tu = 0, w0, tw;
    if (sf_pinned_alloc(&h, maxb) || sf_gpu_malloc(g, &d, maxb)) {
        fprintf(stderr, "bench_batch: %s\n", sf_errdetail());
        return 1;
    }
    memset(h, 1, maxb);
    sf_gpu_upload_lane(g, d, h, maxb, NULL); /* warm-up */
    w0 = now_s();
    for (int i = 0; i < j.n; i++) {
        double ms = 0;
        if (sf_gpu_upload_lane(g, d, h, j.bytes[i], &ms)) {
            fprintf(stderr, "bench_batch: %s\n", sf_errdetail());
            return 1;
        }
        tu += ms / 1e3;
    }
    tw = now_s() - w0;
    printf("files %d, pixel bytes %.1f MB\n", j.n, total / 1e6);
    printf("host read (%d readers, raw into pinned): %.3f s, %.1f files/s, %.0f MB/s\n", readers, tr,
           j.n / tr, total / 1e6 / tr);
    printf("pinned upload: %.3f s of device time (%.3f s wall), %.1f files/s, %.1f GB/s\n", tu, tw,
           j.n / tu, total / 1e9 / tu);
    double tb = tr > tw ? tr : tw;
    printf("bound: %.1f files/s, %.0f MB/s (%s)\n", j.n / tb, total / 1e6 / tb,
           tr > tw ? "the host read" : "the upload");
    printf("{\"bench\":\"batch_bound\",\"files\":%d,\"bytes\":%zu,\"read_s\":%.4f,\"upload_s\":%.4f,"
           "\"upload_wall_s\":%.4f,\"bound_files_per_s\":%.3f,\"bound_mb_per_s\":%.1f}\n",
           j.n, total, tr, tu, tw, j.n / tb, total / 1e6 / tb);
    sf_gpu_free(g, d);
    sf_pinned_free(h);
    sf_gpu_destroy(g);
    free(j.bytes);
    return j.fail;
}
