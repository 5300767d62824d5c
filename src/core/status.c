/* Status names and the thread-local error detail. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "skyfind/status.h"

static _Thread_local char detail[1024];

const char *sf_strerror(sf_status s)
{
    switch (s) {
    case SF_OK: return "success";
    case SF_ERR_NOMEM: return "out of host memory";
    case SF_ERR_IO: return "input/output error";
    case SF_ERR_FITS: return "FITS error";
    case SF_ERR_FORMAT: return "unusable image";
    case SF_ERR_PARAM: return "bad parameter";
    case SF_ERR_PIPE: return "bad pipeline";
    case SF_ERR_EMPTY: return "no valid pixels";
    case SF_ERR_NO_GPU: return "no GPU";
    case SF_ERR_CUDA: return "CUDA error";
    case SF_ERR_CUFFT: return "cuFFT error";
    case SF_ERR_GPU_NOMEM: return "out of GPU memory";
    case SF_ERR_MISMATCH: return "CPU and GPU disagree";
    case SF_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *sf_errdetail(void) { return detail; }

void sf_errclear(void) { detail[0] = '\0'; }

sf_status sf_fail(sf_status s, const char *fmt, ...)
{
    char buf[sizeof detail]; /* the arguments may include sf_errdetail() itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(detail, buf, sizeof detail);
    return s;
}

void sf_errcontext(const char *fmt, ...)
{
    char prefix[256], old[sizeof detail - 260];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(old, sizeof old, "%.*s", (int)(sizeof old - 1), detail);
    if (old[0])
        snprintf(detail, sizeof detail, "%s: %s", prefix, old);
    else
        snprintf(detail, sizeof detail, "%s", prefix);
}
