/* skyfind status codes and error details.
 * Library code returns sf_status and never exits; sf_errdetail() holds a
 * thread-local sentence saying what failed and where. */
#ifndef SKYFIND_STATUS_H
#define SKYFIND_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SF_OK = 0,
    SF_ERR_NOMEM,      /* host allocation failed */
    SF_ERR_IO,         /* file could not be opened, written or renamed */
    SF_ERR_FITS,       /* CFITSIO reported an error */
    SF_ERR_FORMAT,     /* the file is readable but not an image skyfind can use */
    SF_ERR_PARAM,      /* a parameter is out of range or inconsistent */
    SF_ERR_PIPE,       /* a pipeline description is invalid */
    SF_ERR_EMPTY,      /* no valid (non-NaN) pixels to work on */
    SF_ERR_NO_GPU,     /* no CUDA device, or a build without CUDA */
    SF_ERR_CUDA,       /* a CUDA runtime call or kernel launch failed */
    SF_ERR_CUFFT,      /* a cuFFT call failed */
    SF_ERR_GPU_NOMEM,  /* device allocation failed */
    SF_ERR_MISMATCH,   /* CPU and GPU results disagree beyond tolerance */
    SF_ERR_INTERNAL    /* a bug: an invariant did not hold */
} sf_status;

/* Short fixed name of a status ("CUDA error"). */
const char *sf_strerror(sf_status s);

/* Thread-local detail of the last failure on this thread ("" if none). */
const char *sf_errdetail(void);

/* Record a detail (printf format) and return s, so callers can write
 * `return sf_fail(SF_ERR_PARAM, "kappa %g must be > 0", k);`. */
sf_status sf_fail(sf_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefix the current detail with more context ("file.fits: ..."). */
void sf_errcontext(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

void sf_errclear(void);

#ifdef __cplusplus
}
#endif
#endif
