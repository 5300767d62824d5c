/* sftrace: a timeline of every GPU activity of a process, for machines
 * without Nsight Systems (the lent GPU machine has ncu but not nsys).
 * The CUDA driver loads it as an injection library and calls
 * InitializeInjection; CUPTI's activity API then records every kernel,
 * memcpy, memset, synchronisation and runtime API call with start and end
 * times (ns, one clock for host and device). At exit the records are written
 * as CSV to $SFTRACE_OUT (default sftrace.csv):
 *   kind,start_ns,end_ns,stream,bytes,name
 * kind: K kernel, C memcpy (name: HtoD/DtoH/DtoD/...), S memset,
 * Y synchronisation (name: its type), A runtime API call (name: the call).
 *   CUDA_INJECTION64_PATH=$PWD/libsftrace.so SFTRACE_OUT=t.csv prog ...
 * tests/gpu/trace/timeline.py reads it (idle gaps of the GPU and the host
 * calls inside them). A tool for measuring, not part of skyfind. */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *out;

#define CK(call)                                                                     \
    do {                                                                             \
        CUptiResult r_ = (call);                                                     \
        if (r_ != CUPTI_SUCCESS) {                                                   \
            const char *m_ = "";                                                     \
            cuptiGetResultString(r_, &m_);                                           \
            fprintf(stderr, "sftrace: %s: %s\n", #call, m_);                         \
        }                                                                            \
    } while (0)

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *maxrec)
{
    *size = (size_t)16 << 20;
    *buf = aligned_alloc(8, *size);
    *maxrec = 0;
}

static const char *copy_kind(unsigned k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    default: return "other";
    }
}

static const char *sync_kind(unsigned k)
{
    switch (k) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "cudaDeviceSynchronize";
    default: return "sync";
    }
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                  size_t valid)
{
    CUpti_Activity *r = NULL;
    (void)ctx;
    (void)stream;
    (void)size;
    while (out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            fprintf(out, "K,%llu,%llu,%u,0,%s\n", (unsigned long long)k->start,
                    (unsigned long long)k->end, k->streamId, k->name);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
            fprintf(out, "C,%llu,%llu,%u,%llu,%s%s\n", (unsigned long long)m->start,
                    (unsigned long long)m->end, m->streamId, (unsigned long long)m->bytes,
                    copy_kind(m->copyKind),
                    m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
                            m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE
                        ? " pageable"
                        : "");
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
            fprintf(out, "S,%llu,%llu,%u,%llu,memset\n", (unsigned long long)m->start,
                    (unsigned long long)m->end, m->streamId, (unsigned long long)m->bytes);
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)r;
            fprintf(out, "Y,%llu,%llu,%u,0,%s\n", (unsigned long long)s->start,
                    (unsigned long long)s->end, s->streamId, sync_kind(s->type));
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
            const char *name = NULL;
            cuptiGetCallbackName(r->kind == CUPTI_ACTIVITY_KIND_RUNTIME
                                     ? CUPTI_CB_DOMAIN_RUNTIME_API
                                     : CUPTI_CB_DOMAIN_DRIVER_API,
                                 a->cbid, &name);
            fprintf(out, "A,%llu,%llu,0,0,%s\n", (unsigned long long)a->start,
                    (unsigned long long)a->end, name ? name : "?");
            break;
        }
        default:
            break;
        }
    }
    free(buf);
}

static void at_exit(void)
{
    cuptiActivityFlushAll(1);
    if (out) {
        fclose(out);
        out = NULL;
    }
}

int InitializeInjection(void)
{
    const char *path = getenv("SFTRACE_OUT");
    out = fopen(path && *path ? path : "sftrace.csv", "w");
    if (!out) {
        perror("sftrace: output");
        return 0;
    }
    fprintf(out, "kind,start_ns,end_ns,stream,bytes,name\n");
    CK(cuptiActivityRegisterCallbacks(buf_request, buf_complete));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    atexit(at_exit);
    return 1;
}
