/* Reading a FITS plane's bytes from the page cache as src/io/fits.c does
 * (pread into a fresh 2 MB-aligned buffer advised onto huge pages, the
 * chunks shared out dynamically by an OpenMP team), for each team size of
 * 1, 4, 8, 12, 16 threads (up to the cores) and chunk of 2, 4, 8, 16 MB;
 * the median and minimum of 7 reads, each into a new buffer (as a one-file
 * run's read is, first-touch page faults included). No skyfind code: it
 * measures what chunk and team size the reader should use on a machine.
 * Usage: bench_read FILE... (read each once first so it is in the cache) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPS 7
#define HUGE_PAGE ((size_t)2 << 20)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One read of bytes from fd into a new buffer: its milliseconds, or -1. */
static double read_once(int fd, size_t bytes, size_t chunk, int nth)
{
    void *p = NULL;
    const int nchunk = (int)((bytes + chunk - 1) / chunk);
    int bad = 0;
    double t0;
    if (posix_memalign(&p, HUGE_PAGE, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE))
        return -1;
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    t0 = now_ms();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth) reduction(| : bad)
    for (int c = 0; c < nchunk; c++) {
        size_t c0 = (size_t)c * chunk, c1 = c0 + chunk < bytes ? c0 + chunk : bytes;
        while (c0 < c1) {
            ssize_t r = pread(fd, (char *)p + c0, c1 - c0, (off_t)c0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                bad = 1;
                break;
            }
            c0 += (size_t)r;
        }
    }
    t0 = now_ms() - t0;
    free(p);
    return bad ? -1 : t0;
}

int main(int argc, char **argv)
{
    static const int teams[] = {1, 4, 8, 12, 16};
    static const int chunks_mb[] = {2, 4, 8, 16};
    const int ncores = omp_get_num_procs();
    if (argc < 2) {
        fprintf(stderr, "usage: bench_read FILE...\n");
        return 2;
    }
    for (int f = 1; f < argc; f++) {
        struct stat sb;
        const int fd = open(argv[f], O_RDONLY);
        if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0) {
            fprintf(stderr, "bench_read: %s: %s\n", argv[f], strerror(errno ? errno : EINVAL));
            return 1;
        }
        printf("%s: %.1f MB, %d cores\n", argv[f], sb.st_size / 1048576.0, ncores);
        for (size_t ti = 0; ti < sizeof teams / sizeof *teams && teams[ti] <= ncores; ti++)
            for (size_t ci = 0; ci < sizeof chunks_mb / sizeof *chunks_mb; ci++) {
                double t[REPS];
                if (teams[ti] == 1 && ci > 0)
                    continue; /* one thread: the chunk does not matter */
                for (int r = 0; r < REPS; r++)
                    if ((t[r] = read_once(fd, (size_t)sb.st_size, (size_t)chunks_mb[ci] << 20, teams[ti])) < 0) {
                        fprintf(stderr, "bench_read: %s: read failed\n", argv[f]);
                        return 1;
                    }
                qsort(t, REPS, sizeof *t, cmp_double);
                printf("  %2d threads, %2d MB chunks: median %7.2f ms, min %7.2f ms (%.1f GB/s)\n",
                       teams[ti], chunks_mb[ci], t[REPS / 2], t[0], sb.st_size / 1e6 / t[REPS / 2]);
            }
        close(fd);
    }
    return 0;
}
