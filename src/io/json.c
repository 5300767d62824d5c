/* JSON output helpers (see json.h). */
#include <math.h>
#include "skyfind/json.h"

void sf_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

void sf_json_num(FILE *out, double v, const char *fmt)
{
    if (isfinite(v))
        fprintf(out, fmt, v);
    else
        fputs("null", out);
}
