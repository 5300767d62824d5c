/* Numbers as text for the catalogue writers, byte for byte what snprintf
 * writes for "%.Pg" (P 1..12) and "%d", several times faster (printf's
 * exact conversion of a double cost about a microsecond a value, most of a
 * catalogue's writing). Plain C, no locale (the catalogues are written in
 * the C locale's decimal point). */
#ifndef SKYFIND_IO_NUMFMT_H
#define SKYFIND_IO_NUMFMT_H

#include <stddef.h>

/* snprintf(buf, cap, "%.*g", prec, v) for finite v and 1 <= prec <= 12:
 * the characters written (without the NUL). Returns -1 when it cannot
 * decide the rounding quickly (a value within about 1e-18 (relative) of
 * its last digit's half, or |v| outside 1e-280..1e280) or cap is too small: the
 * caller then uses snprintf. */
int sf_fmt_g(char *buf, size_t cap, double v, int prec);

/* snprintf(buf, cap, "%d", v): the characters written, -1 when cap is too
 * small. */
int sf_fmt_int(char *buf, size_t cap, long long v);

/* The precision P of a format that is exactly "%.Pg" (P 1..12), else 0. */
int sf_fmt_g_prec(const char *fmt);

#endif
