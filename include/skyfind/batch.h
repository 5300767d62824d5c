/* The batch engine: files flow through a bounded pipeline, never all at once.
 * Reader threads read each plane (raw bytes of plain HDUs, CFITSIO's floats
 * otherwise) into buffers of a fixed pool (pinned for the GPU); one worker per
 * GPU uploads the next image on a copy lane while the stages run on this one
 * (the pixels are decoded on the device); or N CPU workers run the CPU twins;
 * writer threads hand every finished image to the caller's write function.
 * The per-image runner is sf_pipeline_run, the same a single run calls. */
#ifndef SKYFIND_BATCH_H
#define SKYFIND_BATCH_H

#include <stdint.h>
#include "skyfind/decode.h"
#include "skyfind/fits.h"
#include "skyfind/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SF_PLANE_FIRST = -1, /* plane 1 of a cube (the caller may note it) */
    SF_PLANE_ALL = -2    /* every plane of a cube, each as its own image */
};

#define SF_BATCH_MAXDEV 64

/* One image (a plane of an input) on its way through the engine. */
typedef struct {
    int index;              /* position of the input in the list */
    const char *path;       /* the input as given */
    int plane;              /* 0-based plane read */
    int nplanes;            /* planes in the file (1 for a 2-D image) */
    int plane_given;        /* the plane was chosen (--plane N or all), not defaulted */
    sf_status status;       /* SF_OK, or what failed (read, run or write) */
    char error[1400];       /* the failure's message, naming the file */
    int device;             /* the GPU that ran it, -1 for the CPU */
    const char *backend;    /* "gpu" or "cpu" (the CPU also when -b auto fell back) */
    sf_fits_info info;      /* header, beam, WCS cards */
    sf_raw_layout layout;   /* how the pixels were read */
    sf_image host_img;      /* the decoded image on the host, when opts.host_image */
    sf_run_result result;
    uint64_t bytes_read;    /* pixel bytes read from the file */
    long long nblank;       /* blank (NaN) pixels */
    /* where the time went, ms: reading (wall), waiting for a worker, the
     * upload and the decode (device, CUDA events; wall on the CPU), the
     * stages (result.stage_ms), writing (wall, set by the caller's write) */
    double t_read, t_queue, t_upload, t_decode, t_write;
} sf_batch_item;

typedef struct {
    int nitems, nok, nfailed;   /* images (planes) handed to the writer */
    int ninputs_done;           /* inputs taken from the list so far */
    int nskipped;               /* images --resume found complete */
    uint64_t bytes_read;
    double wall_ms;             /* since sf_batch_run started */
    double startup_ms;          /* longest GPU context creation (0 on the CPU) */
    double read_ms, upload_ms, decode_ms, stages_ms, write_ms; /* summed over images */
    long long nsources;
    int nsigned;                /* images run with threshold sign=negative|both */
    long long nneg;             /* their negative detections */
    long long fdr_pos[SF_FDR_NBINS], fdr_neg[SF_FDR_NBINS]; /* sf_run_fdr_add over them */
    double first_done_ms, last_done_ms; /* when the first and the last image were written */
    double count_ms;            /* counting the GPUs (the CUDA driver's start), 0 if not done here */
    double pin_ms;              /* pinning the pool's buffers (beside the uploads) */
    int gpu, workers;           /* the backend used (1: GPU) and its workers */
    int threads;                /* CPU backend: each worker's threads for its stages */
    int gpus_retired;           /* GPUs taken out of use after a sticky CUDA error */
} sf_batch_stats;

typedef struct {
    const sf_pipeline *pl;
    sf_backend backend;
    int fallback_cpu;           /* -b auto: a file the GPU cannot take (out of memory) runs on the CPU */
    int ndevices;               /* GPUs to use (backend GPU); 0: every visible one, counted
                                   while the first files are read (none: the CPU with
                                   fallback_cpu, else SF_ERR_NO_GPU) */
    int devices[SF_BATCH_MAXDEV];
    int jobs;                   /* CPU workers (0: one per core, at most one per input) */
    int threads;                /* CPU cores the workers share (0: OMP_NUM_THREADS if set,
                                   else every core the process may use) */
    int readers;                /* reader threads (0: automatic) */
    int writers;                /* writer threads (0: automatic; at most 16) */
    int queue;                  /* host buffers in flight (0: automatic); bounds memory */
    int overlap;                /* 0: read, upload, run and write one image at a time */
    int plane;                  /* SF_PLANE_FIRST, SF_PLANE_ALL or a 0-based plane */
    unsigned keep;              /* SF_KEEP_* for every run */
    int host_image;             /* the writer needs the decoded image on the host (previews) */
    int exiting;                /* the process exits right after: leave the GPU contexts to
                                   the driver's teardown instead of freeing them (saves
                                   tens of ms; a program that goes on must leave it 0) */
    /* the next input index to take, -1 when there is none; NULL: 0..n-1.
     * Called from several reader threads at once, under the engine's lock. */
    int (*next)(void *ctx);
    /* --resume: is (input, plane) complete already? NULL: never. */
    int (*done)(void *ctx, int index, int plane);
    /* called on a writer thread for every image, failed ones too, in the
     * order they finish (several images at once: it must be thread-safe);
     * returns SF_OK or its own failure (item->error set) */
    sf_status (*write)(void *ctx, sf_batch_item *it);
    /* called about twice a second from the calling thread (NULL: never) */
    void (*progress)(void *ctx, const sf_batch_stats *s, int ninputs);
    /* a one-line note for the user ("no CUDA device found: running on the CPU"), or NULL */
    void (*notice)(void *ctx, const char *msg);
    void *ctx;
} sf_batch_opts;

/* Run the pipeline over inputs[0..n-1] (those next() hands out). Returns
 * SF_OK when the engine ran (individual files may still have failed: see
 * stats), or a failure that stopped it (no GPU context, no memory). */
sf_status sf_batch_run(const sf_batch_opts *o, const char *const *inputs, int n,
                       sf_batch_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
