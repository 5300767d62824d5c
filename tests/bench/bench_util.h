/* Small helpers shared by the benchmark programs in tests/bench/: a check
 * that stops the benchmark on a failed call, medians and a wall clock. */
#ifndef SKYFIND_BENCH_UTIL_H
#define SKYFIND_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
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

#endif
