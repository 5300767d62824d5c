/* Shared pieces of the command-line tool: exit codes, verbosity and the
 * message helpers used by every subcommand (src/cli/cli_util.c defines
 * them; src/cli/main.c dispatches to the cmd_* of src/cli/cli_*.c). */
#ifndef SKYFIND_CLI_H
#define SKYFIND_CLI_H

#include <stdio.h>
#include "skyfind/status.h"

enum {
    SF_EXIT_OK = 0,
    SF_EXIT_FAIL = 1,     /* a runtime failure (a file could not be processed) */
    SF_EXIT_USAGE = 2,    /* bad command line */
    SF_EXIT_PIPE = 3,     /* bad pipeline file */
    SF_EXIT_DISAGREE = 4  /* compare: CPU and GPU disagree beyond tolerance */
};

extern int sf_verbosity; /* 0 quiet, 1 normal, 2 verbose */

/* "skyfind: message" to stderr, unless quiet (errors always print). */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Usage error: message, one-line hint, returns SF_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_stages(int argc, char **argv);
int cmd_simulate(int argc, char **argv);

#include "skyfind/json.h" /* sf_json_str, sf_json_num */

#endif
