/* `skyfind run`: the inputs (paths, @LIST files, - for paths on standard
 * input, --shard), output names from a template, --resume markers, the batch
 * engine's write function (catalogues, check images, the marker last), the
 * progress line, the summary and --merge. Sections, in order: timers;
 * inputs; output names; resume markers; merged catalogue records
 * (--merge); the engine's write function; progress and summary; which
 * inputs this process takes (--shard, MPI ranks); cmd_run. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "cli_run.h"
#include "cli_batch.h"
#include "skyfind/batch.h"
#include "skyfind/catalog.h"
#include "skyfind/gpu.h"

static double wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Milliseconds from this process's start to now (CLOCK_BOOTTIME against the
 * start time in /proc/self/stat, clock-tick resolution); -1 if unknown. */
static double since_process_start_ms(void)
{
    char buf[1024], *p;
    unsigned long long start = 0;
    struct timespec t;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n;
    if (!f)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!(p = strrchr(buf, ')')))
        return -1;
    /* fields after the command: state is field 3; starttime is field 22 */
    for (int field = 3; field <= 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p + 1, "%llu", &start) != 1)
        return -1;
    clock_gettime(CLOCK_BOOTTIME, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6 - start * 1e3 / (double)sysconf(_SC_CLK_TCK);
}

/* ---- inputs ----------------------------------------------------------------- */

static int list_add(batch_ctx *b, const char *path)
{
    if (b->ninputs == b->capinputs) {
        int cap = b->capinputs ? 2 * b->capinputs : 64;
        char **v = realloc(b->inputs, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        b->inputs = v;
        b->capinputs = cap;
    }
    if (!(b->inputs[b->ninputs] = strdup(path)))
        return -1;
    b->ninputs++;
    return 0;
}

/* Paths one a line (blank lines and lines starting with # skipped, trailing
 * blanks and CR trimmed). */
static int list_read(batch_ctx *b, FILE *f, const char *what)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        char *p = line;
        while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t'))
            p[--len] = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        if (list_add(b, p)) {
            rc = -1;
            break;
        }
    }
    free(line);
    if (ferror(f)) {
        cli_error("%s: cannot read the list of inputs: %s", what, strerror(errno));
        return SF_EXIT_USAGE;
    }
    if (rc)
        cli_error("out of memory reading the list of inputs %s", what);
    return rc ? SF_EXIT_FAIL : 0;
}

int batch_inputs(batch_ctx *b, int argc, char **argv, int first)
{
    int stdin_used = 0, rc;
    if (batch_mpi_follower()) /* rank 0 of the MPI run reads the lists for every rank */
        return 0;
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-")) {
            if (stdin_used++)
                return cli_usage_error("run", "- (paths on standard input) given twice");
            if ((rc = list_read(b, stdin, "standard input")))
                return rc;
        } else if (arg[0] == '@' && arg[1]) {
            FILE *f = fopen(arg + 1, "r");
            if (!f) {
                cli_error("%s: cannot open the list of inputs: %s", arg + 1, strerror(errno));
                return SF_EXIT_USAGE;
            }
            rc = list_read(b, f, arg + 1);
            fclose(f);
            if (rc)
                return rc;
        } else if (list_add(b, arg)) {
            cli_error("out of memory for the list of inputs");
            return SF_EXIT_FAIL;
        }
    }
    if (b->ninputs == 0)
        return cli_usage_error("run", "the lists of inputs name no file");
    return 0;
}

/* ---- output names ------------------------------------------------------------ */

/* NAME of an image from the template; -1 when it does not fit. */
int batch_name(const batch_ctx *b, int index, int plane, char *out, size_t n)
{
    const char *t = b->tpl;
    char stem[1024];
    size_t k = 0;
    file_stem(b->inputs[index], stem, sizeof stem);
    for (; *t; t++) {
        char val[1100];
        const char *v = NULL;
        if (*t == '{') {
            if (!strncmp(t, "{stem}", 6)) {
                v = stem;
                t += 5;
            } else if (!strncmp(t, "{plane}", 7)) {
                snprintf(val, sizeof val, "%d", plane + 1);
                v = val;
                t += 6;
            } else if (!strncmp(t, "{index}", 7)) {
                snprintf(val, sizeof val, "%d", index + 1);
                v = val;
                t += 6;
            }
        }
        if (v) {
            size_t l = strlen(v);
            if (k + l >= n)
                return -1;
            memcpy(out + k, v, l);
            k += l;
        } else {
            if (k + 1 >= n)
                return -1;
            out[k++] = *t;
        }
    }
    out[k] = '\0';
    return 0;
}

static int template_check(const char *tpl, int plane_all)
{
    const char *p;
    if (!*tpl)
        return cli_usage_error("run", "--name must not be empty");
    if (strchr(tpl, '/'))
        return cli_usage_error("run", "--name must not contain '/': outputs go to the -o folder");
    for (p = tpl; (p = strchr(p, '{')); p++)
        if (strncmp(p, "{stem}", 6) && strncmp(p, "{plane}", 7) && strncmp(p, "{index}", 7))
            return cli_usage_error("run", "--name: unknown field in '%s' (fields: {stem}, {plane}, {index})", tpl);
    if (plane_all && !strstr(tpl, "{plane}"))
        return cli_usage_error("run", "--name needs {plane} with --plane all (planes would overwrite each other)");
    return 0;
}

/* ---- resume markers ----------------------------------------------------------- */

/* Markers live in OUTDIR/.skyfind/, out of the way of the outputs. */
static void marker_path(const batch_ctx *b, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/.skyfind/%s.done", b->a->outdir, name);
}

static int batch_done(void *ctx, int index, int plane)
{
    batch_ctx *b = ctx;
    char name[1200], path[4600];
    struct stat sb;
    if (!b->a->resume || batch_name(b, index, plane, name, sizeof name))
        return 0;
    marker_path(b, name, path, sizeof path);
    if (stat(path, &sb) != 0)
        return 0;
    batch_record(b, index, plane, name);
    return 1;
}

/* The marker, written last and atomically: the input, its plane and the
 * outputs that are complete. */
static sf_status write_marker(const batch_ctx *b, const sf_batch_item *it, const char *name,
                              const char *catalog)
{
    char path[4600], tmp[4700];
    FILE *f;
    marker_path(b, name, path, sizeof path);
    if (sf_tmp_name(path, tmp, sizeof tmp))
        return sf_fail(SF_ERR_IO, "%s: the name is too long", path);
    if (!(f = fopen(tmp, "w")))
        return sf_fail(SF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    fprintf(f, "input %s\nplane %d\nname %s\ncatalog %s\nnsources %d\n", it->path, it->plane + 1,
            name, catalog, it->result.nsources);
    if (fclose(f) != 0) {
        remove(tmp);
        return sf_fail(SF_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    return sf_atomic_rename(tmp, path);
}

/* ---- merged catalogue records ------------------------------------------------- */

void batch_record(batch_ctx *b, int index, int plane, const char *name)
{
    pthread_mutex_lock(&b->lock);
    if (b->ndone == b->capdone) {
        int cap = b->capdone ? 2 * b->capdone : 256;
        batch_rec *v = realloc(b->done, (size_t)cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&b->lock);
            return;
        }
        b->done = v;
        b->capdone = cap;
    }
    b->done[b->ndone].index = index;
    b->done[b->ndone].plane = plane;
    snprintf(b->done[b->ndone].name, sizeof b->done[b->ndone].name, "%s", name);
    b->ndone++;
    pthread_mutex_unlock(&b->lock);
}

static int rec_cmp(const void *x, const void *y)
{
    const batch_rec *a = x, *b = y;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return (a->plane > b->plane) - (a->plane < b->plane);
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* One CSV of every complete image, in input and plane order: file and plane
 * first, then the columns of the per-image catalogues (whose comment lines,
 * but the first naming its file, head the merged file). */
int batch_merge(batch_ctx *b, const char *out)
{
    char tmp[4200], path[4600], *line = NULL;
    size_t cap = 0;
    FILE *f;
    int header_done = 0;
    long long rows = 0;
    qsort(b->done, (size_t)b->ndone, sizeof *b->done, rec_cmp);
    if (sf_tmp_name(out, tmp, sizeof tmp)) {
        cli_error("%s: the name is too long", out);
        return SF_EXIT_FAIL;
    }
    if (!(f = fopen(tmp, "w"))) {
        cli_error("%s: cannot create the merged catalogue: %s", out, strerror(errno));
        return SF_EXIT_FAIL;
    }
    fprintf(f, "# skyfind %s merged catalogue of %d image%s (pipeline %s)\n", SKYFIND_VERSION,
            b->ndone, b->ndone == 1 ? "" : "s", b->pl->name);
    for (int i = 0; i < b->ndone; i++) {
        const batch_rec *r = &b->done[i];
        FILE *in;
        ssize_t len;
        int first_comment = 1;
        snprintf(path, sizeof path, "%s/%s.cat.csv", b->a->outdir, r->name);
        if (!(in = fopen(path, "r"))) {
            cli_error("%s: cannot read for the merged catalogue: %s", path, strerror(errno));
            fclose(f);
            remove(tmp);
            free(line);
            return SF_EXIT_FAIL;
        }
        while ((len = getline(&line, &cap, in)) >= 0) {
            if (len && line[len - 1] != '\n') { /* every line of a complete catalogue ends */
                cli_error("%s: incomplete last line: not merged", path);
                fclose(in);
                fclose(f);
                remove(tmp);
                free(line);
                return SF_EXIT_FAIL;
            }
            if (line[0] == '#') {
                if (!header_done && !first_comment)
                    fputs(line, f);
                first_comment = 0;
                continue;
            }
            if (!strncmp(line, "id,", 3)) {
                if (!header_done)
                    fprintf(f, "file,plane,%s", line);
                header_done = 1;
                continue;
            }
            csv_field(f, b->inputs[r->index]);
            fprintf(f, ",%d,%s", r->plane + 1, line);
            rows++;
        }
        fclose(in);
    }
    free(line);
    if (fclose(f) != 0) {
        cli_error("%s: cannot write the merged catalogue: %s", out, strerror(errno));
        remove(tmp);
        return SF_EXIT_FAIL;
    }
    if (sf_atomic_rename(tmp, out)) {
        cli_error("%s", sf_errdetail());
        return SF_EXIT_FAIL;
    }
    if (sf_verbosity >= 1)
        cli_note("merged %lld sources of %d images into %s", rows, b->ndone, out);
    return 0;
}

/* ---- the engine's write function ------------------------------------------- */

static void phases_text(const sf_batch_item *it)
{
    double st = 0;
    for (int i = 0; i < it->result.nstages; i++)
        st += it->result.stage_ms[i];
    fprintf(stderr, "  phases: read %.2f ms (%.1f MB), queue %.2f ms, upload %.3f ms, decode %.3f ms, "
                    "stages %.3f ms, write %.2f ms\n",
            it->t_read, it->bytes_read / 1e6, it->t_queue, it->t_upload, it->t_decode, st, it->t_write);
}

static void item_json(const batch_ctx *b, const sf_batch_item *it, const char *catalog)
{
    FILE *f = stdout;
    double st = 0;
    for (int i = 0; i < it->result.nstages; i++)
        st += it->result.stage_ms[i];
    flockfile(f);
    fputs("{\"file\":", f);
    sf_json_str(f, it->path);
    fprintf(f, ",\"plane\":%d,\"status\":\"%s\"", it->plane + 1, it->status ? "error" : "ok");
    if (it->status) {
        fputs(",\"error\":", f);
        sf_json_str(f, it->error);
        fputs("}\n", f);
        funlockfile(f);
        fflush(f);
        return;
    }
    fprintf(f, ",\"nx\":%d,\"ny\":%d,\"backend\":\"%s\",\"device\":%d,\"pipeline\":",
            it->result.nx, it->result.ny, it->backend ? it->backend : "cpu", it->device);
    sf_json_str(f, b->pl->name);
    if (it->result.have_bkg) {
        fputs(",\"background\":{\"median\":", f);
        sf_json_num(f, it->result.bkg.median, "%.10g");
        fputs(",\"sigma\":", f);
        sf_json_num(f, it->result.bkg.sigma, "%.10g");
        fprintf(f, ",\"niter\":%d,\"converged\":%s}", it->result.bkg.niter,
                it->result.bkg.converged ? "true" : "false");
    }
    fprintf(f, ",\"nsources\":%d,\"stages\":[", it->result.nsources);
    for (int i = 0; i < it->result.nstages; i++)
        fprintf(f, "%s{\"name\":\"%s\",\"ms\":%.4f}", i ? "," : "", it->result.stage[i],
                it->result.stage_ms[i]);
    fprintf(f, "],\"upload_ms\":%.4f,\"h2d_bytes\":%llu,\"d2h_bytes\":%llu",
            it->t_upload + it->result.upload_ms,
            (unsigned long long)(it->result.h2d + (it->device >= 0 ? it->bytes_read : 0)),
            (unsigned long long)it->result.d2h);
    fprintf(f, ",\"phases\":{\"read_ms\":%.3f,\"queue_ms\":%.3f,\"upload_ms\":%.4f,\"decode_ms\":%.4f,"
               "\"stages_ms\":%.4f,\"write_ms\":%.3f,\"bytes_read\":%llu}",
            it->t_read, it->t_queue, it->t_upload, it->t_decode, st, it->t_write,
            (unsigned long long)it->bytes_read);
    report_run_fdr_json(f, &it->result);
    if (catalog && *catalog) {
        fputs(",\"catalog\":", f);
        sf_json_str(f, catalog);
    }
    if (it->error[0]) { /* ran, with a note (the CPU fallback) */
        fputs(",\"note\":", f);
        sf_json_str(f, it->error);
    }
    fputs("}\n", f);
    funlockfile(f);
    fflush(f);
}

static sf_status batch_write(void *ctx, sf_batch_item *it)
{
    batch_ctx *b = ctx;
    char name[1200], catalog[4600] = "";
    sf_status st = it->status;
    double t0 = wall_ms();
    if (st == SF_OK && batch_name(b, it->index, it->plane, name, sizeof name))
        st = sf_fail(SF_ERR_PARAM, "%s: the output name from --name is too long", it->path);
    if (st == SF_OK && it->nplanes > 1 && !it->plane_given && !b->a->plane)
        cli_note("%s: a cube of %d planes; using plane 1 (choose with --plane N or --plane all)",
                 it->path, it->nplanes);
    if (st == SF_OK)
        st = write_outputs(it->path, name, b->a, b->pl, it->backend, &it->info, &it->host_img,
                           &it->result, catalog, sizeof catalog);
    if (st == SF_OK)
        st = write_marker(b, it, name, catalog);
    it->t_write = wall_ms() - t0;
    if (st && !it->status) {
        char msg[1300];
        snprintf(msg, sizeof msg, "%s", sf_errdetail());
        it->status = st;
        if (!strstr(msg, it->path))
            snprintf(it->error, sizeof it->error, "%s: %.1200s", it->path, msg);
        else
            snprintf(it->error, sizeof it->error, "%s", msg);
    }
    if (b->progress_shown) { /* the progress line is redrawn after this */
        fputs("\r\033[K", stderr);
    }
    if (it->status) {
        cli_error("%s", it->error);
    } else {
        batch_record(b, it->index, it->plane, name);
        if (it->error[0])
            cli_note("%s", it->error);
        if (sf_verbosity >= 2 || (sf_verbosity >= 1 && b->ninputs == 1 && !b->a->plane_all)) {
            char dev[300] = "";
            if (it->device >= 0)
                snprintf(dev, sizeof dev, "GPU %d", it->device);
            report_text(it->path, &it->result, it->backend, it->device >= 0 ? dev : NULL, b->pl);
            if (sf_verbosity >= 2)
                phases_text(it);
            if (catalog[0])
                fprintf(stderr, "  wrote %s\n", catalog);
        }
    }
    if (b->a->json)
        item_json(b, it, catalog);
    return it->status;
}

/* ---- progress and summary ------------------------------------------------------ */

static void batch_notice(void *ctx, const char *msg)
{
    (void)ctx;
    cli_note("%s", msg);
}

static void batch_progress(void *ctx, const sf_batch_stats *s, int ninputs)
{
    batch_ctx *b = ctx;
    double sec = s->wall_ms / 1e3, rate = sec > 0 ? s->nitems / sec : 0;
    int todo = b->ntodo;
    double eta = rate > 0 && todo > s->nitems + s->nskipped ? (todo - s->nitems - s->nskipped) / rate : 0;
    if (!b->tty || sf_verbosity < 1)
        return;
    fprintf(stderr, "\r\033[K[%d/%d] %.1f files/s, %.0f MB/s, ETA %.0f s, %d failed", s->nitems + s->nskipped,
            todo, rate, sec > 0 ? s->bytes_read / 1e6 / sec : 0, eta, s->nfailed);
    fflush(stderr);
    b->progress_shown = 1;
}

void batch_summary(const batch_ctx *b, const sf_batch_stats *s, int ok, int failed, int skipped)
{
    double sec = s->wall_ms / 1e3;
    double busy = s->wall_ms > 0 ? (s->stages_ms + s->decode_ms) / s->wall_ms : 0;
    if (b->progress_shown)
        fputs("\r\033[K", stderr);
    if (failed && ok + failed > 1)
        cli_error("%d of %d files failed", failed, ok + failed);
    if (sf_verbosity >= 1 && (b->ninputs > 1 || b->a->plane_all || failed || sf_verbosity >= 2))
        fprintf(stderr,
                "skyfind: %d image%s ok, %d failed%s%.0d%s in %.2f s: %.1f files/s, %.0f MB/s read; "
                "%s busy %.0f%%%s\n",
                ok, ok == 1 ? "" : "s", failed, skipped ? ", " : "", skipped,
                skipped ? " already complete (--resume)" : "", sec, sec > 0 ? (ok + failed) / sec : 0,
                sec > 0 ? s->bytes_read / 1e6 / sec : 0, b->gpu ? "GPU" : "CPU workers",
                100 * (b->gpu ? busy : (s->stages_ms / (s->wall_ms > 0 ? s->wall_ms : 1)) /
                                       (b->workers > 0 ? b->workers : 1)),
                b->gpu ? " (stages + decode over wall time)" : "");
    if (sf_verbosity >= 1 && s->nsigned > 0)
        report_fdr_text(s->nsigned > 1 ? "skyfind: all images: " : "skyfind: ", s->nneg, s->fdr_pos,
                        s->fdr_neg);
    if (sf_verbosity >= 2) {
        fprintf(stderr,
                "skyfind: summed phases: read %.1f ms, upload %.1f ms, decode %.1f ms, stages %.1f ms, "
                "write %.1f ms; pinning the buffers %.1f ms\n",
                s->read_ms, s->upload_ms, s->decode_ms, s->stages_ms, s->write_ms, s->pin_ms);
        fprintf(stderr,
                "skyfind: start-up: process start to main %.1f ms, main to the engine %.1f ms, "
                "counting CUDA devices %.1f ms and GPU context %.1f ms (beside the first reads); "
                "first image written at %.1f ms, last at %.1f ms of the engine's %.1f ms\n",
                b->t_main_ms, b->t_engine_ms, b->t_count_ms, s->startup_ms, s->first_done_ms,
                s->last_done_ms, s->wall_ms);
        if (ok + failed > 2 && s->last_done_ms > s->first_done_ms)
            fprintf(stderr, "skyfind: steady state (after the first image): %.1f files/s\n",
                    (ok + failed - 1) / ((s->last_done_ms - s->first_done_ms) / 1e3));
    }
    if (b->a->json) {
        printf("{\"summary\":{\"ok\":%d,\"failed\":%d,\"skipped\":%d,\"wall_ms\":%.3f,\"files_per_s\":%.4f,"
               "\"mb_per_s\":%.3f,\"bytes_read\":%llu,\"nsources\":%lld,\"backend\":\"%s\",\"workers\":%d,\"threads\":%d,"
               "\"read_ms\":%.3f,\"upload_ms\":%.3f,\"decode_ms\":%.3f,\"stages_ms\":%.3f,\"write_ms\":%.3f,"
               "\"startup_ms\":%.3f,\"busy\":%.4f,\"first_done_ms\":%.3f,\"last_done_ms\":%.3f,"
               "\"main_ms\":%.3f,\"to_engine_ms\":%.3f,\"count_ms\":%.3f",
               ok, failed, skipped, s->wall_ms, sec > 0 ? (ok + failed) / sec : 0,
               sec > 0 ? s->bytes_read / 1e6 / sec : 0, (unsigned long long)s->bytes_read, s->nsources,
               b->gpu ? "gpu" : "cpu", b->workers, s->threads, s->read_ms, s->upload_ms, s->decode_ms, s->stages_ms,
               s->write_ms, s->startup_ms, busy, s->first_done_ms, s->last_done_ms, b->t_main_ms,
               b->t_engine_ms, b->t_count_ms);
        if (s->nsigned > 0) { /* the batch's false-detection estimate */
            putchar(',');
            report_fdr_json(stdout, s->nneg, s->fdr_pos, s->fdr_neg);
        }
        printf("}}\n");
        fflush(stdout);
    }
}

/* ---- which inputs this process takes --------------------------------------------- */

static int next_local(void *ctx)
{
    batch_ctx *b = ctx;
    while (b->cursor < b->ninputs) {
        int i = b->cursor++;
        if (!b->a->shard_n || i % b->a->shard_n == b->a->shard_k - 1)
            return i;
    }
    return -1;
}

/* ---- the command ------------------------------------------------------------------- */

int cmd_run(int argc, char **argv)
{
    run_args a;
    sf_pipeline pl;
    batch_ctx b;
    sf_batch_opts o;
    sf_batch_stats s;
    int first, rc, ngpu = 0;
    sf_status st;
    double t_main = wall_ms();
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.lock, NULL);
    b.t_main_ms = since_process_start_ms();
    if ((rc = parse_args(argc, argv, &a, 0, &first)))
        goto out_args;
    if ((rc = load_pipeline(&a, &pl)))
        goto out_args;
    b.a = &a;
    b.pl = &pl;
    b.tpl = a.name_tpl ? a.name_tpl : a.plane_all ? "{stem}_p{plane}" : "{stem}";
    if ((rc = template_check(b.tpl, a.plane_all)))
        goto out_pipe;
    if (a.merge) {
        int csv = 0;
        for (int k = 0; k < a.nformats; k++)
            csv |= a.formats[k] == SF_CAT_CSV;
        if (!csv) {
            rc = cli_usage_error("run", "--merge reads the CSV catalogues: add csv to --format");
            goto out_pipe;
        }
    }
    if ((rc = batch_inputs(&b, argc, argv, first)))
        goto out_pipe;
    if (ensure_dir(a.outdir)) {
        cli_error("%s: cannot create or write the output folder: %s", a.outdir, strerror(errno));
        rc = SF_EXIT_FAIL;
        goto out_pipe;
    }
    {
        char mk[4200];
        int n1 = 0, n2 = 0;
        snprintf(mk, sizeof mk, "%s/.skyfind", a.outdir);
        if (ensure_dir(mk)) {
            cli_error("%s: cannot create the folder of completion markers: %s", mk, strerror(errno));
            rc = SF_EXIT_FAIL;
            goto out_pipe;
        }
        /* temporaries of runs that were killed before they could rename them */
        sf_outdir_clean_stale(a.outdir, &n1);
        sf_outdir_clean_stale(mk, &n2);
        if (n1 + n2 && sf_verbosity >= 2)
            cli_note("%s: removed %d temporary file%s left by killed runs", a.outdir, n1 + n2,
                     n1 + n2 == 1 ? "" : "s");
    }
    b.ntodo = b.ninputs;
    if (a.shard_n)
        b.ntodo = b.ninputs / a.shard_n + (b.ninputs % a.shard_n >= a.shard_k ? 1 : 0);

    memset(&o, 0, sizeof o);
    o.pl = &pl;
    o.overlap = a.overlap;
    o.jobs = a.jobs;
    o.threads = a.threads;
    o.queue = a.queue;
    o.readers = a.readers;
    o.plane = a.plane_all ? SF_PLANE_ALL : a.plane ? a.plane - 1 : SF_PLANE_FIRST;
    if (a.save & (SAVE_SEG | SAVE_PNG))
        o.keep |= SF_KEEP_LABELS;
    if (a.save & SAVE_MASK)
        o.keep |= SF_KEEP_MASK;
    if (a.save & (SAVE_BKG | SAVE_RMS))
        o.keep |= SF_KEEP_BKG;
    if (a.save & SAVE_FILT)
        o.keep |= SF_KEEP_FILTERED;
    o.host_image = !!(a.save & (SAVE_PNG | SAVE_RESID)); /* previews, residual image */
    /* the CLI exits after the run: no GPU teardown, unless a CUDA tool
     * (compute-sanitizer, a profiler) watches the process */
    o.exiting = !getenv("CUDA_INJECTION64_PATH") && !getenv("SKYFIND_CLEAN_EXIT");
    o.next = next_local;
    o.done = batch_done;
    o.write = batch_write;
    o.progress = batch_progress;
    o.ctx = &b;
    b.tty = isatty(2);
    if (batch_mpi_setup(&b, &o, &rc))
        goto out_pipe;

    /* the backend: every visible GPU (or those of --devices), else the CPU.
     * Without --devices (and outside mpirun) the engine counts the GPUs itself
     * while its readers read the first files: the driver's start overlaps them. */
    if (strcmp(a.backend, "cpu") && !a.ndevices && b.nranks <= 1 && sf_gpu_compiled()) {
        o.backend = SF_BACKEND_GPU;
        o.ndevices = 0;
        o.fallback_cpu = !strcmp(a.backend, "auto");
        o.notice = batch_notice;
        ngpu = -1;
    } else if (strcmp(a.backend, "cpu")) {
        double tc = wall_ms();
        ngpu = sf_gpu_count();
        b.t_count_ms = wall_ms() - tc;
        if (ngpu > 0 && a.ndevices) {
            for (int k = 0; k < a.ndevices; k++)
                if (a.devices[k] >= ngpu) {
                    cli_error("no CUDA device %d (found %d): check --devices", a.devices[k], ngpu);
                    rc = SF_EXIT_FAIL;
                    goto out_abort;
                }
        }
        if (ngpu <= 0 && !strcmp(a.backend, "gpu")) {
            cli_error("no CUDA device%s: cannot use --backend gpu (use -b cpu or -b auto)",
                      sf_gpu_compiled() ? " found" : " (this skyfind was built without CUDA)");
            rc = SF_EXIT_FAIL;
            goto out_abort;
        }
        if (ngpu <= 0)
            cli_note("no CUDA device%s: running on the CPU",
                     sf_gpu_compiled() ? " found" : " (built without CUDA)");
    }
    if (ngpu < 0) {
        /* decided by the engine */
    } else if (ngpu > 0) {
        o.backend = SF_BACKEND_GPU;
        o.fallback_cpu = !strcmp(a.backend, "auto");
        if (a.ndevices) {
            o.ndevices = a.ndevices;
            memcpy(o.devices, a.devices, sizeof(int) * (size_t)a.ndevices);
        } else {
            batch_mpi_devices(&b, ngpu, &o);
        }
        b.gpu = 1;
        b.workers = o.ndevices;
    } else {
        o.backend = SF_BACKEND_CPU;
        b.workers = a.jobs > 0 ? a.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
    }

    b.t_engine_ms = wall_ms() - t_main;
    st = sf_batch_run(&o, (const char *const *)b.inputs, b.ninputs, &s);
    if (ngpu < 0) {
        b.gpu = s.gpu;
        b.t_count_ms = s.count_ms;
    }
    if (s.workers > 0)
        b.workers = s.workers;
    if (st) {
        cli_error("%s", sf_errdetail());
        rc = SF_EXIT_FAIL;
        batch_mpi_finish(&b, &s, 1);
        goto out_pipe;
    }
    rc = batch_mpi_finish(&b, &s, 0);
    goto out_pipe;
out_abort: /* after batch_mpi_setup: the other ranks of an MPI run wait for this one */
    memset(&s, 0, sizeof s);
    batch_mpi_finish(&b, &s, 1);
out_pipe:
    sf_pipeline_free(&pl);
out_args:
    for (int i = 0; i < b.ninputs; i++)
        free(b.inputs[i]);
    free(b.inputs);
    free(b.done);
    free(a.sets);
    pthread_mutex_destroy(&b.lock);
    return rc;
}
