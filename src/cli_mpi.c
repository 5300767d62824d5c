/* How the inputs of `skyfind run` reach this process: one process takes
 * them all (or its --shard); under mpirun (a build with -DSKYFIND_MPI=ON)
 * rank 0 hands inputs out one at a time to every rank that asks, each rank
 * uses GPU local_rank % (GPUs on its node), and rank 0 gathers the complete
 * images and the totals for --merge and the summary. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_batch.h"

#ifndef SKYFIND_MPI

int batch_mpi_setup(batch_ctx *b, sf_batch_opts *o, int *rc)
{
    (void)o;
    (void)rc;
    b->rank = 0;
    b->nranks = 1;
    b->local_rank = 0;
    return 0;
}

void batch_mpi_devices(batch_ctx *b, int ngpu, sf_batch_opts *o)
{
    (void)b;
    o->ndevices = ngpu < SF_BATCH_MAXDEV ? ngpu : SF_BATCH_MAXDEV;
    for (int i = 0; i < o->ndevices; i++)
        o->devices[i] = i;
}

int batch_mpi_finish(batch_ctx *b, const sf_batch_stats *s, int aborted)
{
    int rc = 0;
    if (aborted)
        return SF_EXIT_FAIL;
    batch_summary(b, s, s->nok, s->nfailed, s->nskipped);
    if (b->a->merge && (rc = batch_merge(b, b->a->merge)))
        return rc;
    return s->nfailed ? SF_EXIT_FAIL : SF_EXIT_OK;
}

#endif
