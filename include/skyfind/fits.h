/* FITS input and output through CFITSIO: one image plane read as float32
 * (BSCALE/BZERO applied, BLANK and NaN as NaN), the header kept so outputs
 * carry the input's WCS, BUNIT and beam; outputs written atomically. */
#ifndef SKYFIND_FITS_H
#define SKYFIND_FITS_H

#include <stdio.h>
#include "skyfind/image.h"
#include "skyfind/decode.h"
#include "skyfind/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SF_FITS_MAXAXES 9

typedef struct {
    char path[1024];      /* the name as given (CFITSIO extended syntax allowed) */
    int hdu;              /* 1-based HDU number that was read */
    int bitpix;           /* on-disk BITPIX (ZBITPIX for tile-compressed data) */
    int compressed;       /* 1 for a tile-compressed image */
    double bscale, bzero;
    int has_blank;
    long long blank;
    int naxis;            /* NAXIS as in the file */
    long naxes[SF_FITS_MAXAXES];
    int nplanes;          /* product of the non-degenerate axes beyond the first two */
    int plane;            /* 0-based plane that was read */
    char bunit[72];       /* "" when absent */
    int has_beam;         /* 1 when bmaj/bmin/bpa are known */
    double bmaj, bmin, bpa; /* degrees */
    char beam_source[16]; /* "BMAJ", "HISTORY" (AIPS CLEAN card) or "" */
    char ctype[SF_FITS_MAXAXES][72]; /* "" when absent */
    char *header;         /* every card of the HDU, 80 chars each, no END (malloc) */
    int ncards;
    long long nnan;       /* blank pixels in the plane read: NaN, +-Inf, BLANK (sf_pixel_clean) */
    int nbadcards;        /* cards of header that sf_fits_card_ok rejects (left out of the WCS) */
} sf_fits_info;

/* Is this 80-byte header card safe to hand to a header parser (WCSLIB's
 * wcspih)? Printable ASCII only (0x20-0x7E), a keyword of A-Z 0-9 - _ and
 * blanks, and, after "= ", either a quoted string that closes (with ''
 * inside) followed by blanks or a comment, or a number, logical or complex
 * value of the characters such values are made of. 0: the card is dropped. */
int sf_fits_card_ok(const char *card);

/* Read one plane (plane < 0: the first, with a note on stderr-free detail
 * left to the caller: see info->nplanes). Fills img on the host (malloc, or
 * pinned when g != NULL) and info. Errors name the file and the problem.
 * Pass g = NULL for an image uploaded once: pinning 268 MB costs more than
 * its upload from pageable memory, which sf_pipeline_run stages through
 * the context's pinned chunks (tests/bench/RESULTS.md, "Outside the
 * stages"); free the image with the same g.
 * A plain disk file's pixels are read raw and decoded (sf_decode_cpu), the
 * rest through CFITSIO's conversion (also every file with
 * SKYFIND_FITS_CFITSIO=1): the same values. */
sf_status sf_fits_read(const char *path, int plane, sf_gpu *g, sf_image *img,
                       sf_fits_info *info);
void sf_fits_info_free(sf_fits_info *info);

/* Read one plane for the batch engine, header as sf_fits_read, pixels into a
 * buffer that get(ctx, bytes) hands out (pinned memory from a pool): the raw
 * big-endian bytes of an uncompressed HDU of a plain disk file (layout as on
 * disk, decoded later by sf_decode_cpu or sf_decode_gpu), otherwise float32
 * converted by CFITSIO (layout->bitpix SF_RAW_NATIVE). *buf is what get
 * returned (NULL if it was not called), also on failure: the caller owns it. */
typedef void *(*sf_fits_buf_fn)(void *ctx, size_t bytes);
/* Once, before several threads read FITS files: CFITSIO's lazy set-up of its
 * lock and driver table is not itself thread-safe. */
void sf_fits_threads_init(void);
sf_status sf_fits_read_raw(const char *path, int plane, sf_fits_buf_fn get, void *ctx,
                           void **buf, sf_raw_layout *layout, sf_fits_info *info);
/* The same for the CPU twins: where the plane is read raw and a pixel takes
 * 4 bytes (BITPIX -32 and 32), each piece is decoded in place as it is read
 * (sf_decode_cpu's values, while the piece is in the core's cache) and
 * layout->decoded is 1, layout->nblank its NaNs; otherwise as
 * sf_fits_read_raw (layout->decoded 0). */
sf_status sf_fits_read_raw_cpu(const char *path, int plane, sf_fits_buf_fn get, void *ctx,
                               void **buf, sf_raw_layout *layout, sf_fits_info *info);

typedef enum { SF_FITS_FLOAT32 = -32, SF_FITS_INT32 = 32, SF_FITS_UINT8 = 8 } sf_fits_type;

/* Write a 2-D image (host data of the given type) to path, atomically
 * (temporary name in the same folder, renamed when complete). Non-structural
 * cards of src (WCS, BUNIT unless drop_bunit, beam, HISTORY) are copied when
 * src != NULL (not those sf_fits_card_ok rejects); cards of axes beyond 2
 * are kept as they are (WCSAXES rules).
 * bunit, when not NULL, replaces BUNIT. */
sf_status sf_fits_write_image(const char *path, const sf_fits_info *src,
                              sf_fits_type type, const void *data, int nx, int ny,
                              int drop_bunit, const char *bunit);

/* What `skyfind info FILE` shows: HDU, size, axes, scaling, BUNIT, beam,
 * WCS axes with the centre pixel's world coordinates and the pixel scale,
 * NaN count and min/median/max of one plane. json=1: one JSON object on one
 * line (NaN as null); otherwise `key: value` lines. */
sf_status sf_fits_describe(const char *path, int plane, FILE *out, int json);

/* The world coordinates (deg) of the centre pixel and the pixel size (arcsec)
 * from the header's celestial WCS on the first two axes (WCSLIB); returns 0
 * when there is none. */
int sf_fits_celestial(const sf_fits_info *in, int nx, int ny, double *lon, double *lat,
                      double *pix_arcsec);

/* The restoring beam in pixels: FWHM of the major and minor axes (0 when the
 * header has no beam or no celestial WCS for the pixel size), its position
 * angle (degrees east of north, 0 without a beam), and the pixel size in
 * arcsec (0 without a celestial WCS). */
typedef struct {
    double bmaj_pix, bmin_pix, bpa_deg, pix_arcsec;
} sf_beam_pixels;
void sf_fits_beam_pixels(const sf_fits_info *in, int nx, int ny, sf_beam_pixels *b);
/* The beam and pixel size a run needs (sf_run_opts: beam_pix, beam_min_pix,
 * beam_pa_deg, pix_arcsec) from b; the other fields are left as they are. */
void sf_run_opts_beam(sf_run_opts *o, const sf_beam_pixels *b);

#ifdef __cplusplus
}
#endif
#endif
