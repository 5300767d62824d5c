/* Tiny JSON output helpers shared by `skyfind info` (src/fitsinfo.c) and the
 * --json reports of the CLI: an escaped string and a number (null when not
 * finite). */
#ifndef SKYFIND_JSON_H
#define SKYFIND_JSON_H

#include <stdio.h>

void sf_json_str(FILE *out, const char *s); /* NULL prints "" */
void sf_json_num(FILE *out, double v, const char *fmt);

#endif
