/* JSON output helpers: the escaping and number form of skyfind's --json
 * reports and of sf_fits_describe, for programs that print reports of their
 * own in the same form (the CLI is one). */
#ifndef SKYFIND_JSON_H
#define SKYFIND_JSON_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* s as a JSON string, quoted and escaped (control characters as \uXXXX);
 * NULL prints "". */
void sf_json_str(FILE *out, const char *s);
/* v with the printf format fmt, or null when v is not finite. */
void sf_json_num(FILE *out, double v, const char *fmt);

#ifdef __cplusplus
}
#endif
#endif
