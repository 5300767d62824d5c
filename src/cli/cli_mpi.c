/* How the inputs of `skyfind run` reach this process: one process takes
 * them all (or its --shard); under mpirun (a build with -DSKYFIND_MPI=ON)
 * rank 0 hands inputs out one at a time to every rank that asks, each rank
 * uses GPU local_rank % (GPUs on its node), and rank 0 gathers the complete
 * images and the totals for --merge and the summary. */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET (the MPI build) */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_batch.h"

/* Under mpirun (Open MPI, or a PMI/PMIx launcher such as srun)? A plain run
 * of an MPI build never calls MPI. */
static int under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

/* This process's rank as the launcher gives it, before MPI starts (0 if none). */
static int env_rank(void)
{
    const char *v;
    if ((v = getenv("OMPI_COMM_WORLD_RANK")) || (v = getenv("PMIX_RANK")) || (v = getenv("PMI_RANK")))
        return atoi(v);
    return 0;
}

/* One process: every visible GPU; the summary and --merge of its own images. */
static void devices_all(int ngpu, sf_batch_opts *o)
{
    o->ndevices = ngpu < SF_BATCH_MAXDEV ? ngpu : SF_BATCH_MAXDEV;
    for (int i = 0; i < o->ndevices; i++)
        o->devices[i] = i;
}

static int finish_one(batch_ctx *b, const sf_batch_stats *s, int aborted)
{
    int rc = 0;
    if (aborted)
        return SF_EXIT_FAIL;
    batch_summary(b, s, s->nok, s->nfailed, s->nskipped);
    if (b->a->merge && (rc = batch_merge(b, b->a->merge)))
        return rc;
    return s->nfailed ? SF_EXIT_FAIL : SF_EXIT_OK;
}

#ifndef SKYFIND_MPI

int batch_mpi_follower(void)
{
    return 0;
}

int batch_mpi_setup(batch_ctx *b, sf_batch_opts *o, int *rc)
{
    (void)o;
    (void)rc;
    b->rank = 0;
    b->nranks = 1;
    b->local_rank = 0;
    if (under_mpirun() && env_rank() == 0)
        cli_note("this skyfind was built without MPI (cmake -DSKYFIND_MPI=ON): under mpirun every "
                 "process runs every input");
    return 0;
}

void batch_mpi_devices(batch_ctx *b, int ngpu, sf_batch_opts *o)
{
    (void)b;
    devices_all(ngpu, o);
}

int batch_mpi_finish(batch_ctx *b, const sf_batch_stats *s, int aborted)
{
    return finish_one(b, s, aborted);
}

#else /* SKYFIND_MPI */

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>

enum { TAG_ASK = 1, TAG_INDEX = 2, TAG_BYE = 3 };

typedef struct {
    MPI_Comm comm;            /* the hand-out's and the gathering's own communicator */
    pthread_mutex_t m;        /* rank 0: the list; other ranks: one request at a time */
    int (*next)(void *);      /* rank 0: its list of inputs (in order, --shard honoured) */
    void *next_ctx;
    int exhausted;            /* other ranks: rank 0 has answered -1 */
    pthread_t server;
    int server_started;
} mpi_state;

static mpi_state mpi_st;

/* Wait for a request without spinning a core (Open MPI's blocking calls poll,
 * and ranks often share a node's cores with the workers): sleeps of 10 us
 * growing to max_ns between tests. */
static void wait_idle(MPI_Request *r, MPI_Status *status, long max_ns)
{
    long ns = 10000;
    for (;;) {
        int flag = 0;
        MPI_Test(r, &flag, status ? status : MPI_STATUS_IGNORE);
        if (flag)
            return;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < max_ns)
            ns = 2 * ns < max_ns ? 2 * ns : max_ns;
    }
}

/* rank 0's own readers: the same list, under the lock the server takes too */
static int next_rank0(void *ctx)
{
    int i;
    (void)ctx;
    pthread_mutex_lock(&mpi_st.m);
    i = mpi_st.next(mpi_st.next_ctx);
    pthread_mutex_unlock(&mpi_st.m);
    return i;
}

/* other ranks: ask rank 0 for the next input; -1 once it has none */
static int next_remote(void *ctx)
{
    int i = -1, ask = 0;
    MPI_Request r;
    (void)ctx;
    pthread_mutex_lock(&mpi_st.m);
    if (!mpi_st.exhausted) {
        MPI_Send(&ask, 1, MPI_INT, 0, TAG_ASK, mpi_st.comm);
        MPI_Irecv(&i, 1, MPI_INT, 0, TAG_INDEX, mpi_st.comm, &r);
        wait_idle(&r, NULL, 100000);
        if (i < 0)
            mpi_st.exhausted = 1;
    }
    pthread_mutex_unlock(&mpi_st.m);
    return i;
}

/* rank 0's server: answers every rank's requests until each has said bye
 * (a rank says bye in batch_mpi_finish, whether its engine ran or not) */
static void *server_main(void *arg)
{
    batch_ctx *b = arg;
    int left = b->nranks - 1;
    while (left > 0) {
        int msg, i;
        MPI_Request r;
        MPI_Status status;
        MPI_Irecv(&msg, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, mpi_st.comm, &r);
        wait_idle(&r, &status, 200000); /* the answer's delay holds a rank's engine lock */
        if (status.MPI_TAG == TAG_BYE) {
            left--;
            continue;
        }
        i = next_rank0(NULL);
        MPI_Send(&i, 1, MPI_INT, status.MPI_SOURCE, TAG_INDEX, mpi_st.comm);
    }
    return NULL;
}

/* Ranks that share a node and that nothing has bound (mpirun binds to cores
 * unless oversubscribed; taskset, a Slurm cpuset) split its cores between
 * them, local rank r taking the r-th slice, so that their workers and
 * stage threads (as many as the process's cores) do not oversubscribe it. */
static void share_cores(int local_rank, int local_size)
{
    cpu_set_t set, mine;
    int cpus[CPU_SETSIZE], n = 0, share, first, count;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (local_size < 2 || sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    if (n < 2 || n < online) /* bound already, or nothing to share */
        return;
    if (n >= local_size) {
        share = n / local_size;
        first = local_rank * share;
        count = local_rank == local_size - 1 ? n - first : share;
    } else {
        first = local_rank % n;
        count = 1;
    }
    CPU_ZERO(&mine);
    for (int k = first; k < first + count; k++)
        CPU_SET(cpus[k], &mine);
    sched_setaffinity(0, sizeof mine, &mine);
}

/* Rank 0's list of inputs is every rank's: the indices handed out must name
 * the same files everywhere (an @LIST or a glob read differently on another
 * node would not). Returns 0, or -1 when out of memory. */
static int inputs_bcast(batch_ctx *b)
{
    long long len = 0;
    int n = b->ninputs, fail = 0, any = 0;
    char *buf = NULL;
    if (b->rank == 0) {
        for (int i = 0; i < n; i++)
            len += (long long)strlen(b->inputs[i]) + 1;
    }
    MPI_Bcast(&n, 1, MPI_INT, 0, mpi_st.comm);
    MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, mpi_st.comm);
    if (len > INT_MAX || !(buf = malloc((size_t)len + 1)))
        fail = 1;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, mpi_st.comm);
    if (any) {
        free(buf);
        return -1;
    }
    if (b->rank == 0) {
        char *p = buf;
        for (int i = 0; i < n; i++) {
            size_t l = strlen(b->inputs[i]) + 1;
            memcpy(p, b->inputs[i], l);
            p += l;
        }
    }
    MPI_Bcast(buf, (int)len, MPI_CHAR, 0, mpi_st.comm);
    if (b->rank > 0) {
        char **v = calloc((size_t)n + 1, sizeof *v);
        char *p = buf;
        for (int i = 0; v && i < n; i++, p += strlen(p) + 1)
            if (!(v[i] = strdup(p)))
                fail = 1;
        if (!v)
            fail = 1;
        if (!fail) {
            for (int i = 0; i < b->ninputs; i++)
                free(b->inputs[i]);
            free(b->inputs);
            b->inputs = v;
            b->ninputs = b->capinputs = n;
        } else if (v) {
            for (int i = 0; i < n; i++)
                free(v[i]);
            free(v);
        }
    }
    free(buf);
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, mpi_st.comm);
    return any ? -1 : 0;
}

int batch_mpi_follower(void)
{
    return under_mpirun() && env_rank() > 0;
}

int batch_mpi_setup(batch_ctx *b, sf_batch_opts *o, int *rc)
{
    int provided = 0, lr = 0, ls = 1;
    b->rank = 0;
    b->nranks = 1;
    b->local_rank = 0;
    b->mpi = NULL;
    if (!under_mpirun())
        return 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        cli_error("MPI_Init_thread failed: cannot run under mpirun");
        *rc = SF_EXIT_FAIL;
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->nranks);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (b->rank == 0)
            cli_error("this MPI library gives thread level %d, not MPI_THREAD_MULTIPLE (%d): skyfind's "
                      "reader threads need it (Open MPI built with thread support)",
                      provided, MPI_THREAD_MULTIPLE);
        MPI_Finalize();
        *rc = SF_EXIT_FAIL;
        return 1;
    }
    {
        MPI_Comm node; /* the ranks of this node */
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &lr);
        MPI_Comm_size(node, &ls);
        MPI_Comm_free(&node);
    }
    b->local_rank = lr;
    share_cores(lr, ls);
    memset(&mpi_st, 0, sizeof mpi_st);
    MPI_Comm_dup(MPI_COMM_WORLD, &mpi_st.comm);
    pthread_mutex_init(&mpi_st.m, NULL);
    if (inputs_bcast(b)) {
        cli_error("out of memory sharing the list of inputs with the ranks");
        MPI_Comm_free(&mpi_st.comm);
        MPI_Finalize();
        *rc = SF_EXIT_FAIL;
        return 1;
    }
    b->mpi = &mpi_st;
    b->tty = 0; /* no progress line: each rank sees only its own images */
    if (b->rank == 0) {
        mpi_st.next = o->next;
        mpi_st.next_ctx = o->ctx;
        o->next = next_rank0;
        if (b->nranks > 1) {
            if (pthread_create(&mpi_st.server, NULL, server_main, b) != 0) {
                cli_error("cannot start the thread that hands inputs out to the ranks");
                MPI_Abort(MPI_COMM_WORLD, SF_EXIT_FAIL);
            }
            mpi_st.server_started = 1;
        }
    } else {
        o->next = next_remote;
        if (sf_verbosity > 0) /* quiet but for errors; -v gives their notes */
            sf_verbosity--;
    }
    return 0;
}

void batch_mpi_devices(batch_ctx *b, int ngpu, sf_batch_opts *o)
{
    if (!b->mpi) {
        devices_all(ngpu, o);
        return;
    }
    o->ndevices = 1;
    o->devices[0] = b->local_rank % ngpu;
}

/* Every rank: say bye to the server, wait for all, send the totals and the
 * complete images to rank 0; rank 0 prints the summary and writes --merge;
 * every rank returns 1 when anything failed anywhere. */
int batch_mpi_finish(batch_ctx *b, const sf_batch_stats *s, int aborted)
{
    sf_batch_stats z, tot;
    int ints[7], itot[7], gpu = b->gpu, gpu_any = 0, rc = 0, rc_all = 0, bye = 0;
    double sums[5], stot[5], maxs[3], mtot[3], first, first_all;
    long long nsrc;
    uint64_t bytes;
    int *counts = NULL, *displs = NULL, *pairs = NULL, *all = NULL, ntot = 0;
    MPI_Request r;
    if (!b->mpi)
        return finish_one(b, s, aborted);
    memset(&tot, 0, sizeof tot);
    if (aborted) {
        memset(&z, 0, sizeof z);
        s = &z;
    }
    /* no more requests from this rank; rank 0 waits until every rank said so */
    if (b->rank > 0)
        MPI_Send(&bye, 1, MPI_INT, 0, TAG_BYE, mpi_st.comm);
    else if (mpi_st.server_started)
        pthread_join(mpi_st.server, NULL);
    MPI_Ibarrier(mpi_st.comm, &r);
    wait_idle(&r, NULL, 1000000);

    /* the totals */
    ints[0] = s->nitems;
    ints[1] = s->nok;
    ints[2] = s->nfailed;
    ints[3] = s->ninputs_done;
    ints[4] = s->nskipped;
    ints[5] = aborted ? 0 : b->workers;
    ints[6] = !!aborted;
    sums[0] = s->read_ms;
    sums[1] = s->upload_ms;
    sums[2] = s->decode_ms;
    sums[3] = s->stages_ms;
    sums[4] = s->write_ms;
    maxs[0] = s->wall_ms;
    maxs[1] = s->startup_ms;
    maxs[2] = s->last_done_ms;
    first = s->nitems > 0 ? s->first_done_ms : 1e300;
    nsrc = s->nsources;
    bytes = s->bytes_read;
    MPI_Reduce(ints, itot, 7, MPI_INT, MPI_SUM, 0, mpi_st.comm);
    MPI_Reduce(sums, stot, 5, MPI_DOUBLE, MPI_SUM, 0, mpi_st.comm);
    MPI_Reduce(maxs, mtot, 3, MPI_DOUBLE, MPI_MAX, 0, mpi_st.comm);
    MPI_Reduce(&first, &first_all, 1, MPI_DOUBLE, MPI_MIN, 0, mpi_st.comm);
    MPI_Reduce(&nsrc, &tot.nsources, 1, MPI_LONG_LONG, MPI_SUM, 0, mpi_st.comm);
    MPI_Reduce(&bytes, &tot.bytes_read, 1, MPI_UINT64_T, MPI_SUM, 0, mpi_st.comm);
    MPI_Reduce(&gpu, &gpu_any, 1, MPI_INT, MPI_MAX, 0, mpi_st.comm);

    /* the complete images as (input, plane): rank 0 rebuilds their names
     * from the template, as every rank made them */
    if (b->rank == 0) {
        counts = calloc((size_t)b->nranks, sizeof *counts);
        displs = calloc((size_t)b->nranks, sizeof *displs);
        if (!counts || !displs) {
            cli_error("out of memory gathering the ranks' records");
            MPI_Abort(MPI_COMM_WORLD, SF_EXIT_FAIL);
        }
    }
    pairs = malloc((size_t)(2 * b->ndone + 1) * sizeof *pairs);
    if (!pairs) {
        cli_error("out of memory gathering the ranks' records");
        MPI_Abort(MPI_COMM_WORLD, SF_EXIT_FAIL);
    }
    for (int i = 0; i < b->ndone; i++) {
        pairs[2 * i] = b->done[i].index;
        pairs[2 * i + 1] = b->done[i].plane;
    }
    {
        int n2 = 2 * b->ndone;
        MPI_Gather(&n2, 1, MPI_INT, counts, 1, MPI_INT, 0, mpi_st.comm);
    }
    if (b->rank == 0) {
        for (int k = 0; k < b->nranks; k++) {
            displs[k] = ntot;
            ntot += counts[k];
        }
        all = malloc((size_t)(ntot + 1) * sizeof *all);
        if (!all) {
            cli_error("out of memory gathering the ranks' records");
            MPI_Abort(MPI_COMM_WORLD, SF_EXIT_FAIL);
        }
    }
    MPI_Gatherv(pairs, 2 * b->ndone, MPI_INT, all, counts, displs, MPI_INT, 0, mpi_st.comm);

    if (b->rank == 0) {
        int nran = b->nranks - itot[6];
        tot.nitems = itot[0];
        tot.nok = itot[1];
        tot.nfailed = itot[2];
        tot.ninputs_done = itot[3];
        tot.nskipped = itot[4];
        tot.read_ms = stot[0];
        tot.upload_ms = stot[1];
        tot.decode_ms = stot[2];
        tot.stages_ms = stot[3];
        tot.write_ms = stot[4];
        tot.wall_ms = mtot[0];
        tot.startup_ms = mtot[1];
        tot.last_done_ms = mtot[2]; /* each from its rank's engine start */
        tot.first_done_ms = first_all < 1e300 ? first_all : 0;
        b->ndone = 0;
        for (int i = 0; i + 1 < ntot; i += 2) {
            char name[1200];
            if (batch_name(b, all[i], all[i + 1], name, sizeof name) == 0)
                batch_record(b, all[i], all[i + 1], name);
        }
        if (itot[6] && nran > 0)
            cli_error("%d of %d ranks could not run (see their messages); the others took their inputs",
                      itot[6], b->nranks);
        if (nran > 0) {
            b->gpu = gpu_any;
            b->workers = itot[5];
            batch_summary(b, &tot, tot.nok, tot.nfailed, tot.nskipped);
            if (b->a->merge)
                rc = batch_merge(b, b->a->merge);
        }
        if (!rc && (tot.nfailed || itot[6]))
            rc = SF_EXIT_FAIL;
    }
    free(counts);
    free(displs);
    free(pairs);
    free(all);
    /* the exit code of every rank: 1 when anything failed anywhere */
    if (aborted || s->nfailed)
        rc = rc ? rc : SF_EXIT_FAIL;
    MPI_Allreduce(&rc, &rc_all, 1, MPI_INT, MPI_MAX, mpi_st.comm);
    MPI_Comm_free(&mpi_st.comm);
    pthread_mutex_destroy(&mpi_st.m);
    b->mpi = NULL;
    MPI_Finalize();
    return rc_all;
}

#endif
