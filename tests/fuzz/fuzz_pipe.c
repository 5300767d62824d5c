/* libFuzzer harness: the .pipe parser (sf_pipeline_parse) and `--set`
 * assignments (sf_pipeline_set). Input: the pipeline text, then NUL-separated
 * assignments "stage.param=value"; every parameter of the result is formatted
 * back (sf_param_format) and parsed again from that text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "skyfind/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_pipeline pl, again;
    char *buf = malloc(size + 1), *text, *end;
    char out[8192], val[600];
    size_t used = 0;
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    end = buf + size;
    text = buf;
    memset(&pl, 0, sizeof pl);
    if (sf_pipeline_parse(text, "fuzz/input.pipe", &pl) != SF_OK)
        goto done;
    for (char *a = text + strlen(text) + 1; a < end; a += strlen(a) + 1)
        if (sf_pipeline_set(&pl, a) != SF_OK)
            (void)sf_errdetail();
    /* the pipeline as text: the parser must take back what the formatter gives */
    out[0] = 0;
    for (int i = 0; i < pl.nsteps; i++) {
        const sf_stage_def *d = pl.steps[i].def;
        used += (size_t)snprintf(out + used, sizeof out - used, "%s", d->name);
        for (int k = 0; k < d->nparams && used < sizeof out; k++) {
            sf_param_format(d, pl.steps[i].params, k, val, sizeof val);
            if (d->params[k].type == SF_PT_STRING && (!val[0] || strpbrk(val, " \t#\r\n")))
                continue; /* a path with blanks cannot be written as key=value */
            used += (size_t)snprintf(out + used, sizeof out - used, " %s=%s", d->params[k].name, val);
        }
        if (used < sizeof out)
            used += (size_t)snprintf(out + used, sizeof out - used, "\n");
    }
    if (used < sizeof out - 1) {
        memset(&again, 0, sizeof again);
        if (sf_pipeline_parse(out, "fuzz/formatted.pipe", &again) != SF_OK) {
            fprintf(stderr, "formatted pipeline does not parse: %s\n%s", sf_errdetail(), out);
            abort();
        }
        sf_pipeline_free(&again);
    }
    sf_pipeline_free(&pl);
done:
    free(buf);
    return 0;
}
