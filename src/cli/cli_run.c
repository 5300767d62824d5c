/* `skyfind run` and `skyfind compare`: read each FILE, run the pipeline on a
 * backend (or both, for compare), write the catalogue and the check images
 * asked for, report. One bad file does not stop the others. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "skyfind/catalog.h"
#include "skyfind/fit.h"
#include "skyfind/fits.h"
#include "skyfind/gpu.h"
#include "skyfind/pipeline.h"
#include "skyfind/preview.h"

#include "cli_run.h"

enum { OPT_SET = 256, OPT_SAVE, OPT_PLANE, OPT_JSON, OPT_DEVICE, OPT_TOL, OPT_STRETCH, OPT_FORMAT,
       OPT_DEVICES, OPT_QUEUE, OPT_READERS, OPT_NO_OVERLAP, OPT_NAME, OPT_MERGE, OPT_RESUME,
       OPT_SHARD, OPT_THREADS };

static const struct option run_opts[] = {
    {"pipeline", required_argument, 0, 'p'}, {"backend", required_argument, 0, 'b'},
    {"output", required_argument, 0, 'o'},   {"set", required_argument, 0, OPT_SET},
    {"save", required_argument, 0, OPT_SAVE}, {"plane", required_argument, 0, OPT_PLANE},
    {"json", no_argument, 0, OPT_JSON},      {"device", required_argument, 0, OPT_DEVICE},
    {"tolerance", required_argument, 0, OPT_TOL}, {"quiet", no_argument, 0, 'q'},
    {"stretch", required_argument, 0, OPT_STRETCH}, {"format", required_argument, 0, OPT_FORMAT},
    {"verbose", no_argument, 0, 'v'},        {"help", no_argument, 0, 'h'},
    {"jobs", required_argument, 0, 'j'},     {"devices", required_argument, 0, OPT_DEVICES},
    {"queue", required_argument, 0, OPT_QUEUE}, {"readers", required_argument, 0, OPT_READERS},
    {"no-overlap", no_argument, 0, OPT_NO_OVERLAP}, {"name", required_argument, 0, OPT_NAME},
    {"merge", required_argument, 0, OPT_MERGE}, {"resume", no_argument, 0, OPT_RESUME},
    {"shard", required_argument, 0, OPT_SHARD}, {"threads", required_argument, 0, OPT_THREADS},
    {0, 0, 0, 0}};

static void run_usage(FILE *f, int compare)
{
    if (compare)
        fprintf(f, "Usage: skyfind compare [OPTIONS] FILE...\n"
                   "Run the pipeline on the CPU and on the GPU and compare every stage's output:\n"
                   "background level and sigma, masks and labels (must be identical) and every\n"
                   "catalogue column (relative tolerance, default 1e-6).\n\n");
    else
        fprintf(f, "Usage: skyfind run [OPTIONS] FILE...\n"
                   "Run a pipeline on each FITS image and write its catalogue\n"
                   "(OUTDIR/NAME.cat.csv; with a fit stage also the Gaussian components,\n"
                   "NAME.comp.csv) and the check images asked for. FILE may be\n"
                   "@LIST (one path a line) or - (paths on standard input). Files stream\n"
                   "through reader threads, every GPU (or N CPU workers) and a writer.\n\n");
    fprintf(f,
            "Options:\n"
            "  -p, --pipeline NAME|FILE  pipeline: a name (radio, aegean, sextractor,\n"
            "                            lesson) or a .pipe file\n"
            "                            (default: radio)\n");
    if (!compare)
        fprintf(f, "  -b, --backend cpu|gpu|auto  where to compute (default auto: the GPU when\n"
                   "                            there is one, else the CPU with a note)\n"
                   "  -o, --output DIR          folder for the outputs (default .; created)\n"
                   "      --save LIST           also write check images: seg, mask, background,\n"
                   "                            rms, filtered, png (previews), model (the fitted\n"
                   "                            Gaussians) and residual (the image less them;\n"
                   "                            with a fit stage), all (comma-separated)\n"
                   "      --stretch asinh|zscale  grey scale of the PNG previews (default asinh)\n"
                   "      --format LIST         catalogue formats: csv, fits, votable, reg\n"
                   "                            (comma-separated; default csv); the component\n"
                   "                            table in each as NAME.comp.csv, .comp.fits, ...\n"
                   "      --name TEMPLATE       output names: {stem} (file name without folder\n"
                   "                            and FITS extensions), {plane} (1-based), {index}\n"
                   "                            (default {stem}; {stem}_p{plane} with --plane all)\n"
                   "      --merge FILE          also one CSV catalogue of every image, with the\n"
                   "                            file and plane as its first columns\n"
                   "      --resume              skip images whose outputs are complete (their\n"
                   "                            NAME.done marker, written last, exists)\n"
                   "      --shard K/N           take only inputs K, K+N, K+2N, ... (1-based), for\n"
                   "                            job arrays\n"
                   "  -j, --jobs N              CPU backend: images run at once (default: one\n"
                   "                            per core, at most one per input image)\n"
                   "      --devices LIST        GPUs to use, e.g. 0,1 (default: all visible)\n"
                   "      --queue N             images read ahead and held in (pinned) host\n"
                   "                            memory (default: readers + 2 per worker)\n"
                   "      --readers N           reader threads (default: 2 + 2 per GPU, or one\n"
                   "                            per CPU worker)\n"
                   "      --no-overlap          read, upload, run and write one image at a time\n");
    else
        fprintf(f, "      --tolerance REL       relative tolerance for float outputs (default 1e-6)\n");
    fprintf(f,
            "      --threads N           cores for the CPU stages' threads (default:\n"
            "                            OMP_NUM_THREADS, else every core); the outputs\n"
            "                            are the same whatever N\n"
            "      --set STAGE.PARAM=VALUE  override a parameter of the pipeline (repeatable)\n"
            "      --plane N|all         image plane of a cube, 1-based, or every plane as\n"
            "                            its own image (default 1, with a note)\n"
            "      --device N            CUDA device (default 0; run: as --devices N)\n"
            "      --json                one JSON object per file on stdout\n"
            "  -q, --quiet               only errors on stderr\n"
            "  -v, --verbose             more detail on stderr\n"
            "  -h, --help                this help\n");
}

static int parse_save(const char *list, unsigned *save)
{
    char buf[256], *tok, *sv = NULL;
    snprintf(buf, sizeof buf, "%s", list);
    for (tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        if (!strcmp(tok, "seg") || !strcmp(tok, "segmentation"))
            *save |= SAVE_SEG;
        else if (!strcmp(tok, "mask"))
            *save |= SAVE_MASK;
        else if (!strcmp(tok, "background") || !strcmp(tok, "bkg"))
            *save |= SAVE_BKG;
        else if (!strcmp(tok, "rms"))
            *save |= SAVE_RMS;
        else if (!strcmp(tok, "png"))
            *save |= SAVE_PNG;
        else if (!strcmp(tok, "filtered") || !strcmp(tok, "filt"))
            *save |= SAVE_FILT;
        else if (!strcmp(tok, "residual") || !strcmp(tok, "resid"))
            *save |= SAVE_RESID | SAVE_FIT_NAMED;
        else if (!strcmp(tok, "model"))
            *save |= SAVE_MODEL | SAVE_FIT_NAMED;
        else if (!strcmp(tok, "all"))
            *save |= SAVE_SEG | SAVE_MASK | SAVE_BKG | SAVE_RMS | SAVE_PNG | SAVE_FILT |
                     SAVE_RESID | SAVE_MODEL;
        else
            return -1;
    }
    return 0;
}

int parse_args(int argc, char **argv, run_args *a, int compare, int *first)
{
    const char *cmd = compare ? "compare" : "run";
    int c;
    memset(a, 0, sizeof *a);
    a->pipe = "radio";
    a->backend = "auto";
    a->outdir = ".";
    a->tol = 1e-6;
    a->overlap = 1;
    a->sets = calloc((size_t)argc + 1, sizeof *a->sets);
    optind = 1;
    while ((c = getopt_long(argc, argv, compare ? "p:qvh" : "p:b:o:j:qvh", run_opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'p': a->pipe = optarg; break;
        case 'b':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu") && strcmp(optarg, "auto"))
                return cli_usage_error(cmd, "--backend must be cpu, gpu or auto, not '%s'", optarg);
            a->backend = optarg;
            break;
        case 'o': a->outdir = optarg; break;
        case OPT_SET: a->sets[a->nsets++] = optarg; break;
        case OPT_SAVE:
            if (compare || parse_save(optarg, &a->save))
                return cli_usage_error(cmd, "--save takes seg, mask, background, rms, filtered, png, residual, model or all, not '%s'", optarg);
            break;
        case OPT_FORMAT: {
            char buf[256], *tok, *sv = NULL;
            snprintf(buf, sizeof buf, "%s", optarg);
            a->nformats = 0;
            for (tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
                sf_catalog_format f;
                if (compare || a->nformats >= 4 || sf_catalog_format_parse(tok, &f))
                    return cli_usage_error(cmd, "--format takes csv, fits, votable or reg, not '%s'", tok);
                a->formats[a->nformats++] = (int)f;
            }
            break;
        }
        case OPT_STRETCH:
            if (strcmp(optarg, "asinh") && strcmp(optarg, "zscale"))
                return cli_usage_error(cmd, "--stretch must be asinh or zscale, not '%s'", optarg);
            a->stretch = strcmp(optarg, "zscale") ? SF_STRETCH_ASINH : SF_STRETCH_ZSCALE;
            break;
        case OPT_PLANE:
            if (!compare && !strcmp(optarg, "all")) {
                a->plane_all = 1;
                a->plane = 0;
                break;
            }
            a->plane = (int)strtol(optarg, &end, 10);
            a->plane_all = 0;
            if (*end || a->plane < 1)
                return cli_usage_error(cmd, "--plane needs a plane number from 1%s, not '%s'",
                                       compare ? "" : " or all", optarg);
            break;
        case 'j':
            a->jobs = (int)strtol(optarg, &end, 10);
            if (*end || a->jobs < 1 || a->jobs > 4096)
                return cli_usage_error(cmd, "--jobs needs a number from 1 to 4096, not '%s'", optarg);
            break;
        case OPT_THREADS:
            a->threads = (int)strtol(optarg, &end, 10);
            if (*end || a->threads < 1 || a->threads > 4096)
                return cli_usage_error(cmd, "--threads needs a number from 1 to 4096, not '%s'", optarg);
            break;
        case OPT_QUEUE:
            a->queue = (int)strtol(optarg, &end, 10);
            if (*end || a->queue < 1 || a->queue > 1024)
                return cli_usage_error(cmd, "--queue needs a number from 1 to 1024, not '%s'", optarg);
            break;
        case OPT_READERS:
            a->readers = (int)strtol(optarg, &end, 10);
            if (*end || a->readers < 1 || a->readers > 64)
                return cli_usage_error(cmd, "--readers needs a number from 1 to 64, not '%s'", optarg);
            break;
        case OPT_NO_OVERLAP: a->overlap = 0; break;
        case OPT_NAME: a->name_tpl = optarg; break;
        case OPT_MERGE: a->merge = optarg; break;
        case OPT_RESUME: a->resume = 1; break;
        case OPT_SHARD: {
            int k = 0, nn = 0, used = 0;
            if (sscanf(optarg, "%d/%d%n", &k, &nn, &used) != 2 || optarg[used] || nn < 1 || k < 1 || k > nn)
                return cli_usage_error(cmd, "--shard needs K/N with 1 <= K <= N, not '%s'", optarg);
            a->shard_k = k;
            a->shard_n = nn;
            break;
        }
        case OPT_DEVICES: {
            char buf[512], *tok, *sv = NULL;
            snprintf(buf, sizeof buf, "%s", optarg);
            a->ndevices = 0;
            if (!strcmp(optarg, "all"))
                break;
            for (tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
                long d = strtol(tok, &end, 10);
                if (*end || d < 0 || d > 1023 || a->ndevices >= (int)(sizeof a->devices / sizeof *a->devices))
                    return cli_usage_error(cmd, "--devices needs device numbers like 0,1 (or all), not '%s'", optarg);
                for (int k = 0; k < a->ndevices; k++)
                    if (a->devices[k] == (int)d)
                        return cli_usage_error(cmd, "--devices names device %ld twice", d);
                a->devices[a->ndevices++] = (int)d;
            }
            if (!a->ndevices)
                return cli_usage_error(cmd, "--devices needs device numbers like 0,1 (or all), not '%s'", optarg);
            break;
        }
        case OPT_JSON: a->json = 1; break;
        case OPT_DEVICE:
            a->device = (int)strtol(optarg, &end, 10);
            if (*end || a->device < 0)
                return cli_usage_error(cmd, "--device needs a device number, not '%s'", optarg);
            a->devices[0] = a->device;
            a->ndevices = 1;
            break;
        case OPT_TOL:
            a->tol = strtod(optarg, &end);
            if (*end || !(a->tol >= 0))
                return cli_usage_error(cmd, "--tolerance needs a number >= 0, not '%s'", optarg);
            break;
        case 'q': sf_verbosity = 0; break;
        case 'v': sf_verbosity = 2; break;
        case 'h': run_usage(stdout, compare); exit(SF_EXIT_OK);
        default: return cli_usage_error(cmd, "invalid option");
        }
    }
    if (optind >= argc)
        return cli_usage_error(cmd, "no input FILE given");
    if (a->nformats == 0)
        a->formats[a->nformats++] = SF_CAT_CSV;
    *first = optind;
    return SF_EXIT_OK;
}

/* Load the pipeline and apply --set; exit code on failure. */
int load_pipeline(run_args *a, sf_pipeline *pl)
{
    sf_status st = sf_pipeline_find(a->pipe, a->pipe_path, sizeof a->pipe_path);
    if (st) {
        cli_error("%s", sf_errdetail());
        return SF_EXIT_USAGE;
    }
    st = sf_pipeline_load(a->pipe_path, pl);
    if (st) {
        cli_error("%s", sf_errdetail());
        return st == SF_ERR_PIPE ? SF_EXIT_PIPE : SF_EXIT_FAIL;
    }
    for (int i = 0; i < a->nsets; i++)
        if (sf_pipeline_set(pl, a->sets[i])) {
            int rc = cli_usage_error(NULL, "%s", sf_errdetail());
            sf_pipeline_free(pl);
            return rc;
        }
    return SF_EXIT_OK;
}

/* File name without folder, extended-name brackets and FITS extensions. */
void file_stem(const char *path, char *stem, size_t n)
{
    const char *b = strrchr(path, '/');
    char *p;
    snprintf(stem, n, "%s", b ? b + 1 : path);
    if ((p = strchr(stem, '[')))
        *p = '\0';
    static const char *ext[] = {".gz", ".fz", ".fits", ".fit", ".fts", ".FITS", ".FIT", NULL};
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; ext[i]; i++) {
            size_t l = strlen(stem), e = strlen(ext[i]);
            if (l > e && !strcmp(stem + l - e, ext[i])) {
                stem[l - e] = '\0';
                again = 1;
            }
        }
    }
}

/* Create the folder and its parents; safe when other processes create the
 * same folders at the same time (EEXIST is success). 0, or -1 with errno. */
int ensure_dir(const char *dir)
{
    struct stat sb;
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST && errno != EACCES && errno != EPERM) {
                /* an unusable parent is reported below, as the folder's own failure */
            }
            *p = '/';
        }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    if (stat(buf, &sb) != 0)
        return -1;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return access(buf, W_OK);
}

static void human_bytes(uint64_t b, char *buf, size_t n)
{
    if (b >= 1000000)
        snprintf(buf, n, "%.2f MB", b / 1e6);
    else if (b >= 1000)
        snprintf(buf, n, "%.2f kB", b / 1e3);
    else
        snprintf(buf, n, "%llu B", (unsigned long long)b);
}

/* A run's own counts, for the two reports below. */
static int run_fdr(const sf_run_result *r, long long *pos, long long *neg)
{
    memset(pos, 0, SF_FDR_NBINS * sizeof *pos);
    memset(neg, 0, SF_FDR_NBINS * sizeof *neg);
    if (r->nsources < 0 || r->sign == SF_SIGN_POSITIVE)
        return 0;
    sf_run_fdr_add(r, pos, neg);
    return 1;
}

void report_text(const char *file, const sf_run_result *r, const char *backend,
                 const char *dev, const sf_pipeline *pl)
{
    char h[32], d[32];
    /* the GPU's name, or the build of the CPU twins' loops (simd.h) */
    const char *what = dev ? dev : !strcmp(backend, "cpu") ? sf_simd_name() : NULL;
    fprintf(stderr, "skyfind: %s: %dx%d, pipeline %s, backend %s%s%s%s\n", file, r->nx, r->ny,
            pl->name, backend, what ? " (" : "", what ? what : "", what ? ")" : "");
    for (int i = 0; i < r->nstages; i++) {
        fprintf(stderr, "  %-11s %9.3f ms  ", r->stage[i], r->stage_ms[i]);
        if (!strcmp(r->stage[i], "background") && r->box)
            fprintf(stderr, "maps, box %d px: median level %.6g, median rms %.6g", r->box,
                    r->bkg.median, r->bkg.sigma);
        else if (!strcmp(r->stage[i], "background"))
            fprintf(stderr, "median %.6g, sigma %.6g (%d iterations, %d over the image%s)",
                    r->bkg.median, r->bkg.sigma, r->bkg.niter, r->bkg.npasses,
                    r->bkg.converged ? "" : ", not converged");
        else if (!strcmp(r->stage[i], "segment"))
            fprintf(stderr, "%d islands", r->nislands);
        else if (!strcmp(r->stage[i], "deblend"))
            fprintf(stderr, "%d islands split into %d objects; %d objects%s", r->nsplit,
                    r->nsplit_objects, r->nlabels,
                    r->deblend_host ? " (on the host: the trees did not fit the GPU's memory)" : "");
        else if (!strcmp(r->stage[i], "measure") && r->sign != SF_SIGN_POSITIVE)
            fprintf(stderr, "%d sources, %d of them negative", r->nsources, r->nneg);
        else if (!strcmp(r->stage[i], "measure"))
            fprintf(stderr, "%d sources", r->nsources);
        else if (!strcmp(r->stage[i], "threshold") && r->nmask >= 0)
            fprintf(stderr, "%lld pixels", r->nmask);
        else if (!strcmp(r->stage[i], "convolve"))
            fprintf(stderr, "%s", r->filter_desc);
        else if (!strcmp(r->stage[i], "fit") && r->ncomps >= 0)
            fprintf(stderr, "%d Gaussian components", r->ncomps);
        fputc('\n', stderr);
    }
    {
        long long pos[SF_FDR_NBINS], neg[SF_FDR_NBINS];
        if (run_fdr(r, pos, neg))
            report_fdr_text("  ", r->nneg, pos, neg);
    }
    if (!strcmp(backend, "gpu")) {
        double dt = 0;
        for (int i = 0; i < r->nstages; i++)
            dt += r->stage_ms[i];
        human_bytes(r->h2d, h, sizeof h);
        human_bytes(r->d2h, d, sizeof d);
        fprintf(stderr, "  device time %.3f ms (+ upload %.3f ms); moved %s host-to-device, %s device-to-host",
                dt, r->upload_ms, h, d);
        if (r->nsources >= 0) {
            uint64_t cat = (uint64_t)r->nsources * sizeof(sf_source);
            fprintf(stderr, " (catalogue %d x %zu B = %llu B, other %lld B)", r->nsources,
                    sizeof(sf_source), (unsigned long long)cat, (long long)r->d2h - (long long)cat);
        }
        fputc('\n', stderr);
    } else {
        fprintf(stderr, "  total %.3f ms\n", r->total_ms);
    }
}

void report_fdr_text(const char *prefix, long long nneg, const long long *pos, const long long *neg)
{
    int any = 0;
    fprintf(stderr, "%s%lld negative detection%s", prefix, nneg, nneg == 1 ? "" : "s");
    for (int k = 0; k < SF_FDR_NBINS; k++) {
        if (pos[k] == 0 && neg[k] == 0)
            continue;
        fprintf(stderr, "%s >=%g %lld/%lld", any ? "," : "; negative/positive by |snr|:",
                sf_fdr_snr[k], neg[k], pos[k]);
        any = 1;
    }
    fputc('\n', stderr);
}

void report_fdr_json(FILE *f, long long nneg, const long long *pos, const long long *neg)
{
    fprintf(f, "\"negatives\":{\"n\":%lld,\"snr\":[", nneg);
    for (int k = 0; k < SF_FDR_NBINS; k++)
        fprintf(f, "%s%g", k ? "," : "", sf_fdr_snr[k]);
    fputs("],\"positive\":[", f);
    for (int k = 0; k < SF_FDR_NBINS; k++)
        fprintf(f, "%s%lld", k ? "," : "", pos[k]);
    fputs("],\"negative\":[", f);
    for (int k = 0; k < SF_FDR_NBINS; k++)
        fprintf(f, "%s%lld", k ? "," : "", neg[k]);
    fputs("]}", f);
}

void report_run_fdr_json(FILE *f, const sf_run_result *r)
{
    long long pos[SF_FDR_NBINS], neg[SF_FDR_NBINS];
    if (run_fdr(r, pos, neg)) {
        fputc(',', f);
        report_fdr_json(f, r->nneg, pos, neg);
    }
}

void report_json(FILE *f, const char *file, const sf_run_result *r, const char *backend,
                 const sf_pipeline *pl, const char *catalog, const char *err)
{
    fputs("{\"file\":", f);
    sf_json_str(f, file);
    fprintf(f, ",\"status\":\"%s\"", err ? "error" : "ok");
    if (err) {
        fputs(",\"error\":", f);
        sf_json_str(f, err);
        fputs("}\n", f);
        return;
    }
    fprintf(f, ",\"nx\":%d,\"ny\":%d,\"backend\":\"%s\",\"pipeline\":", r->nx, r->ny, backend);
    sf_json_str(f, pl->name);
    if (r->have_bkg) {
        fputs(",\"background\":{\"median\":", f);
        sf_json_num(f, r->bkg.median, "%.10g");
        fputs(",\"sigma\":", f);
        sf_json_num(f, r->bkg.sigma, "%.10g");
        fprintf(f, ",\"niter\":%d,\"converged\":%s}", r->bkg.niter, r->bkg.converged ? "true" : "false");
    }
    fprintf(f, ",\"nsources\":%d,\"stages\":[", r->nsources);
    for (int i = 0; i < r->nstages; i++)
        fprintf(f, "%s{\"name\":\"%s\",\"ms\":%.4f}", i ? "," : "", r->stage[i], r->stage_ms[i]);
    fprintf(f, "],\"upload_ms\":%.4f,\"h2d_bytes\":%llu,\"d2h_bytes\":%llu", r->upload_ms,
            (unsigned long long)r->h2d, (unsigned long long)r->d2h);
    report_run_fdr_json(f, r);
    if (catalog) {
        fputs(",\"catalog\":", f);
        sf_json_str(f, catalog);
    }
    fputs("}\n", f);
}

void set_beam(sf_run_opts *o, const sf_fits_info *info, int nx, int ny)
{
    sf_beam_pixels b;
    sf_fits_beam_pixels(info, nx, ny, &b);
    sf_run_opts_beam(o, &b);
}

/* Read one plane of a file, with the cube note. */
sf_status read_input(const char *file, const run_args *a, sf_gpu *g, sf_image *img,
                            sf_fits_info *info)
{
    sf_status st = sf_fits_read(file, a->plane ? a->plane - 1 : -1, g, img, info);
    if (st == SF_OK && info->nplanes > 1 && !a->plane)
        cli_note("%s: a cube of %d planes; using plane 1 (choose with --plane N)", file,
                 info->nplanes);
    return st;
}

/* The fit stage's check images: STEM.model.fits, the fitted Gaussians
 * rendered on a zero image, and STEM.residual.fits, the input image less
 * them (float32, the input's header, as the background maps). Without a fit
 * stage nothing, and a note (once a process) when they were named. */
static sf_status write_fit_images(const char *file, const char *stem, const run_args *a,
                                  const sf_fits_info *info, const sf_image *img,
                                  const sf_run_result *r)
{
    static atomic_int noted;
    char path[4096];
    sf_image im = {0};
    sf_status st = SF_OK;
    if (r->ncomps < 0) {
        if ((a->save & SAVE_FIT_NAMED) && !atomic_exchange(&noted, 1))
            cli_note("--save residual,model: the pipeline has no fit stage; no model or residual "
                     "image written");
        return SF_OK;
    }
    if ((st = sf_image_alloc(&im, r->nx, r->ny, SF_HOST, NULL)))
        return st;
    for (int pass = 0; pass < 2 && st == SF_OK; pass++) {
        const int model = pass == 0;
        if (!(a->save & (model ? SAVE_MODEL : SAVE_RESID)))
            continue;
        if (!model && (!img->data || img->loc != SF_HOST || img->nx != r->nx || img->ny != r->ny)) {
            st = sf_fail(SF_ERR_PARAM, "%s: no host copy of the image for the residual", file);
            break;
        }
        for (int y = 0; y < r->ny; y++) { /* zero, or the image */
            float *row = im.data + (size_t)y * im.stride;
            if (model)
                memset(row, 0, (size_t)r->nx * sizeof *row);
            else
                memcpy(row, img->data + (size_t)y * img->stride, (size_t)r->nx * sizeof *row);
        }
        sf_fit_render(r->comps, r->ncomps, model ? 1.0f : -1.0f, &im);
        snprintf(path, sizeof path, "%s/%s.%s.fits", a->outdir, stem, model ? "model" : "residual");
        st = sf_fits_write_image(path, info, SF_FITS_FLOAT32, im.data, r->nx, r->ny, 0, NULL);
    }
    sf_image_free(&im, NULL);
    return st;
}

sf_status write_outputs(const char *file, const char *stem, const run_args *a,
                        const sf_pipeline *pl, const char *backend, const sf_fits_info *info,
                        const sf_image *img, const sf_run_result *r, char *catalog, size_t catn)
{
    char path[4096];
    sf_status st = SF_OK;
    sf_wcs *w = r->nsources >= 0 || r->ncomps >= 0 ? sf_wcs_open(info, r->nx, r->ny)
                                                    : NULL; /* NULL: no WCS */
    sf_catalog_meta meta;
    sf_catalog_meta_init(&meta, file, pl->name, backend, info, r, w);
    catalog[0] = '\0';
    for (int k = 0; k < a->nformats && st == SF_OK; k++) {
        sf_catalog_format f = (sf_catalog_format)a->formats[k];
        if (r->nsources >= 0) {
            snprintf(path, sizeof path, "%s/%s%s", a->outdir, stem, sf_catalog_format_suffix(f));
            if (k == 0)
                snprintf(catalog, catn, "%s", path);
            st = sf_catalog_write(path, f, r->sources, r->nsources, &meta);
        }
        if (st == SF_OK && r->ncomps >= 0) { /* the fit stage's components, beside it */
            snprintf(path, sizeof path, "%s/%s%s", a->outdir, stem, sf_catalog_comp_suffix(f));
            st = sf_catalog_write_components(path, f, r->comps, r->ncomps, &meta);
        }
    }
    sf_wcs_close(w);
    if (st)
        return st;
    if ((a->save & SAVE_SEG) && r->have_labels) {
        snprintf(path, sizeof path, "%s/%s.seg.fits", a->outdir, stem);
        if ((st = sf_fits_write_image(path, info, SF_FITS_INT32, r->labels.data, r->nx, r->ny, 1, NULL)))
            return st;
    }
    if ((a->save & SAVE_MASK) && r->have_mask) {
        snprintf(path, sizeof path, "%s/%s.mask.fits", a->outdir, stem);
        if ((st = sf_fits_write_image(path, info, SF_FITS_UINT8, r->mask.data, r->nx, r->ny, 1, NULL)))
            return st;
    }
    if ((a->save & SAVE_BKG) && r->bkgmap.data) {
        snprintf(path, sizeof path, "%s/%s.bkg.fits", a->outdir, stem);
        if ((st = sf_fits_write_image(path, info, SF_FITS_FLOAT32, r->bkgmap.data, r->nx, r->ny, 0, NULL)))
            return st;
    }
    if (a->save & SAVE_PNG) { /* previews: the image, the islands, the sources on the image */
        snprintf(path, sizeof path, "%s/%s.png", a->outdir, stem);
        if ((st = sf_preview_image(path, img, a->stretch)))
            return st;
        if (r->have_labels) {
            snprintf(path, sizeof path, "%s/%s.segmap.png", a->outdir, stem);
            if ((st = sf_preview_segmap(path, &r->labels)))
                return st;
        }
        if (r->nsources >= 0) {
            snprintf(path, sizeof path, "%s/%s.overlay.png", a->outdir, stem);
            if ((st = sf_preview_overlay(path, img, r->sources, r->nsources, a->stretch)))
                return st;
        }
    }
    if ((a->save & SAVE_FILT) && r->filtered.data) {
        snprintf(path, sizeof path, "%s/%s.filt.fits", a->outdir, stem);
        if ((st = sf_fits_write_image(path, info, SF_FITS_FLOAT32, r->filtered.data, r->nx, r->ny, 0, NULL)))
            return st;
    }
    if ((a->save & SAVE_RMS) && r->rmsmap.data) {
        snprintf(path, sizeof path, "%s/%s.rms.fits", a->outdir, stem);
        if ((st = sf_fits_write_image(path, info, SF_FITS_FLOAT32, r->rmsmap.data, r->nx, r->ny, 0, NULL)))
            return st;
    }
    if (a->save & (SAVE_RESID | SAVE_MODEL))
        return write_fit_images(file, stem, a, info, img, r);
    return SF_OK;
}

