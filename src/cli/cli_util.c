/* The CLI's message helpers and verbosity (src/cli/cli.h), used by main.c
 * and every subcommand's file. */
#include <stdarg.h>
#include <stdio.h>
#include "cli.h"

int sf_verbosity = 1;

void cli_note(const char *fmt, ...)
{
    va_list ap;
    if (sf_verbosity < 1)
        return;
    va_start(ap, fmt);
    fputs("skyfind: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("skyfind: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("skyfind: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fprintf(stderr, "Try 'skyfind %s%s--help' for more information.\n", cmd ? cmd : "",
            cmd ? " " : "");
    return SF_EXIT_USAGE;
}
