/* Shared helpers for skyfind's Check suites: test-data paths, the GPU (or a
 * printed skip), deterministic random inputs, comparison reports. */
#ifndef SKYFIND_SFTEST_H
#define SKYFIND_SFTEST_H

#include <check.h>
#include <stdint.h>
#include "skyfind/image.h"
#include "skyfind/gpu.h"

/* Path of a file in SKYFIND_TEST_DATA (default ../shared/data). */
const char *sftest_data(const char *name);
/* 1 if the test-data folder exists. */
int sftest_have_data(void);

/* The shared GPU context, or NULL when there is no CUDA device. */
sf_gpu *sftest_gpu(void);

/* Run a suite. gpu_cases: test cases that need the GPU, added only when a
 * device exists; otherwise "SKIP: no CUDA device (...)" is printed and they
 * are not counted. Returns the process exit code (77 when nothing ran). */
int sftest_main(Suite *s, TCase **gpu_cases, int ngpu);

/* Deterministic random numbers (splitmix64 / xoshiro-style). */
typedef struct { uint64_t s; } sftest_rng;
uint64_t sftest_next(sftest_rng *r);
double sftest_uniform(sftest_rng *r);          /* [0,1) */
double sftest_normal(sftest_rng *r);           /* N(0,1) */

/* Host image of Gaussian noise (sigma 1) plus `nsrc` Gaussian blobs, with a
 * fraction of NaN pixels (some in blocks). */
void sftest_noise_image(sf_image *im, int nx, int ny, uint64_t seed, int nsrc,
                        double nan_frac);
/* Random mask with P(1) = p. */
void sftest_random_mask(sf_mask *m, int nx, int ny, uint64_t seed, double p);

/* Awkward sizes used by every GPU-vs-CPU suite: {nx, ny} pairs, 0-terminated. */
extern const int sftest_sizes[][2];

/* 1 when SKYFIND_TEST_QUICK is set (under compute-sanitizer): small sizes only. */
int sftest_quick(void);

/* SKYFIND_TEST_PART=k/n (0 <= k < n): a suite's comparisons split between
 * n processes that run side by side, so that a slow sanitizer (racecheck on
 * the bane suite) checks all of them in the time of a share. Each call
 * counts one comparison and returns 1 when it is this process's (every
 * n-th, from the k-th); without the variable, always 1. */
int sftest_part_mine(void);

/* A background and an rms map of nx x ny on the host (the test fails if
 * either allocation does). */
void sftest_maps_alloc(sf_image *bkg, sf_image *rms, int nx, int ny);

/* Upload helpers that poison the device output first (0xFF bytes). */
void sftest_poison(sf_gpu *g, void *dev, size_t bytes);

#endif
