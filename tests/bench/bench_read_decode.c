/* A FITS plane read for the CPU twins two ways, alternated on the same file
 * from the page cache: the plane's bytes read (sf_fits_read_raw) and then
 * decoded in place by a pass of its own (sf_decode_cpu), as skyfind did
 * before, against each piece decoded as it is read (sf_fits_read_raw_cpu).
 * Each read goes into a new 2 MB-aligned buffer advised onto huge pages, as
 * a one-file run's is (first-touch page faults included); for each team of
 * 1, 2, 4, 8, 16 threads (up to the cores) the median and minimum of REPS
 * rounds, and the pixels and NaN counts of the two ways compared (exit 1
 * if they differ). SKYFIND_READ_PIECE_KB sets the piece (default 256).
 * Usage: bench_read_decode FILE... (each read once first, into the cache) */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "skyfind/decode.h"
#include "skyfind/fits.h"
#include "bench_util.h"

#define REPS 9
#define HUGE_PAGE ((size_t)2 << 20)

static void *fresh(void *ctx, size_t bytes)
{
    void *p = NULL;
    (void)ctx;
    if (posix_memalign(&p, HUGE_PAGE, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE))
        return NULL;
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

/* One read, the fused way or not: its ms (-1 on failure); the buffer and
 * its NaN count in *buf, *nb. */
static double read_once(const char *path, int fused, void **buf, long long *nb, sf_raw_layout *l,
                        double *t_read)
{
    sf_fits_info info;
    sf_status st;
    double t = wall_ms();
    st = (fused ? sf_fits_read_raw_cpu : sf_fits_read_raw)(path, 0, fresh, NULL, buf, l, &info);
    *t_read = wall_ms() - t;
    if (st == SF_OK && !l->decoded) {
        sf_image im = {0};
        im.nx = l->nx;
        im.ny = l->ny;
        im.stride = (size_t)l->nx;
        im.data = *buf;
        im.loc = SF_HOST;
        if (sf_raw_pixel_bytes(l) != 4)
            st = sf_fail(SF_ERR_FORMAT, "BITPIX %d: not a 4-byte pixel type", l->bitpix);
        else
            st = sf_decode_cpu(*buf, l, &im, nb);
    } else {
        *nb = l->nblank;
    }
    t = wall_ms() - t;
    sf_fits_info_free(&info);
    if (st != SF_OK) {
        fprintf(stderr, "bench_read_decode: %s: %s\n", path, sf_errdetail());
        return -1;
    }
    return t;
}

int main(int argc, char **argv)
{
    static const int teams[] = {1, 2, 4, 8, 16};
    const int ncores = omp_get_num_procs();
    int bad = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: bench_read_decode FILE...\n");
        return 2;
    }
    for (int f = 1; f < argc; f++) {
        printf("%s, %d cores, pieces of %s kB\n", argv[f], ncores,
               getenv("SKYFIND_READ_PIECE_KB") ? getenv("SKYFIND_READ_PIECE_KB") : "256");
        for (size_t ti = 0; ti < sizeof teams / sizeof *teams && teams[ti] <= ncores; ti++) {
            double t[3][REPS];
            size_t bytes = 0;
            omp_set_num_threads(teams[ti]);
            for (int r = 0; r < REPS; r++) {
                void *b[2] = {NULL, NULL};
                long long nb[2] = {0, 0};
                sf_raw_layout l[2];
                for (int w = 0; w < 2; w++) {
                    int fused = (r + w) % 2; /* alternate which goes first */
                    double tr;
                    if ((t[fused][r] = read_once(argv[f], fused, &b[fused], &nb[fused], &l[fused], &tr)) < 0)
                        return 1;
                    if (!fused)
                        t[2][r] = tr;
                }
                bytes = sf_raw_bytes(&l[0]);
                if (nb[0] != nb[1] || memcmp(b[0], b[1], bytes)) {
                    fprintf(stderr, "bench_read_decode: %s: the two reads differ\n", argv[f]);
                    bad = 1;
                }
                free(b[0]);
                free(b[1]);
            }
            for (int w = 0; w < 3; w++) {
                static const char *what[] = {"read, then decode:", "decoded as read:", "(the read alone:)"};
                qsort(t[w], REPS, sizeof(double), bench_cmp_d);
                printf("  %2d threads, %-22s median %7.2f ms, min %7.2f ms (%.1f GB/s)\n", teams[ti],
                       what[w], t[w][REPS / 2], t[w][0], bytes / 1e6 / t[w][REPS / 2]);
            }
        }
    }
    return bad;
}
