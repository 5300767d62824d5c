/* The state of one `skyfind run` (src/cli/cli_batch.c) shared with the MPI layer
 * (src/cli/cli_mpi.c): the inputs, the output-name template, the images that are
 * complete (for --merge) and the counters of the summary. */
#ifndef SKYFIND_CLI_BATCH_H
#define SKYFIND_CLI_BATCH_H

#include <pthread.h>
#include "cli_run.h"
#include "skyfind/batch.h"

typedef struct {
    int index, plane;   /* input position, 0-based plane */
    char name[1200];    /* output NAME (OUTDIR/NAME.cat.csv), as long as the names made */
} batch_rec;

typedef struct {
    run_args *a;
    const sf_pipeline *pl;
    const char *tpl;        /* output-name template */
    char **inputs;
    int ninputs, capinputs;
    int ntodo;              /* inputs this process (or run) is to take, for the progress line */
    int cursor;             /* next input of the local list */
    pthread_mutex_t lock;   /* the records */
    batch_rec *done;        /* complete images (written now, or found by --resume) */
    int ndone, capdone;
    int tty, progress_shown;
    int gpu, workers;
    double t_main_ms;       /* from the process's start to main (exec, dynamic linking) */
    double t_count_ms;      /* counting the CUDA devices (the driver's start) */
    double t_engine_ms;     /* from main to the engine's start (options, pipeline, inputs) */
    /* MPI (src/cli/cli_mpi.c): rank, ranks, local rank; 0, 1, 0 without MPI */
    int rank, nranks, local_rank;
    void *mpi;              /* the MPI layer's own state */
} batch_ctx;

/* Expand paths, @LIST files and - (paths on standard input); 0 or an exit code. */
int batch_inputs(batch_ctx *b, int argc, char **argv, int first);
/* The output NAME of (input, plane) from the template; -1 if too long. */
int batch_name(const batch_ctx *b, int index, int plane, char *out, size_t n);
/* Remember a complete image for --merge (thread-safe). */
void batch_record(batch_ctx *b, int index, int plane, const char *name);
/* Write the merged CSV from the per-image catalogues; 0 or an exit code. */
int batch_merge(batch_ctx *b, const char *out);
/* The summary line (and --json's summary object) for these totals. */
void batch_summary(const batch_ctx *b, const sf_batch_stats *s, int ok, int failed, int skipped);

/* MPI layer (src/cli/cli_mpi.c; without -DSKYFIND_MPI=ON one process, no MPI):
 * setup starts MPI under mpirun and replaces o->next with rank 0's dynamic
 * hand-out; returns non-zero with *rc set when the run must stop. */
int batch_mpi_setup(batch_ctx *b, sf_batch_opts *o, int *rc);
/* 1 in a rank other than 0 of an MPI run (judged from the environment, before
 * MPI starts): its list of inputs will be rank 0's, so it reads none. */
int batch_mpi_follower(void);
/* The GPUs of this process when --devices is not given: all visible ones, or
 * under MPI the GPU local_rank % ngpu. */
void batch_mpi_devices(batch_ctx *b, int ngpu, sf_batch_opts *o);
/* After the engine: rank 0 gathers the records and totals, writes --merge
 * and the summary; returns the exit code (0, or 1 when any image failed
 * anywhere). aborted: this process's engine did not run. */
int batch_mpi_finish(batch_ctx *b, const sf_batch_stats *s, int aborted);

#endif
