/* The .pipe format: one stage per line, `key=value` parameters, `#`
 * comments, validated against the stage registry; errors read
 * "file:line: message". Also typed parameter parsing for --set. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "skyfind/pipeline.h"

static const sf_param_spec *spec_find(const sf_stage_def *d, const char *key, int *idx)
{
    for (int i = 0; i < d->nparams; i++)
        if (strcmp(d->params[i].name, key) == 0) {
            if (idx)
                *idx = i;
            return &d->params[i];
        }
    return NULL;
}

/* A relative file name given in a .pipe file that does not exist from the
 * current folder but does beside the .pipe file is taken from there (so a
 * shipped pipeline can name a kernel file shipped with it). */
static void resolve_path(const sf_stage_def *d, void *params, const char *key, const char *source)
{
    int idx;
    const sf_param_spec *sp = spec_find(d, key, &idx);
    char *v, path[SF_PARAM_STRMAX + 1024];
    const char *slash = source ? strrchr(source, '/') : NULL;
    struct stat sb;
    if (!sp || sp->type != SF_PT_STRING || !slash)
        return;
    v = (char *)params + sp->offset;
    if (!v[0] || v[0] == '/' || stat(v, &sb) == 0)
        return;
    snprintf(path, sizeof path, "%.*s/%s", (int)(slash - source), source, v);
    if (stat(path, &sb) == 0 && strlen(path) < SF_PARAM_STRMAX)
        snprintf(v, SF_PARAM_STRMAX, "%s", path);
}

static int choice_index(const char *choices, const char *value)
{
    int i = 0;
    size_t n = strlen(value);
    for (const char *p = choices; *p; i++) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, value, n) == 0)
            return i;
        if (!e)
            break;
        p = e + 1;
    }
    return -1;
}

sf_status sf_param_set(const sf_stage_def *d, void *params, const char *key, const char *value)
{
    const sf_param_spec *sp = spec_find(d, key, NULL);
    char *end = NULL;
    if (!sp) {
        char names[512] = "";
        for (int i = 0; i < d->nparams; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, d->params[i].name, sizeof names - strlen(names) - 1);
        }
        return sf_fail(SF_ERR_PARAM, "stage '%s' has no parameter '%s' (it has: %s)", d->name, key,
                       d->nparams ? names : "none");
    }
    if (!*value && sp->type != SF_PT_STRING)
        return sf_fail(SF_ERR_PARAM, "%s.%s needs a value", d->name, key);
    errno = 0;
    switch (sp->type) {
    case SF_PT_INT: {
        if (sp->choices && !strcmp(value, "auto") && choice_index(sp->choices, "auto") >= 0) {
            *(int *)((char *)params + sp->offset) = 0; /* auto: resolved at run time */
            break;
        }
        long v = strtol(value, &end, 10);
        if (*end || errno)
            return sf_fail(SF_ERR_PARAM, "%s.%s=%s is not an integer", d->name, key, value);
        if (v < sp->min || v > sp->max)
            return sf_fail(SF_ERR_PARAM, "%s.%s=%ld is outside [%g, %g]", d->name, key, v, sp->min,
                           sp->max);
        if (sp->choices && strcmp(sp->choices, "auto") && choice_index(sp->choices, value) < 0)
            return sf_fail(SF_ERR_PARAM, "%s.%s=%ld: choose one of %s", d->name, key, v, sp->choices);
        *(int *)((char *)params + sp->offset) = (int)v;
        break;
    }
    case SF_PT_REAL: {
        double v = strtod(value, &end);
        if (*end || errno || !isfinite(v))
            return sf_fail(SF_ERR_PARAM, "%s.%s=%s is not a number", d->name, key, value);
        if (v < sp->min || v > sp->max)
            return sf_fail(SF_ERR_PARAM, "%s.%s=%g is outside [%g, %g]", d->name, key, v, sp->min,
                           sp->max);
        *(double *)((char *)params + sp->offset) = v;
        break;
    }
    case SF_PT_CHOICE: {
        int i = choice_index(sp->choices, value);
        if (i < 0)
            return sf_fail(SF_ERR_PARAM, "%s.%s=%s: choose one of %s", d->name, key, value,
                           sp->choices);
        *(int *)((char *)params + sp->offset) = i;
        break;
    }
    case SF_PT_BOOL: {
        int v;
        if (!strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1"))
            v = 1;
        else if (!strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "0"))
            v = 0;
        else
            return sf_fail(SF_ERR_PARAM, "%s.%s=%s: use yes or no", d->name, key, value);
        *(int *)((char *)params + sp->offset) = v;
        break;
    }
    case SF_PT_STRING:
        if (strlen(value) >= SF_PARAM_STRMAX)
            return sf_fail(SF_ERR_PARAM, "%s.%s: value longer than %d characters", d->name, key,
                           SF_PARAM_STRMAX - 1);
        snprintf((char *)params + sp->offset, SF_PARAM_STRMAX, "%s", value);
        break;
    }
    return SF_OK;
}

void sf_param_format(const sf_stage_def *d, const void *params, int i, char *buf, size_t n)
{
    const sf_param_spec *sp = &d->params[i];
    const char *base = (const char *)params + sp->offset;
    switch (sp->type) {
    case SF_PT_INT:
        if (*(const int *)base == 0 && sp->choices && !strcmp(sp->choices, "auto"))
            snprintf(buf, n, "auto");
        else
            snprintf(buf, n, "%d", *(const int *)base);
        break;
    case SF_PT_REAL: snprintf(buf, n, "%g", *(const double *)base); break;
    case SF_PT_BOOL: snprintf(buf, n, "%s", *(const int *)base ? "yes" : "no"); break;
    case SF_PT_STRING: snprintf(buf, n, "%s", base); break;
    case SF_PT_CHOICE: {
        int k = *(const int *)base;
        const char *p = sp->choices;
        for (int j = 0; j < k && p; j++) {
            p = strchr(p, '|');
            if (p)
                p++;
        }
        size_t len = p ? strcspn(p, "|") : 0;
        snprintf(buf, n, "%.*s", (int)len, p ? p : "?");
        break;
    }
    }
}

static sf_status step_init(sf_pipe_step *s, const sf_stage_def *d, int line)
{
    s->def = d;
    s->line = line;
    s->params = calloc(1, d->params_size ? d->params_size : 1);
    if (!s->params)
        return sf_fail(SF_ERR_NOMEM, "pipeline parameters");
    for (int i = 0; i < d->nparams; i++) {
        sf_status st = sf_param_set(d, s->params, d->params[i].name, d->params[i].def);
        if (st)
            return sf_fail(SF_ERR_INTERNAL, "registry default of %s.%s: %s", d->name,
                           d->params[i].name, sf_errdetail());
    }
    return SF_OK;
}

void sf_pipeline_free(sf_pipeline *pl)
{
    for (int i = 0; i < pl->nsteps; i++)
        free(pl->steps[i].params);
    pl->nsteps = 0;
}

#define PIPE_FAIL(line, ...)                                                         \
    do {                                                                             \
        char m_[768];                                                                \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                        \
        st = sf_fail(SF_ERR_PIPE, "%s:%d: %s", pl->source, line, m_);                \
        goto fail;                                                                   \
    } while (0)

sf_status sf_pipeline_parse(const char *text, const char *source, sf_pipeline *pl)
{
    sf_status st = SF_OK;
    char *copy = strdup(text), *save = NULL, *line;
    unsigned have = SF_DATA_IMAGE;
    int lineno = 0;
    memset(pl, 0, sizeof *pl);
    snprintf(pl->source, sizeof pl->source, "%s", source);
    {
        const char *b = strrchr(source, '/');
        b = b ? b + 1 : source;
        snprintf(pl->name, sizeof pl->name, "%.*s", (int)strcspn(b, "."), b);
    }
    if (!copy)
        return sf_fail(SF_ERR_NOMEM, "pipeline text");
    for (char *p = copy;; p = NULL) {
        char *nl;
        line = p ? p : save;
        if (!line)
            break;
        nl = strchr(line, '\n');
        if (nl) {
            *nl = '\0';
            save = nl + 1;
        } else {
            save = NULL;
        }
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *tok, *tsave = NULL;
        tok = strtok_r(line, " \t\r", &tsave);
        if (!tok)
            continue;
        const sf_stage_def *d = sf_stage_find(tok);
        if (!d) {
            char names[256] = "";
            for (int i = 0; i < sf_stage_count(); i++) {
                strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, sf_stage_at(i)->name, sizeof names - strlen(names) - 1);
            }
            PIPE_FAIL(lineno, "unknown stage '%s' (stages: %s)", tok, names);
        }
        if (pl->nsteps >= SF_PIPE_MAXSTEPS)
            PIPE_FAIL(lineno, "more than %d stages", SF_PIPE_MAXSTEPS);
        sf_pipe_step *s = &pl->steps[pl->nsteps];
        if ((st = step_init(s, d, lineno)) != SF_OK)
            goto fail;
        pl->nsteps++;
        while ((tok = strtok_r(NULL, " \t\r", &tsave))) {
            char *eq = strchr(tok, '=');
            if (!eq || eq == tok)
                PIPE_FAIL(lineno, "'%s' is not key=value", tok);
            *eq = '\0';
            if (sf_param_set(d, s->params, tok, eq + 1))
                PIPE_FAIL(lineno, "%s", sf_errdetail());
            resolve_path(d, s->params, tok, source);
        }
        if (d->check && d->check(s->params))
            PIPE_FAIL(lineno, "%s", sf_errdetail());
        if ((d->needs & have) != d->needs) {
            const char *what = (d->needs & ~have) & SF_DATA_BKG      ? "a background (add 'background' before it)"
                               : (d->needs & ~have) & SF_DATA_MASK   ? "a mask (add 'threshold' before it)"
                               : (d->needs & ~have) & SF_DATA_LABELS ? "labels (add 'segment' before it)"
                                                                     : "an earlier stage";
            PIPE_FAIL(lineno, "stage '%s' needs %s", d->name, what);
        }
        have |= d->gives;
    }
    if (pl->nsteps == 0)
        PIPE_FAIL(lineno, "no stages");
    free(copy);
    return SF_OK;
fail:
    free(copy);
    sf_pipeline_free(pl);
    return st;
}

sf_status sf_pipeline_load(const char *path, sf_pipeline *pl)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    long n;
    sf_status st;
    if (!f)
        return sf_fail(SF_ERR_IO, "%s: cannot open pipeline: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return sf_fail(SF_ERR_IO, "%s: cannot read pipeline", path);
    }
    if (n > 1 << 20) {
        fclose(f);
        return sf_fail(SF_ERR_PIPE, "%s:1: pipeline file larger than 1 MB", path);
    }
    text = malloc((size_t)n + 1);
    if (!text) {
        fclose(f);
        return sf_fail(SF_ERR_NOMEM, "pipeline text");
    }
    text[fread(text, 1, (size_t)n, f)] = '\0';
    fclose(f);
    st = sf_pipeline_parse(text, path, pl);
    free(text);
    return st;
}

sf_status sf_pipeline_set(sf_pipeline *pl, const char *assignment)
{
    char stage[64], key[64];
    const char *dot = strchr(assignment, '.'), *eq = strchr(assignment, '=');
    int found = 0;
    if (!dot || !eq || eq < dot || dot == assignment || (size_t)(dot - assignment) >= sizeof stage ||
        (size_t)(eq - dot - 1) >= sizeof key || eq == dot + 1)
        return sf_fail(SF_ERR_PARAM, "--set '%s': expected stage.param=value", assignment);
    snprintf(stage, sizeof stage, "%.*s", (int)(dot - assignment), assignment);
    snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
    if (!sf_stage_find(stage))
        return sf_fail(SF_ERR_PARAM, "--set '%s': no stage named '%s'", assignment, stage);
    for (int i = 0; i < pl->nsteps; i++) {
        if (strcmp(pl->steps[i].def->name, stage))
            continue;
        sf_status st = sf_param_set(pl->steps[i].def, pl->steps[i].params, key, eq + 1);
        if (st == SF_OK && pl->steps[i].def->check)
            st = pl->steps[i].def->check(pl->steps[i].params);
        if (st) /* a bad value is a usage error, whichever check found it */
            return st == SF_ERR_PARAM ? st : sf_fail(SF_ERR_PARAM, "%s", sf_errdetail());
        found = 1;
    }
    if (!found)
        return sf_fail(SF_ERR_PARAM, "--set '%s': pipeline %s has no '%s' stage", assignment,
                       pl->name, stage);
    return SF_OK;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

sf_status sf_pipeline_find(const char *name, char *path, size_t n)
{
    const char *dirs[3];
    int nd = 0;
    if (strchr(name, '/') || strstr(name, ".pipe")) {
        snprintf(path, n, "%s", name);
        if (!is_file(path))
            return sf_fail(SF_ERR_IO, "%s: no such pipeline file", name);
        return SF_OK;
    }
    if (getenv("SKYFIND_PIPELINES"))
        dirs[nd++] = getenv("SKYFIND_PIPELINES");
    dirs[nd++] = SKYFIND_PIPELINE_DIR;
    dirs[nd++] = SKYFIND_SOURCE_PIPELINE_DIR;
    for (int i = 0; i < nd; i++) {
        snprintf(path, n, "%s/%s.pipe", dirs[i], name);
        if (is_file(path))
            return SF_OK;
    }
    return sf_fail(SF_ERR_IO, "no pipeline named '%s' (looked in $SKYFIND_PIPELINES, %s, %s)", name,
                   SKYFIND_PIPELINE_DIR, SKYFIND_SOURCE_PIPELINE_DIR);
}
