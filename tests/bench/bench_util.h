/* Small helpers shared by the benchmark programs in tests/bench/: a check
 * that stops the benchmark on a failed call, medians and a wall clock. */
#ifndef SKYFIND_BENCH_UTIL_H
#define SKYFIND_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "skyfind/gpu.h"
#include "skyfind/status.h"

#define CHECK(x)                                                                    \
    do {                                                                            \
        sf_status s_ = (x);                                                         \
        if (s_) {                                                                   \
            fprintf(stderr, "bench: %s failed: %s: %s\n", #x, sf_strerror(s_),      \
                    sf_errdetail());                                                \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static inline int bench_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (reorders v). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline double wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The GPU context of a benchmark, or NULL after printing "SKIP: no CUDA
 * device: the WHAT benchmark needs a GPU" (the benchmark then exits 0). */
static inline sf_gpu *bench_gpu(const char *what)
{
    sf_gpu *g;
    if (sf_gpu_count() < 1) {
        printf("SKIP: no CUDA device: the %s benchmark needs a GPU\n", what);
        return NULL;
    }
    CHECK(sf_gpu_create(&g, 0));
    return g;
}

/* "2048,4096" into v[0..max); returns the count. */
static inline int bench_list(char *p, int *v, int max)
{
    int n = 0;
    while (*p && n < max) {
        v[n++] = (int)strtol(p, &p, 10);
        if (*p == ',')
            p++;
    }
    return n;
}

/* The options every benchmark takes. */
typedef struct {
    int sizes[16], nsizes, repeat;
    const char *raw;  /* --raw DIR: write the inputs for the Python peers */
} bench_opts;

/* Defaults: 2048, 4096, 8192; 20 repeats. */
static inline void bench_opts_default(bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->sizes[0] = 2048, o->sizes[1] = 4096, o->sizes[2] = 8192;
    o->nsizes = 3;
    o->repeat = 20;
}

/* Consume --sizes, --repeat or --raw at argv[*i]; 1 if it was one of them. */
static inline int bench_opt(int argc, char **argv, int *i, bench_opts *o)
{
    if (*i + 1 >= argc)
        return 0;
    if (!strcmp(argv[*i], "--sizes"))
        o->nsizes = bench_list(argv[++*i], o->sizes, 16);
    else if (!strcmp(argv[*i], "--repeat"))
        o->repeat = atoi(argv[++*i]) > 0 ? atoi(argv[*i]) : 1;
    else if (!strcmp(argv[*i], "--raw"))
        o->raw = argv[++*i];
    else
        return 0;
    return 1;
}

#endif
