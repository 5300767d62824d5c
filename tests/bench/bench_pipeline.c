/* Benchmark of whole pipelines and each of their stages, CPU twin and GPU
 * version, on FITS images and on simulated ones (--sizes): warm-up, then the
 * median of --repeat runs; stage times are CUDA-event device times on the GPU
 * and wall times on the CPU (sf_run_result.stage_ms); "end-to-end" is the
 * wall time from FITS read to catalogue written, the image read into
 * pageable memory as the CLI and the API read it (BENCH_READ_PINNED=1 in the
 * environment: into memory pinned per image by cudaMallocHost, as this
 * benchmark did before 2026-11-27). Each stage's achieved GB/s
 * and its floor (the bytes it must move over the copy bandwidth measured in
 * the same run) are printed beside it. The driver of tests/bench/harness.py;
 * it builds without CUDA too and then says that the GPU columns were not run.
 * Usage: bench_pipeline [--sizes A,B,..] [-p lesson,radio] [--repeat N]
 *   [--cpu-repeat N] [--cpu-max N] [--backend cpu|gpu|both] [--workdir DIR]
 *   [--raw] [--json FILE] [--md FILE] [FITS...] */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "skyfind/catalog.h"
#include "skyfind/fits.h"
#include "skyfind/gpu.h"
#include "skyfind/pipeline.h"
#include "skyfind/simulate.h"
#include "skyfind/wcs.h"
#include "bench_util.h"

#define MAXIN 64
#define MAXPIPE 8

typedef struct {
    char input[128];      /* stem: sim_2048, or the FITS file's stem */
    int nx, ny;
    char pipe[64], backend[4], stage[32];
    int runs;             /* 0: not run (see note) */
    double ms, bytes;     /* median; bytes the stage must move (0: no model) */
    double gbps, floor_ms;
    int nsrc;             /* -1: not applicable */
    char note[160];
} row;

static row *rows;
static int nrows, caprows;

static row *add_row(const char *input, int nx, int ny, const char *pipe, const char *backend,
                    const char *stage)
{
    if (nrows == caprows) {
        caprows = caprows ? 2 * caprows : 64;
        rows = realloc(rows, sizeof *rows * (size_t)caprows);
        if (!rows) {
            fprintf(stderr, "bench_pipeline: out of memory\n");
            exit(1);
        }
    }
    row *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->input, sizeof r->input, "%s", input);
    r->nx = nx;
    r->ny = ny;
    snprintf(r->pipe, sizeof r->pipe, "%s", pipe);
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    snprintf(r->stage, sizeof r->stage, "%s", stage);
    r->nsrc = -1;
    return r;
}

static void print_header(void)
{
    printf("%-14s %-11s %-8s %-4s %-11s %11s %4s %8s %10s %8s  %s\n", "input", "size", "pipeline",
           "bk", "stage", "median_ms", "runs", "GB/s", "floor_ms", "sources", "note");
}

typedef struct {
    char size[32], ms[32], gb[32], fl[32], ns[32];
} cells;

/* A row's numbers as text, "-" where there is none. */
static void row_cells(const row *r, cells *c)
{
    snprintf(c->size, sizeof c->size, "%dx%d", r->nx, r->ny);
    strcpy(c->ms, "-");
    strcpy(c->gb, "-");
    strcpy(c->fl, "-");
    strcpy(c->ns, "-");
    if (r->runs)
        snprintf(c->ms, sizeof c->ms, "%.3f", r->ms);
    if (r->runs && r->bytes > 0)
        snprintf(c->gb, sizeof c->gb, r->gbps < 10 ? "%.2f" : "%.1f", r->gbps);
    if (r->runs && r->floor_ms > 0)
        snprintf(c->fl, sizeof c->fl, "%.3f", r->floor_ms);
    if (r->nsrc >= 0)
        snprintf(c->ns, sizeof c->ns, "%d", r->nsrc);
}

static void print_row(const row *r)
{
    cells c;
    row_cells(r, &c);
    printf("%-14s %-11s %-8s %-4s %-11s %11s %4d %8s %10s %8s  %s\n", r->input, c.size, r->pipe,
           r->backend, r->stage, c.ms, r->runs, c.gb, c.fl, c.ns, r->note);
    fflush(stdout);
}

/* The bytes a stage must move at least, reading each input once and writing
 * each output once (n pixels, float32 image, uint8 mask, int32 labels):
 *   background global: read the image once (4n; every clipping iteration
 *     after the first could be avoided in principle, so the floor counts one)
 *   background mesh:   read the image, write the level and rms maps (12n)
 *   threshold:         read the image (+ both maps after a mesh background),
 *                      write the mask (5n, or 13n)
 *   segment:           read the mask, write the labels (5n)
 *   measure:           read the image and the labels (8n)
 *   convolve:          read the image, write the filtered image (8n)
 *   any other stage:   read and write the image (8n) */
static double stage_bytes(const sf_pipeline *pl, int step, size_t n, int *mesh_seen)
{
    const char *name = pl->steps[step].def->name;
    double N = (double)n;
    if (!strcmp(name, "background")) {
        int mesh = ((const sf_bkg_params *)pl->steps[step].params)->method == SF_BKG_MESH;
        *mesh_seen = mesh;
        return mesh ? 12 * N : 4 * N;
    }
    if (!strcmp(name, "threshold"))
        return (*mesh_seen ? 13 : 5) * N;
    if (!strcmp(name, "segment"))
        return 5 * N;
    if (!strcmp(name, "fit")) /* two passes over labels, image and maps (count, scatter) */
        return (*mesh_seen ? 32 : 16) * N;
    return 8 * N; /* measure, convolve, unknown */
}

/* Host copy bandwidth (one thread, memcpy of 64 MB, median of 7), counting
 * read plus write bytes as sf_gpu_copy_bandwidth does. */
static double host_copy_bandwidth(void)
{
    size_t bytes = (size_t)64 << 20;
    char *a = malloc(bytes), *b = malloc(bytes);
    double t[7];
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, bytes);
    memcpy(b, a, bytes);
    for (int i = 0; i < 7; i++) {
        double t0 = wall_ms();
        memcpy(b, a, bytes);
        t[i] = wall_ms() - t0;
        a[i] = b[bytes - 1 - i]; /* keep the copies from being elided */
    }
    free(a);
    free(b);
    return 2.0 * (double)bytes / (median(t, 7) * 1e6);
}

/* The run options `skyfind run` derives from the header (src/cli/cli_run.c). */
static void set_beam(sf_run_opts *o, const sf_fits_info *info, int nx, int ny)
{
    sf_beam_pixels b;
    memset(o, 0, sizeof *o);
    sf_fits_beam_pixels(info, nx, ny, &b);
    o->beam_pix = b.bmaj_pix;
    o->beam_min_pix = b.bmin_pix;
    o->beam_pa_deg = b.bpa_deg;
    o->pix_arcsec = b.pix_arcsec;
}

static void file_stem(const char *path, char *stem, size_t n)
{
    const char *b = strrchr(path, '/');
    char *p;
    snprintf(stem, n, "%s", b ? b + 1 : path);
    if ((p = strchr(stem, '[')))
        *p = '\0';
    static const char *ext[] = {".gz", ".fz", ".fits", ".fit", ".fts", ".FITS", ".FIT"};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
            size_t l = strlen(stem), e = strlen(ext[i]);
            if (l > e && !strcmp(stem + l - e, ext[i])) {
                stem[l - e] = '\0';
                again = 1;
            }
        }
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

typedef struct {
    char path[1024], stem[128], raw[1100];
    int nx, ny, nsim;   /* nsim: the simulated size, 0 for a FITS input */
    double beam_pix;
    int box[MAXPIPE];   /* mesh box the background used per pipeline, 0 global */
    char cat[MAXPIPE][2][1200]; /* catalogue written per pipeline and backend */
} input;

/* One pipeline on one backend: `repeat` timed runs after a warm-up, each
 * reading the FITS file, running the pipeline and writing the CSV catalogue.
 * The image is pageable unless BENCH_READ_PINNED=1: a 268 MB image pinned
 * for one use costs more than its pageable upload (tests/bench/RESULTS.md). */
static void bench_one(input *in, int pi, const sf_pipeline *pl, sf_gpu *g, int repeat,
                      double bw, const char *workdir, sf_source **keep, int *nkeep)
{
    const char *bk = g ? "gpu" : "cpu";
    const char *pin = getenv("BENCH_READ_PINNED");
    sf_gpu *rg = pin && !strcmp(pin, "1") ? g : NULL; /* the read's context: pinned memory */
    int ns = pl->nsteps, nsrc = -1, ncomp = -1;
    size_t np = sf_npix(in->nx, in->ny);
    double *v = calloc((size_t)repeat * (size_t)(ns + 4), sizeof *v);
    double *stage = v, *sum = v + (size_t)repeat * ns, *pipe = sum + repeat,
           *e2e = pipe + repeat, *up = e2e + repeat;
    char catpath[1200] = "";
    int check = 0;
    if (!v) {
        fprintf(stderr, "bench_pipeline: out of memory\n");
        exit(1);
    }
    snprintf(catpath, sizeof catpath, "%s/%s.%s.%s.cat.csv", workdir, in->stem, pl->name, bk);
    for (int it = -1; it < repeat; it++) {
        sf_image img = {0};
        sf_fits_info info;
        sf_run_result r;
        memset(&info, 0, sizeof info);
        double t0 = wall_ms();
        CHECK(sf_fits_read(in->path, -1, rg, &img, &info));
        sf_run_opts o;
        set_beam(&o, &info, img.nx, img.ny);
        o.backend = g ? SF_BACKEND_GPU : SF_BACKEND_CPU;
        o.gpu = g;
        CHECK(sf_pipeline_run(pl, &img, &o, &r));
        if (r.nsources >= 0) {
            sf_wcs *w = sf_wcs_open(&info, r.nx, r.ny);
            sf_catalog_meta meta = {.input = in->path, .pipeline = pl->name, .backend = bk,
                                    .bunit = info.bunit, .have_bkg = r.have_bkg, .bkg = r.bkg,
                                    .wcs = w, .box = r.box, .bmaj_pix = o.beam_pix,
                                    .bmin_pix = o.beam_min_pix};
            CHECK(sf_catalog_write(catpath, SF_CAT_CSV, r.sources, r.nsources, &meta));
            sf_wcs_close(w);
        }
        double t1 = wall_ms();
        if (it >= 0) {
            double s = 0;
            for (int k = 0; k < ns && k < r.nstages; k++) {
                stage[(size_t)k * repeat + it] = r.stage_ms[k];
                s += r.stage_ms[k];
            }
            sum[it] = s;
            pipe[it] = r.total_ms;
            e2e[it] = t1 - t0;
            up[it] = r.upload_ms;
        }
        if (it == repeat - 1) {
            nsrc = r.nsources;
            ncomp = r.ncomps;
            in->box[pi] = r.box;
            if (r.nsources >= 0)
                snprintf(in->cat[pi][g != NULL], sizeof in->cat[pi][0], "%s", catpath);
            if (!g && r.nsources >= 0) { /* the CPU catalogue, to check the GPU's against */
                free(*keep);
                *keep = malloc(sizeof **keep * ((size_t)r.nsources + 1));
                memcpy(*keep, r.sources, sizeof **keep * (size_t)r.nsources);
                *nkeep = r.nsources;
            } else if (g && *keep) {
                check = 1 + (r.nsources == *nkeep &&
                                !memcmp(*keep, r.sources, sizeof **keep * (size_t)r.nsources));
            }
        }
        sf_run_result_free(&r);
        sf_image_free(&img, rg);
        sf_fits_info_free(&info);
    }
    double total_bytes = 0;
    int mesh = 0;
    if (g) {
        row *u = add_row(in->stem, in->nx, in->ny, pl->name, bk, "upload");
        u->runs = repeat;
        u->ms = median(up, repeat);
        u->bytes = 4.0 * (double)np;
        u->gbps = u->bytes / (u->ms * 1e6);
        snprintf(u->note, sizeof u->note, "host to device (pinned), not in the floor");
        print_row(u);
    }
    for (int k = 0; k < ns; k++) {
        row *s = add_row(in->stem, in->nx, in->ny, pl->name, bk, pl->steps[k].def->name);
        s->runs = repeat;
        s->ms = median(stage + (size_t)k * repeat, repeat);
        s->bytes = stage_bytes(pl, k, np, &mesh);
        total_bytes += s->bytes;
        s->gbps = s->bytes / (s->ms * 1e6);
        s->floor_ms = bw > 0 ? s->bytes / (bw * 1e6) : 0;
        if (!strcmp(s->stage, "background") && in->box[pi])
            snprintf(s->note, sizeof s->note, "%s box %d px",
                     ((const sf_bkg_params *)pl->steps[k].params)->method == SF_BKG_BANE ? "bane"
                                                                                     : "mesh",
                     in->box[pi]);
        else if (!strcmp(s->stage, "measure"))
            s->nsrc = nsrc;
        else if (!strcmp(s->stage, "fit") && ncomp >= 0) {
            s->nsrc = ncomp;
            snprintf(s->note, sizeof s->note, "%d components, %.3g fits/s", ncomp,
                     s->ms > 0 ? ncomp / (s->ms * 1e-3) : 0.0);
        }
        print_row(s);
    }
    row *s = add_row(in->stem, in->nx, in->ny, pl->name, bk, "stages");
    s->runs = repeat;
    s->ms = median(sum, repeat);
    s->bytes = total_bytes;
    s->gbps = total_bytes / (s->ms * 1e6);
    s->floor_ms = bw > 0 ? total_bytes / (bw * 1e6) : 0;
    s->nsrc = nsrc;
    snprintf(s->note, sizeof s->note, "sum of the stages%s", g ? " (device time)" : "");
    print_row(s);
    s = add_row(in->stem, in->nx, in->ny, pl->name, bk, "pipeline");
    s->runs = repeat;
    s->ms = median(pipe, repeat);
    s->nsrc = nsrc;
    snprintf(s->note, sizeof s->note, "%s%s", g ? "wall: buffers, upload, stages, catalogue down"
                                                : "wall: buffers and stages",
             check == 2 ? "; catalogue = cpu" : check == 1 ? "; CATALOGUE DIFFERS FROM CPU" : "");
    print_row(s);
    s = add_row(in->stem, in->nx, in->ny, pl->name, bk, "end-to-end");
    s->runs = repeat;
    s->ms = median(e2e, repeat);
    s->nsrc = nsrc;
    snprintf(s->note, sizeof s->note, "wall: FITS read to CSV catalogue written");
    print_row(s);
    free(v);
}

static int parse_list(const char *arg, char out[][64], int max)
{
    char buf[1024], *tok, *sv = NULL;
    int n = 0;
    snprintf(buf, sizeof buf, "%s", arg);
    for (tok = strtok_r(buf, ",", &sv); tok && n < max; tok = strtok_r(NULL, ",", &sv))
        snprintf(out[n++], 64, "%s", tok);
    return n;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_pipeline [--sizes A,B,..] [-p lesson,radio] [--repeat N] [--cpu-repeat N]\n"
            "         [--cpu-max N] [--backend cpu|gpu|both] [--workdir DIR] [--raw]\n"
            "         [--json FILE] [--md FILE] [FITS...]\n"
            "  --sizes      simulate square images of these sizes (skyfind simulate -n N --seed N)\n"
            "  --repeat     timed runs per pipeline and backend after one warm-up (default 5)\n"
            "  --cpu-repeat timed runs on the CPU (default: --repeat)\n"
            "  --cpu-max    skip the CPU backend for images larger than N on a side\n"
            "  --workdir    keep the simulated images, catalogues and raw files here\n"
            "               (default: a temporary folder, removed at the end)\n"
            "  --raw        also write each image as raw float32 (STEM.f32) for the peers\n");
}

int main(int argc, char **argv)
{
    char sizes_s[MAXIN][64], pipes_s[MAXPIPE][64] = {"lesson", "radio"};
    int nsizes = 0, npipes = 2, repeat = 5, cpu_repeat = 0, cpu_max = 1 << 30, raw = 0;
    const char *backend = "both", *workdir = NULL, *jsonpath = NULL, *mdpath = NULL;
    const char *files[MAXIN];
    int nfiles = 0;
    char tmpdir[] = "/tmp/skyfind-bench-XXXXXX";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (a[0] != '-') {
            if (nfiles < MAXIN)
                files[nfiles++] = a;
            continue;
        } else if (!strcmp(a, "--raw")) {
            raw = 1;
            continue;
        } else if (!val) {
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--sizes"))
            nsizes = parse_list(val, sizes_s, MAXIN);
        else if (!strcmp(a, "-p") || !strcmp(a, "--pipeline"))
            npipes = parse_list(val, pipes_s, MAXPIPE);
        else if (!strcmp(a, "--repeat"))
            repeat = atoi(val);
        else if (!strcmp(a, "--cpu-repeat"))
            cpu_repeat = atoi(val);
        else if (!strcmp(a, "--cpu-max"))
            cpu_max = atoi(val);
        else if (!strcmp(a, "--backend"))
            backend = val;
        else if (!strcmp(a, "--workdir"))
            workdir = val;
        else if (!strcmp(a, "--json"))
            jsonpath = val;
        else if (!strcmp(a, "--md"))
            mdpath = val;
        else {
            fprintf(stderr, "bench_pipeline: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (repeat < 1 || (nsizes == 0 && nfiles == 0) ||
        (strcmp(backend, "cpu") && strcmp(backend, "gpu") && strcmp(backend, "both"))) {
        usage(stderr);
        return 2;
    }
    if (cpu_repeat < 1)
        cpu_repeat = repeat;
    if (!workdir) {
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            return 1;
        }
    } else if (mkdir(workdir, 0777) && errno != EEXIST) {
        perror(workdir);
        return 1;
    }
    const char *wd = workdir ? workdir : tmpdir;

    sf_pipeline pls[MAXPIPE];
    for (int p = 0; p < npipes; p++) {
        char path[1024];
        CHECK(sf_pipeline_find(pipes_s[p], path, sizeof path));
        CHECK(sf_pipeline_load(path, &pls[p]));
    }

    /* the backends, and the copy bandwidths the floors use */
    sf_gpu *g = NULL;
    char gpu_note[160] = "";
    double dev_bw = 0, host_bw = host_copy_bandwidth();
    int want_gpu = strcmp(backend, "cpu") != 0, want_cpu = strcmp(backend, "gpu") != 0;
    if (want_gpu) {
        if (!sf_gpu_compiled())
            snprintf(gpu_note, sizeof gpu_note, "GPU columns not run: this build has no CUDA");
        else if (sf_gpu_count() < 1)
            snprintf(gpu_note, sizeof gpu_note, "GPU columns not run: no CUDA device");
        else if (sf_gpu_create(&g, 0))
            snprintf(gpu_note, sizeof gpu_note, "GPU columns not run: %s", sf_errdetail());
        else
            CHECK(sf_gpu_copy_bandwidth(g, (size_t)256 << 20, &dev_bw));
    } else {
        snprintf(gpu_note, sizeof gpu_note, "GPU columns not run: --backend cpu");
    }
    printf("# skyfind pipeline benchmark: median of %d runs (CPU: %d) after a warm-up; CPU %d OpenMP "
           "thread(s), host copy %.1f GB/s (memcpy, read+write)\n",
           repeat, cpu_repeat, omp_get_max_threads(), host_bw);
    if (g)
        printf("# GPU %s: device-to-device copy %.1f GB/s (cudaMemcpyAsync, read+write); stage "
               "times are CUDA-event device times\n", sf_gpu_name(g), dev_bw);
    else
        printf("# %s\n", gpu_note);
    printf("# floor_ms = bytes the stage must move / copy bandwidth (device for gpu rows, host for "
           "cpu rows)\n");
    if (cpu_max < (1 << 30))
        printf("# CPU backend skipped above %d pixels on a side (--cpu-max)\n", cpu_max);
    print_header();

    /* the inputs: simulated first, then the FITS files given */
    int nin = nsizes + nfiles;
    input *ins = calloc((size_t)nin, sizeof *ins);
    for (int i = 0; i < nin; i++) {
        input *in = &ins[i];
        if (i < nsizes) {
            sf_sim_params sp;
            char truth[1100];
            in->nsim = atoi(sizes_s[i]);
            if (in->nsim < 16) {
                fprintf(stderr, "bench_pipeline: bad size '%s'\n", sizes_s[i]);
                return 2;
            }
            sf_sim_params_default(&sp);
            sp.nx = sp.ny = in->nsim;
            sp.seed = (unsigned long long)in->nsim;
            snprintf(in->path, sizeof in->path, "%s/sim_%d.fits", wd, in->nsim);
            snprintf(truth, sizeof truth, "%s/sim_%d.truth.csv", wd, in->nsim);
            CHECK(sf_simulate_write(&sp, in->path, truth));
        } else {
            snprintf(in->path, sizeof in->path, "%s", files[i - nsizes]);
        }
        file_stem(in->path, in->stem, sizeof in->stem);
        sf_image img = {0};
        sf_fits_info info;
        memset(&info, 0, sizeof info);
        if (sf_fits_read(in->path, -1, NULL, &img, &info)) {
            fprintf(stderr, "bench_pipeline: %s\n", sf_errdetail());
            in->nx = 0;
            continue;
        }
        in->nx = img.nx;
        in->ny = img.ny;
        {
            sf_beam_pixels b;
            sf_fits_beam_pixels(&info, img.nx, img.ny, &b);
            in->beam_pix = b.bmaj_pix;
        }
        if (raw) { /* raw float32, rows of nx, for the Python peers */
            snprintf(in->raw, sizeof in->raw, "%s/%s.f32", wd, in->stem);
            FILE *f = fopen(in->raw, "wb");
            for (int y = 0; f && y < img.ny; y++)
                if (fwrite(img.data + (size_t)y * img.stride, sizeof(float), (size_t)img.nx, f) !=
                    (size_t)img.nx) {
                    fclose(f);
                    f = NULL;
                }
            if (!f || fclose(f)) {
                perror(in->raw);
                return 1;
            }
        }
        sf_image_free(&img, NULL);
        sf_fits_info_free(&info);

        for (int p = 0; p < npipes; p++) {
            sf_source *keep = NULL;
            int nkeep = 0;
            if (want_cpu && (in->nx > cpu_max || in->ny > cpu_max)) {
                row *r = add_row(in->stem, in->nx, in->ny, pls[p].name, "cpu", "all");
                snprintf(r->note, sizeof r->note, "CPU not run: larger than --cpu-max %d", cpu_max);
                print_row(r);
            } else if (want_cpu) {
                bench_one(in, p, &pls[p], NULL, cpu_repeat, host_bw, wd, &keep, &nkeep);
            }
            if (g) {
                bench_one(in, p, &pls[p], g, repeat, dev_bw, wd, &keep, &nkeep);
            } else if (want_gpu) {
                row *r = add_row(in->stem, in->nx, in->ny, pls[p].name, "gpu", "all");
                snprintf(r->note, sizeof r->note, "%s", gpu_note);
                print_row(r);
            }
            free(keep);
        }
    }

    if (jsonpath) {
        FILE *f = fopen(jsonpath, "w");
        if (!f) {
            perror(jsonpath);
            return 1;
        }
        fprintf(f, "{\"tool\":\"bench_pipeline\",\"repeat\":%d,\"cpu_repeat\":%d,\"cpu_threads\":%d,"
                   "\"host_copy_gbps\":%.3f,\"gpu_run\":%s,\"gpu\":",
                repeat, cpu_repeat, omp_get_max_threads(), host_bw, g ? "true" : "false");
        json_str(f, g ? sf_gpu_name(g) : "");
        fprintf(f, ",\"device_copy_gbps\":%.3f,\"gpu_note\":", dev_bw);
        json_str(f, gpu_note);
        fprintf(f, ",\"cpu_max\":%d,\"workdir\":", cpu_max < (1 << 30) ? cpu_max : 0);
        json_str(f, wd);
        fputs(",\n\"images\":[", f);
        for (int i = 0, first = 1; i < nin; i++) {
            if (!ins[i].nx)
                continue;
            fprintf(f, "%s\n{\"input\":", first ? "" : ",");
            first = 0;
            json_str(f, ins[i].stem);
            fputs(",\"fits\":", f);
            json_str(f, ins[i].path);
            fputs(",\"raw\":", f);
            json_str(f, ins[i].raw);
            fprintf(f, ",\"nx\":%d,\"ny\":%d,\"sim_size\":%d,\"beam_pix\":%.4f,\"pipelines\":{",
                    ins[i].nx, ins[i].ny, ins[i].nsim, ins[i].beam_pix);
            for (int p = 0; p < npipes; p++) {
                fprintf(f, "%s\"%s\":{\"box\":%d,\"cat_cpu\":", p ? "," : "", pls[p].name,
                        ins[i].box[p]);
                json_str(f, ins[i].cat[p][0]);
                fputs(",\"cat_gpu\":", f);
                json_str(f, ins[i].cat[p][1]);
                fputc('}', f);
            }
            fputs("}}", f);
        }
        fputs("],\n\"rows\":[", f);
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows[i];
            fprintf(f, "%s\n{\"input\":", i ? "," : "");
            json_str(f, r->input);
            fprintf(f, ",\"nx\":%d,\"ny\":%d,\"pipeline\":\"%s\",\"backend\":\"%s\",\"stage\":\"%s\","
                       "\"runs\":%d,\"ms\":%.5f,\"bytes\":%.0f,\"gbps\":%.4f,\"floor_ms\":%.5f,"
                       "\"nsources\":%d,\"note\":",
                    r->nx, r->ny, r->pipe, r->backend, r->stage, r->runs, r->ms, r->bytes, r->gbps,
                    r->floor_ms, r->nsrc);
            json_str(f, r->note);
            fputc('}', f);
        }
        fputs("]}\n", f);
        fclose(f);
    }
    if (mdpath) {
        FILE *f = fopen(mdpath, "w");
        if (!f) {
            perror(mdpath);
            return 1;
        }
        fprintf(f, "Median of %d runs (CPU: %d) after a warm-up; CPU %d thread(s), host copy %.1f GB/s; ",
                repeat, cpu_repeat, omp_get_max_threads(), host_bw);
        if (g)
            fprintf(f, "GPU %s, device copy %.1f GB/s.\n\n", sf_gpu_name(g), dev_bw);
        else
            fprintf(f, "%s.\n\n", gpu_note);
        fprintf(f, "| input | size | pipeline | backend | stage | median ms | runs | GB/s | floor ms "
                   "| sources | note |\n|---|---|---|---|---|--:|--:|--:|--:|--:|---|\n");
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows[i];
            cells c;
            row_cells(r, &c);
            fprintf(f, "| %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |\n", r->input, c.size,
                    r->pipe, r->backend, r->stage, c.ms, r->runs, c.gb, c.fl, c.ns, r->note);
        }
        fclose(f);
    }
    if (!workdir) { /* the temporary folder and what was written in it */
        for (int i = 0; i < nin; i++) {
            char truth[1100];
            if (ins[i].nsim) {
                unlink(ins[i].path);
                snprintf(truth, sizeof truth, "%s/sim_%d.truth.csv", wd, ins[i].nsim);
                unlink(truth);
            }
            if (ins[i].raw[0])
                unlink(ins[i].raw);
            for (int p = 0; p < npipes; p++)
                for (int b = 0; b < 2; b++)
                    if (ins[i].cat[p][b][0])
                        unlink(ins[i].cat[p][b]);
        }
        if (rmdir(tmpdir))
            fprintf(stderr, "bench_pipeline: could not remove %s: %s\n", tmpdir, strerror(errno));
    }
    for (int p = 0; p < npipes; p++)
        sf_pipeline_free(&pls[p]);
    sf_gpu_destroy(g);
    free(ins);
    free(rows);
    return 0;
}
