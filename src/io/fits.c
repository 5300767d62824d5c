/* FITS input and output through CFITSIO (the checks made before CFITSIO
 * reads a file are in fits_precheck.c): read one plane of the first (or the
 * named) image HDU as float32 with its header, beam and WCS axis names, and
 * write 2-D float32/int32/uint8 images atomically with the input's cards.
 * In this file, in order: CFITSIO's errors as messages; header cards (which
 * ones WCSLIB may see, the beam, which are structural); an HDU's header text
 * (plain and tile-compressed); reading (sf_fits_read and the batch engine's
 * sf_fits_read_raw, and sf_fits_read_raw_cpu for the CPU twins: the
 * pre-check, the HDU walk, the checks made before any allocation, the
 * plane's end probed, raw big-endian reads by the threads in chunks, 4-byte
 * pixels decoded piece by piece as they are read, into sf_fits_read's
 * image itself); writing. */
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <fitsio.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "skyfind/decode.h"
#include "skyfind/catalog.h"
#include "skyfind/fits.h"
#include "fits_internal.h"

/* ---- CFITSIO's errors --------------------------------------------------- */

/* "CFITSIO status 107: tried to move past end of file" */
static void sf_fits_status_text(int status, char *buf, size_t n)
{
    char txt[FLEN_STATUS];
    fits_get_errstatus(status, txt);
    snprintf(buf, n, "CFITSIO status %d: %s", status, txt);
    fits_clear_errmsg();
}

/* Plain-words problem for a CFITSIO failure while opening or reading. */
/* The file name without CFITSIO's extended syntax ("x.fits[1]" -> "x.fits");
 * 0 when it cannot be parsed. */
static int sf_fits_root(const char *path, char root[FLEN_FILENAME])
{
    int st2 = 0;
    root[0] = '\0';
    fits_parse_rootname((char *)path, root, &st2);
    fits_clear_errmsg();
    return st2 == 0 && root[0];
}

static sf_status sf_fits_fail_read(const char *path, int status, const char *what)
{
    char cs[128];
    sf_status code = SF_ERR_FITS;
    const char *problem = what;
    sf_fits_status_text(status, cs, sizeof cs);
    switch (status) {
    case FILE_NOT_OPENED: {
        char root[FLEN_FILENAME];
        int have = sf_fits_root(path, root);
        struct stat sb;
        code = SF_ERR_IO;
        if (have && stat(root, &sb) != 0)
            problem = errno == ENOENT ? "no such file" : "cannot open the file";
        else if (have && access(root, R_OK) != 0)
            problem = "file is not readable (permission denied)";
        else
            problem = "cannot open as FITS (not a FITS file, or a bad extension name)";
        break;
    }
    case END_OF_FILE:
    case READ_ERROR: {
        char root[FLEN_FILENAME];
        struct stat sb;
        code = SF_ERR_FITS;
        if (sf_fits_root(path, root) && stat(root, &sb) == 0 && sb.st_size == 0)
            problem = "file is empty (0 bytes)";
        else
            problem = "file is truncated or corrupt";
        break;
    }
    case UNKNOWN_REC:
    case NO_SIMPLE:
    case BAD_SIMPLE:
        code = SF_ERR_FORMAT;
        problem = "not a FITS file";
        break;
    case BAD_HDU_NUM:
        code = SF_ERR_FORMAT;
        problem = "no such HDU in the file";
        break;
    case URL_PARSE_ERROR:
        code = SF_ERR_PARAM;
        problem = "cannot parse the file name (CFITSIO extended syntax)";
        break;
    default:
        break;
    }
    return sf_fail(code, "%s: %s (%s)", path, problem, cs);
}

/* ---- header cards ------------------------------------------------------- */

int sf_fits_card_ok(const char *card)
{
    int i = 10;
    for (int k = 0; k < 80; k++)
        if ((unsigned char)card[k] < 0x20 || (unsigned char)card[k] > 0x7e)
            return 0;
    for (int k = 0; k < 8; k++) {
        char c = card[k];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == ' '))
            return 0;
    }
    if (card[8] != '=' || card[9] != ' ')
        return 1; /* commentary card (COMMENT, HISTORY, blank, CONTINUE...) */
    while (i < 80 && card[i] == ' ')
        i++;
    if (i < 80 && card[i] == '\'') {
        for (i++;; i++) {
            if (i >= 80)
                return 0; /* the string does not close */
            if (card[i] == '\'') {
                if (i + 1 < 80 && card[i + 1] == '\'') {
                    i++;
                    continue;
                }
                break;
            }
        }
        for (i++; i < 80 && card[i] == ' '; i++)
            ;
        return i == 80 || card[i] == '/';
    }
    for (; i < 80 && card[i] != '/'; i++)
        if (!strchr("0123456789+-.EeDdTF(), ", card[i]))
            return 0;
    return 1;
}

/* Cards of hdr (ncards x 80) that sf_fits_card_ok rejects. */
static int sf_fits_count_bad(const char *hdr, int ncards)
{
    int n = 0;
    for (int i = 0; hdr && i < ncards; i++)
        n += !sf_fits_card_ok(hdr + (size_t)i * 80);
    return n;
}

static int sf_fits_read_double(fitsfile *fp, const char *key, double *v)
{
    int status = 0;
    if (fits_read_key(fp, TDOUBLE, key, v, NULL, &status)) {
        fits_clear_errmsg();
        return 0;
    }
    return 1;
}

/* An integer keyword, parsed here from its value text: CFITSIO's integer
 * conversion (ffc2j) overflows its message buffer on a value it cannot
 * convert of 29 characters or more (fuzzing, 2026-11-29: BLANK = a long
 * string aborted the process). An integer, or a finite number in range
 * (truncated, as CFITSIO converts it; FITS's D exponent too); anything else
 * counts as absent, as CFITSIO's failed conversion did. */
static int sf_fits_read_integer(fitsfile *fp, const char *key, long long *v)
{
    char text[FLEN_VALUE], *end;
    int status = 0;
    long long i;
    double d;
    if (fits_read_keyword(fp, key, text, NULL, &status)) {
        fits_clear_errmsg();
        return 0;
    }
    errno = 0;
    i = strtoll(text, &end, 10);
    if (end != text && errno == 0 && strspn(end, " ") == strlen(end)) {
        *v = i;
        return 1;
    }
    for (char *c = text; *c; c++) /* 1.5D2: FITS's double-precision exponent */
        if (*c == 'D' || *c == 'd')
            *c = 'E';
    d = strtod(text, &end);
    if (end == text || strspn(end, " ") != strlen(end) || !isfinite(d) || d < -9.2e18 || d > 9.2e18)
        return 0;
    *v = (long long)d;
    return 1;
}

static int sf_fits_read_string(fitsfile *fp, const char *key, char *out, size_t n)
{
    char v[FLEN_VALUE];
    int status = 0;
    if (fits_read_key(fp, TSTRING, key, v, NULL, &status)) {
        fits_clear_errmsg();
        return 0;
    }
    snprintf(out, n, "%s", v);
    return 1;
}

/* Beam from the last "HISTORY AIPS   CLEAN BMAJ=  1.2345E-03 BMIN= ... BPA= ..." card. */
static int sf_fits_history_beam(const char *hdr, int ncards, double *bmaj, double *bmin,
                                double *bpa)
{
    int found = 0;
    for (int i = 0; i < ncards; i++) {
        char card[81];
        const char *p;
        double a, b, c = 0.0;
        memcpy(card, hdr + (size_t)i * 80, 80);
        card[80] = '\0';
        if (strncmp(card, "HISTORY", 7) != 0 || !strstr(card, "AIPS"))
            continue;
        p = strstr(card, "CLEAN BMAJ=");
        if (!p)
            continue;
        if (sscanf(p, "CLEAN BMAJ= %lf BMIN= %lf BPA= %lf", &a, &b, &c) >= 2 && a > 0 && b > 0) {
            *bmaj = a;
            *bmin = b;
            *bpa = c;
            found = 1;
        }
    }
    return found;
}

static void sf_fits_beam(fitsfile *fp, sf_fits_info *in)
{
    double a, b, c;
    if (sf_fits_read_double(fp, "BMAJ", &a) && sf_fits_read_double(fp, "BMIN", &b) && a > 0 &&
        b > 0) {
        in->bmaj = a;
        in->bmin = b;
        in->bpa = sf_fits_read_double(fp, "BPA", &c) ? c : 0.0;
        snprintf(in->beam_source, sizeof in->beam_source, "BMAJ");
        in->has_beam = 1;
    } else if (sf_fits_read_double(fp, "CLEANBMJ", &a) && sf_fits_read_double(fp, "CLEANBMN", &b) &&
               a > 0 && b > 0) {
        in->bmaj = a;
        in->bmin = b;
        in->bpa = sf_fits_read_double(fp, "CLEANBPA", &c) ? c : 0.0;
        snprintf(in->beam_source, sizeof in->beam_source, "CLEANBMJ");
        in->has_beam = 1;
    } else if (in->header &&
               sf_fits_history_beam(in->header, in->ncards, &in->bmaj, &in->bmin, &in->bpa)) {
        snprintf(in->beam_source, sizeof in->beam_source, "HISTORY");
        in->has_beam = 1;
    }
}

/* Does the keyword name = prefix followed by one or more digits (or nothing
 * when bare is set)? */
static int sf_key_indexed(const char *key, const char *prefix, int bare)
{
    size_t n = strlen(prefix);
    const char *p;
    if (strncmp(key, prefix, n) != 0)
        return 0;
    p = key + n;
    if (!*p)
        return bare;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

/* Cards that describe the file layout (or a tile-compressed table) and
 * must not be copied into a new 2-D image. */
int sf_fits_structural(const char *key, const char *card)
{
    static const char *exact[] = {
        "SIMPLE", "XTENSION", "BITPIX", "EXTEND", "PCOUNT", "GCOUNT", "BSCALE", "BZERO",
        "BLANK", "END", "CHECKSUM", "DATASUM", "TFIELDS", "THEAP", "INHERIT", "ZIMAGE",
        "ZBITPIX", "ZCMPTYPE", "ZQUANTIZ", "ZDITHER0", "ZSIMPLE", "ZEXTEND", "ZHECKSUM",
        "ZDATASUM", "ZBLANK", "ZSCALE", "ZZERO", "ZTENSION", "ZPCOUNT", "ZGCOUNT", "ZMASKCMP",
        NULL};
    static const char *indexed[] = {"NAXIS", "ZNAXIS", "ZTILE", "ZNAME", "ZVAL", "TTYPE",
                                    "TFORM", "TUNIT", "TDIM", "TSCAL", "TZERO", "TNULL",
                                    "TDISP", NULL};
    for (int i = 0; exact[i]; i++)
        if (strcmp(key, exact[i]) == 0)
            return 1;
    for (int i = 0; indexed[i]; i++)
        if (sf_key_indexed(key, indexed[i], 1))
            return 1;
    /* the two COMMENT cards CFITSIO itself writes into every new primary */
    if (strcmp(key, "COMMENT") == 0 &&
        (strstr(card, "FITS (Flexible Image Transport System) format") ||
         strstr(card, "Astrophysics', volume 376, page 3")))
        return 1;
    return 0;
}

/* Keyword name of an 80-char card (up to 8 chars, no blanks). */
void sf_card_key(const char *card, char key[9])
{
    int k = 0;
    while (k < 8 && card[k] != ' ' && card[k] != '=' && card[k] != '\0') {
        key[k] = card[k];
        k++;
    }
    key[k] = '\0';
}

/* Append one card, padded with blanks to 80 chars, at dst + 80*(*n). */
static void sf_card_put(char *dst, int *n, const char *text)
{
    char *c = dst + (size_t)(*n) * 80;
    size_t len = strlen(text);
    if (len > 80)
        len = 80;
    memset(c, ' ', 80);
    memcpy(c, text, len);
    (*n)++;
}

/* ---- an HDU's header text ------------------------------------------------ */

/* Image view of a tile-compressed HDU's table header, for when
 * fits_convert_hdr2str fails (CFITSIO 4.2 does on some headers). */
static int sf_fits_header_uncompress(fitsfile *fp, char **out, int *ncards)
{
    char *s = NULL, *dst = NULL, text[96];
    int nkeys = 0, status = 0, n = 0, bitpix = 0, naxis = 0;
    long naxes[SF_FITS_MAXAXES] = {0};
    if (fits_get_img_type(fp, &bitpix, &status) || fits_get_img_dim(fp, &naxis, &status) ||
        naxis > SF_FITS_MAXAXES || fits_get_img_size(fp, naxis, naxes, &status) ||
        fits_hdr2str(fp, 0, NULL, 0, &s, &nkeys, &status))
        goto done;
    dst = malloc((size_t)(nkeys + naxis + 4) * 80 + 1);
    if (!dst) {
        status = MEMORY_ALLOCATION;
        goto done;
    }
    sf_card_put(dst, &n, "XTENSION= 'IMAGE   '           / image extension (tile-compressed on disk)");
    snprintf(text, sizeof text, "BITPIX  = %20d / array data type", bitpix);
    sf_card_put(dst, &n, text);
    snprintf(text, sizeof text, "NAXIS   = %20d / number of array dimensions", naxis);
    sf_card_put(dst, &n, text);
    for (int k = 0; k < naxis; k++) {
        snprintf(text, sizeof text, "NAXIS%-3d= %20ld", k + 1, naxes[k]);
        sf_card_put(dst, &n, text);
    }
    for (int i = 0; i < nkeys; i++) {
        const char *card = s + (size_t)i * 80;
        char key[9];
        sf_card_key(card, key);
        if (strcmp(key, "BSCALE") != 0 && strcmp(key, "BZERO") != 0 && strcmp(key, "BLANK") != 0 &&
            sf_fits_structural(key, card))
            continue;
        if (strcmp(key, "EXTNAME") == 0 && strstr(card, "'COMPRESSED_IMAGE'"))
            continue;
        memcpy(dst + (size_t)n * 80, card, 80);
        n++;
    }
    dst[(size_t)n * 80] = '\0';
    *out = dst;
    *ncards = n;
    dst = NULL;
done:
    if (s)
        fits_free_memory(s, &(int){0});
    free(dst);
    return status;
}

/* Whole header as 80-char cards without END (the image view of a
 * tile-compressed HDU). Returns a CFITSIO status. */
static int sf_fits_header(fitsfile *fp, int compressed, char **out, int *ncards)
{
    char *s = NULL, *copy;
    int nkeys = 0, status = 0;
    size_t len;
    if (compressed) {
        if (!fits_convert_hdr2str(fp, 0, NULL, 0, &s, &nkeys, &status))
            goto have;
        if (s)
            fits_free_memory(s, &(int){0});
        s = NULL;
        fits_clear_errmsg();
        return sf_fits_header_uncompress(fp, out, ncards);
    } else {
        fits_hdr2str(fp, 0, NULL, 0, &s, &nkeys, &status);
    }
    if (status) {
        if (s)
            fits_free_memory(s, &(int){0});
        return status;
    }
have:
    len = strlen(s);
    if (len > (size_t)nkeys * 80)
        len = (size_t)nkeys * 80;
    len -= len % 80;
    /* nkeys counts the END card that fits_hdr2str appends: drop it */
    while (len >= 80 && strncmp(s + len - 80, "END", 3) == 0 &&
           strspn(s + len - 77, " ") == 77)
        len -= 80;
    copy = malloc(len + 1);
    if (!copy) {
        fits_free_memory(s, &status);
        return MEMORY_ALLOCATION;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    fits_free_memory(s, &status);
    *out = copy;
    *ncards = (int)(len / 80);
    return 0;
}

/* ---- reading ------------------------------------------------------------ */

static int sf_fits_names_hdu(const char *path);

/* fits_open_file failed: when the name selects an HDU ("x.fits[7]") and the
 * file itself opens, say that the HDU does not exist. */
static sf_status sf_fits_fail_open(const char *path, int status)
{
    char root[FLEN_FILENAME], cs[128];
    fitsfile *fp = NULL;
    int st2 = 0, nhdu = 0;
    if ((status == END_OF_FILE || status == BAD_HDU_NUM) && sf_fits_names_hdu(path)) {
        root[0] = '\0';
        fits_parse_rootname((char *)path, root, &st2);
        if (st2 == 0 && root[0] && !fits_open_file(&fp, root, READONLY, &st2) &&
            !fits_get_num_hdus(fp, &nhdu, &st2)) {
            fits_close_file(fp, &st2);
            sf_fits_status_text(status, cs, sizeof cs);
            return sf_fail(SF_ERR_FORMAT, "%s: no such HDU (the file has %d HDU%s) (%s)", path,
                           nhdu, nhdu == 1 ? "" : "s", cs);
        }
        if (fp)
            fits_close_file(fp, &(int){0});
        fits_clear_errmsg();
    }
    return sf_fits_fail_read(path, status, "cannot open");
}

/* Does the name select an HDU explicitly ("x.fits[1]", "x.fits[SCI]")? */
static int sf_fits_names_hdu(const char *path)
{
    char urltype[FLEN_FILENAME], infile[FLEN_FILENAME], outfile[FLEN_FILENAME];
    char extspec[FLEN_FILENAME], filter[FLEN_FILENAME], binspec[FLEN_FILENAME];
    char colspec[FLEN_FILENAME];
    int status = 0;
    if (strlen(path) >= FLEN_FILENAME)
        return 0;
    extspec[0] = '\0';
    fits_parse_input_url((char *)path, urltype, infile, outfile, extspec, filter, binspec,
                         colspec, &status);
    fits_clear_errmsg();
    return status == 0 && extspec[0] != '\0';
}

static void sf_fits_threads_init_once(void)
{
    fitsfile *fp = NULL;
    int status = 0;
    float v;
    fits_clear_errmsg(); /* the lock */
    /* the driver table: open a nonexistent file (fails, as it should) */
    if (!fits_open_file(&fp, "/nonexistent/skyfind-cfitsio-init.fits", READONLY, &status))
        fits_close_file(fp, &status);
    fits_clear_errmsg();
    fits_get_version(&v);
}

/* The batch engine's request (sf_fits_read_raw): pixels into a buffer of its
 * own, raw when the HDU allows it. */
typedef struct {
    sf_fits_buf_fn get;
    void *ctx;
    void **buf;
    sf_raw_layout *layout;
    int decode; /* 4-byte pixels read raw: decoded in place as they are read */
} sf_fits_rawreq;

static sf_status sf_fits_read_pixels_raw(const char *path, fitsfile *fp, int hdunum,
                                         const sf_fits_info *in, const long *naxes, int plane,
                                         const sf_fits_rawreq *rq);

/* One plane as float32 through CFITSIO's conversion (BSCALE/BZERO, BLANK and
 * NaN as NaN): one subset read, as whole 4-D compressed reads fail. */
static sf_status sf_fits_read_plane(const char *path, fitsfile *fp, int hdunum,
                                    const sf_fits_info *in, const long *naxes, int plane,
                                    float *out)
{
    long fpixel[SF_FITS_MAXAXES], lpixel[SF_FITS_MAXAXES], inc[SF_FITS_MAXAXES];
    long long idx = plane;
    float nulval = NAN;
    int anynul = 0, status = 0;
    char cs[128];
    for (int k = 0; k < in->naxis; k++) {
        inc[k] = 1;
        if (k < 2) {
            fpixel[k] = 1;
            lpixel[k] = naxes[k];
        } else {
            fpixel[k] = lpixel[k] = (long)(idx % naxes[k]) + 1;
            idx /= naxes[k];
        }
    }
    if (sf_raw_uint64(&(sf_raw_layout){.bitpix = in->bitpix, .bscale = in->bscale, .bzero = in->bzero})) {
        /* unsigned 64-bit (sf_raw_uint64): CFITSIO's float conversion adds
         * 2^63 in double and loses the low bits; read the values exactly
         * as unsigned integers, BLANK pixels flagged, and round once */
        size_t n = (size_t)naxes[0] * (size_t)naxes[1];
        unsigned long long *u = malloc(n * sizeof *u);
        char *nul = malloc(n);
        LONGLONG first = 1 + (LONGLONG)plane * (LONGLONG)n;
        if (!u || !nul) {
            free(u);
            free(nul);
            return sf_fail(SF_ERR_NOMEM, "%s: no memory for %zu unsigned 64-bit pixels", path, n);
        }
        if (!fits_read_imgnull(fp, TULONGLONG, first, (LONGLONG)n, u, nul, &anynul, &status))
            for (size_t i = 0; i < n; i++)
                out[i] = nul[i] ? NAN : (float)(double)u[i];
        free(u);
        free(nul);
        if (!status)
            return SF_OK;
    } else if (!fits_read_subset(fp, TFLOAT, fpixel, lpixel, inc, &nulval, out, &anynul, &status)) {
        return SF_OK;
    }
    if (status == END_OF_FILE || status == READ_ERROR)
        return sf_fits_fail_read(path, status, "");
    sf_fits_status_text(status, cs, sizeof cs);
    if (in->compressed)
        return sf_fail(SF_ERR_FITS, "%s: the tile-compressed data of HDU %d is corrupt: a tile "
                       "of plane %d does not decompress (%s)", path, hdunum, plane + 1, cs);
    return sf_fail(SF_ERR_FITS, "%s: cannot read plane %d of HDU %d (%s)", path, plane + 1,
                   hdunum, cs);
}

static sf_status sf_fits_read_impl(const char *path, int plane, sf_gpu *g, sf_image *img,
                                   sf_fits_info *info, const sf_fits_rawreq *rq);
static int sf_fits_raw_ok(const char *path, const sf_fits_info *in, char root[FLEN_FILENAME]);

static void *raw_host_get(void *ctx, size_t bytes)
{
    (void)ctx;
    return sf_host_alloc(bytes ? bytes : 1);
}

/* sf_fits_read's raw buffer: the image itself when a pixel takes 4 bytes
 * (BITPIX -32 and 32 decode in place: sf_decode_cpu), else a buffer of its
 * own. ctx: the image (stride nx). */
static void *raw_image_get(void *ctx, size_t bytes)
{
    sf_image *im = ctx;
    if (bytes == sf_npix(im->nx, im->ny) * sizeof(float) && im->stride == (size_t)im->nx)
        return im->data;
    return raw_host_get(NULL, bytes);
}

/* Before a plane's buffer is allocated: is its last pixel in the file? For
 * what the raw walk cannot see (a gzip'd whole file, which CFITSIO inflates
 * into memory first), a header declaring more data than there is fails
 * here instead of after a malloc of the declared size. */
static sf_status sf_fits_probe_plane_end(const char *path, fitsfile *fp, int hdunum,
                                         const sf_fits_info *in, const long *naxes, int plane)
{
    long px[SF_FITS_MAXAXES], inc[SF_FITS_MAXAXES];
    long long idx = plane;
    float v, nulval = NAN;
    int anynul = 0, status = 0;
    if (in->compressed)
        return SF_OK; /* bounded by SKYFIND_MAX_PIXELS; a tile decode says the rest */
    for (int k = 0; k < in->naxis; k++) {
        inc[k] = 1;
        if (k < 2) {
            px[k] = naxes[k];
        } else {
            px[k] = (long)(idx % naxes[k]) + 1;
            idx /= naxes[k];
        }
    }
    if (!fits_read_subset(fp, TFLOAT, px, px, inc, &nulval, &v, &anynul, &status))
        return SF_OK;
    fits_clear_errmsg();
    if (status == END_OF_FILE || status == READ_ERROR) {
        double by = (double)(in->bitpix < 0 ? -in->bitpix : in->bitpix) / 8.0;
        for (int k = 0; k < in->naxis; k++)
            by *= (double)naxes[k];
        return sf_fail(SF_ERR_FITS, "%s: file is truncated or its header is wrong: HDU %d "
                       "declares %ld x %ld pixels per plane (%.3g GB in all) but its data end "
                       "before the last pixel of plane %d", path, hdunum, naxes[0], naxes[1],
                       by / 1e9, plane + 1);
    }
    return SF_OK; /* other problems: the plane read names them */
}

sf_status sf_fits_read(const char *path, int plane, sf_gpu *g, sf_image *img,
                       sf_fits_info *info)
{
    return sf_fits_read_impl(path, plane, g, img, info, NULL);
}

static sf_status read_raw(const char *path, int plane, sf_fits_buf_fn get, void *ctx, void **buf,
                          sf_raw_layout *layout, sf_fits_info *info, int decode)
{
    sf_fits_rawreq rq = {get, ctx, buf, layout, decode};
    sf_image dummy = {0};
    *buf = NULL;
    return sf_fits_read_impl(path, plane, NULL, &dummy, info, &rq);
}

sf_status sf_fits_read_raw(const char *path, int plane, sf_fits_buf_fn get, void *ctx,
                           void **buf, sf_raw_layout *layout, sf_fits_info *info)
{
    return read_raw(path, plane, get, ctx, buf, layout, info, 0);
}

sf_status sf_fits_read_raw_cpu(const char *path, int plane, sf_fits_buf_fn get, void *ctx,
                               void **buf, sf_raw_layout *layout, sf_fits_info *info)
{
    return read_raw(path, plane, get, ctx, buf, layout, info, 1);
}

static sf_status sf_fits_read_impl(const char *path, int plane, sf_gpu *g, sf_image *img,
                                   sf_fits_info *info, const sf_fits_rawreq *rq)
{
    fitsfile *fp = NULL;
    sf_fits_info in;
    sf_image im = {0};
    sf_status st = SF_OK;
    int status = 0, hdutype = 0, naxis = 0, hdunum = 0, bitpix = 0;
    long naxes[SF_FITS_MAXAXES] = {0};
    long long nplanes = 1;

    memset(&in, 0, sizeof in);
    if (img)
        img->data = NULL;
    if (!path || !img)
        return sf_fail(SF_ERR_PARAM, "sf_fits_read: path and img must not be NULL");
    snprintf(in.path, sizeof in.path, "%s", path);
    in.bscale = 1.0;

    if ((st = sf_fits_precheck(path)) != SF_OK) {
        fp = NULL;
        goto fail;
    }
    if (fits_open_file(&fp, path, READONLY, &status)) {
        fp = NULL;
        st = sf_fits_fail_open(path, status);
        goto fail;
    }
    fits_get_hdu_num(fp, &hdunum);
    if (fits_get_hdu_type(fp, &hdutype, &status) ||
        fits_get_img_dim(fp, &naxis, &status)) {
        if (hdutype != IMAGE_HDU && status == NOT_IMAGE) {
            naxis = 0;
            status = 0;
            fits_clear_errmsg();
        } else {
            st = sf_fits_fail_read(path, status, "cannot read the header");
            goto fail;
        }
    }
    if (sf_fits_names_hdu(path)) {
        if (hdutype != IMAGE_HDU) {
            st = sf_fail(SF_ERR_FORMAT, "%s: HDU %d is a table, not an image", path, hdunum);
            goto fail;
        }
        if (naxis == 0) {
            st = sf_fail(SF_ERR_FORMAT, "%s: HDU %d holds no image data (NAXIS=0)", path, hdunum);
            goto fail;
        }
    } else {
        int ntables = 0;
        while (hdutype != IMAGE_HDU || naxis == 0) {
            if (hdutype != IMAGE_HDU)
                ntables++;
            if (fits_movrel_hdu(fp, 1, &hdutype, &status)) {
                if (status == END_OF_FILE) {
                    fits_clear_errmsg();
                    st = sf_fail(SF_ERR_FORMAT, "%s: no image HDU (%s)", path,
                                 ntables ? "only tables" : "empty primary HDU and no extensions");
                } else {
                    st = sf_fits_fail_read(path, status, "cannot move to the next HDU");
                }
                goto fail;
            }
            fits_get_hdu_num(fp, &hdunum);
            if (fits_get_hdu_type(fp, &hdutype, &status)) {
                st = sf_fits_fail_read(path, status, "cannot read an HDU header");
                goto fail;
            }
            naxis = 0;
            if (hdutype == IMAGE_HDU && fits_get_img_dim(fp, &naxis, &status)) {
                st = sf_fits_fail_read(path, status, "cannot read the image size");
                goto fail;
            }
        }
    }
    in.hdu = hdunum;
    in.naxis = naxis;
    if (naxis > SF_FITS_MAXAXES) {
        st = sf_fail(SF_ERR_FORMAT, "%s: HDU %d has NAXIS=%d: skyfind reads at most %d axes", path,
                     hdunum, naxis, SF_FITS_MAXAXES);
        goto fail;
    }
    if (fits_get_img_size(fp, naxis, naxes, &status) || fits_get_img_type(fp, &bitpix, &status)) {
        st = sf_fits_fail_read(path, status, "cannot read the image size");
        goto fail;
    }
    in.bitpix = bitpix;
    in.compressed = fits_is_compressed_image(fp, &status) ? 1 : 0;
    status = 0;
    for (int k = 0; k < naxis; k++)
        in.naxes[k] = naxes[k];
    if (naxis < 2) {
        st = sf_fail(SF_ERR_FORMAT, "%s: 1-D image (NAXIS=%d, HDU %d): skyfind needs a 2-D image",
                     path, naxis, hdunum);
        goto fail;
    }
    for (int k = 0; k < naxis; k++) {
        if (naxes[k] < 1 || (k < 2 && naxes[k] > INT_MAX)) {
            st = sf_fail(SF_ERR_FORMAT, "%s: HDU %d has an unusable axis length NAXIS%d=%ld", path,
                         hdunum, k + 1, naxes[k]);
            goto fail;
        }
        if (k >= 2)
            nplanes *= naxes[k];
    }
    if (nplanes > INT_MAX) {
        st = sf_fail(SF_ERR_FORMAT, "%s: too many planes (%lld)", path, nplanes);
        goto fail;
    }
    in.nplanes = (int)nplanes;
    if (plane < 0)
        plane = 0;
    if (plane >= in.nplanes) {
        /* messages number planes from 1, as --plane does */
        st = sf_fail(SF_ERR_PARAM, "%s: plane %d out of range: the image has %d plane%s (1..%d)",
                     path, plane + 1, in.nplanes, in.nplanes == 1 ? "" : "s", in.nplanes);
        goto fail;
    }
    in.plane = plane;

    /* header, keywords, beam */
    status = sf_fits_header(fp, in.compressed, &in.header, &in.ncards);
    if (status) {
        st = sf_fits_fail_read(path, status, "cannot read the header");
        goto fail;
    }
    in.nbadcards = sf_fits_count_bad(in.header, in.ncards);
    for (int k = 0; k < 2; k++) { /* a scaling that cannot scale: refused by name */
        const char *key = k ? "BZERO" : "BSCALE";
        char text[FLEN_VALUE];
        double v = 0.0;
        int s2 = 0;
        if (fits_read_keyword(fp, key, text, NULL, &s2)) {
            fits_clear_errmsg();
            continue; /* absent: 1 or 0 */
        }
        if (!sf_fits_read_double(fp, key, &v) || !isfinite(v) || (k == 0 && v == 0.0)) {
            st = sf_fail(SF_ERR_FORMAT, "%s: HDU %d: %s = %s cannot scale the pixels (it must be "
                         "a finite number%s)", path, hdunum, key, text, k ? "" : " other than 0");
            goto fail;
        }
        *(k ? &in.bzero : &in.bscale) = v;
    }
    {
        long long b;
        if (sf_fits_read_integer(fp, "BLANK", &b) ||
            (in.compressed && sf_fits_read_integer(fp, "ZBLANK", &b))) {
            in.has_blank = 1;
            in.blank = b;
        }
    }
    sf_fits_read_string(fp, "BUNIT", in.bunit, sizeof in.bunit);
    for (int k = 0; k < naxis; k++) {
        char key[FLEN_KEYWORD];
        snprintf(key, sizeof key, "CTYPE%d", k + 1);
        sf_fits_read_string(fp, key, in.ctype[k], sizeof in.ctype[k]);
    }
    sf_fits_beam(fp, &in);

    if ((st = sf_fits_probe_plane_end(path, fp, hdunum, &in, naxes, plane)) != SF_OK)
        goto fail;
    if (rq) { /* the batch engine's buffer: raw bytes, or CFITSIO's floats */
        if ((st = sf_fits_read_pixels_raw(path, fp, hdunum, &in, naxes, plane, rq)))
            goto fail;
    } else {
        st = sf_image_alloc(&im, (int)naxes[0], (int)naxes[1], SF_HOST, g);
        if (st) {
            sf_errcontext("%s", path);
            goto fail;
        }
        char root[FLEN_FILENAME];
        /* SKYFIND_FITS_CFITSIO=1: CFITSIO's conversion for every file (the
         * reference test_decode checks the raw path against) */
        const char *cf = getenv("SKYFIND_FITS_CFITSIO");
        if (!(cf && cf[0] == '1') && sf_fits_raw_ok(path, &in, root)) {
            /* a plain disk file: the batch engine's read (the plane's bytes
             * with pread) and the CPU decode, one pass over the pixels, where
             * CFITSIO's conversion went through its buffers, a byte swap, the
             * conversion and the cleaning pass: the same values
             * (test_decode), in a third of the time at 2048^2; 4-byte
             * pixels are read into the image and decoded in place as each
             * piece is read */
            void *raw = NULL;
            sf_raw_layout l;
            sf_fits_rawreq r2 = {raw_image_get, &im, &raw, &l, 1};
            long long nb = 0;
            st = sf_fits_read_pixels_raw(path, fp, hdunum, &in, naxes, plane, &r2);
            if (st == SF_OK && l.decoded) /* decoded as it was read, in im (raw_image_get) */
                nb = l.nblank;
            else if (st == SF_OK && (st = sf_decode_cpu(raw, &l, &im, &nb)) != SF_OK) {
                sf_errcontext("%s", path);
            }
            if (raw != im.data)
                sf_host_free(raw);
            if (st)
                goto fail;
            in.nnan = nb;
        } else {
            if ((st = sf_fits_read_plane(path, fp, hdunum, &in, naxes, plane, im.data)))
                goto fail;
            size_t n = sf_npix(im.nx, im.ny);
            long long nn = 0;
            for (size_t i = 0; i < n; i++) { /* +-Inf are blank like NaN */
                im.data[i] = sf_pixel_clean(im.data[i]);
                nn += isnan(im.data[i]) ? 1 : 0;
            }
            in.nnan = nn;
        }
    }
    status = 0;
    fits_close_file(fp, &status);
    fp = NULL;
    fits_clear_errmsg();
    if (!rq)
        *img = im;
    if (info)
        *info = in;
    else
        free(in.header);
    return SF_OK;

fail:
    if (fp) {
        int s2 = 0;
        fits_close_file(fp, &s2);
        fits_clear_errmsg();
    }
    sf_image_free(&im, g);
    free(in.header);
    img->data = NULL;
    if (info) {
        memset(info, 0, sizeof *info);
        snprintf(info->path, sizeof info->path, "%s", path);
    }
    return st;
}

/* Is the HDU's data a plain stretch of a disk file that can be read with
 * pread (not tile-compressed, not gzip'd, no CFITSIO filter)? Writes the
 * file's name. */
static int sf_fits_raw_ok(const char *path, const sf_fits_info *in, char root[FLEN_FILENAME])
{
    char urltype[FLEN_FILENAME], infile[FLEN_FILENAME], outfile[FLEN_FILENAME];
    char extspec[FLEN_FILENAME], filter[FLEN_FILENAME], binspec[FLEN_FILENAME];
    char colspec[FLEN_FILENAME];
    unsigned char magic[2];
    int status = 0, fd, n;
    if (in->compressed || strlen(path) >= FLEN_FILENAME)
        return 0;
    switch (in->bitpix) {
    case 8: case 16: case 32: case 64: case -32: case -64: break;
    default: return 0;
    }
    filter[0] = binspec[0] = colspec[0] = outfile[0] = '\0';
    fits_parse_input_url((char *)path, urltype, infile, outfile, extspec, filter, binspec,
                         colspec, &status);
    fits_clear_errmsg();
    if (status || filter[0] || binspec[0] || colspec[0] || outfile[0] ||
        (urltype[0] && strcmp(urltype, "file://") != 0))
        return 0;
    snprintf(root, FLEN_FILENAME, "%s", infile);
    fd = open(root, O_RDONLY);
    if (fd < 0)
        return 0;
    n = (int)read(fd, magic, 2); /* gzip'd or compressed whole files go through CFITSIO */
    close(fd);
    return n == 2 && !(magic[0] == 0x1f && (magic[1] == 0x8b || magic[1] == 0x9d)) &&
           !(magic[0] == 'B' && magic[1] == 'Z');
}

static sf_status sf_fits_read_pixels_raw(const char *path, fitsfile *fp, int hdunum,
                                         const sf_fits_info *in, const long *naxes, int plane,
                                         const sf_fits_rawreq *rq)
{
    char root[FLEN_FILENAME], cs[128];
    sf_raw_layout *l = rq->layout;
    int status = 0;
    memset(l, 0, sizeof *l);
    l->nx = (int)naxes[0];
    l->ny = (int)naxes[1];
    l->bscale = in->bscale;
    l->bzero = in->bzero;
    if (sf_fits_raw_ok(path, in, root)) {
        LONGLONG head = 0, data = 0, end = 0;
        size_t bytes, got = 0;
        off_t off;
        int fd;
        l->bitpix = in->bitpix;
        l->has_blank = in->has_blank && in->bitpix > 0;
        l->blank = in->blank;
        if (sf_raw_check(l))
            return sf_fail(SF_ERR_FORMAT, "%s: HDU %d: %s", path, hdunum, sf_errdetail());
        bytes = sf_raw_bytes(l);
        if (fits_get_hduaddrll(fp, &head, &data, &end, &status)) {
            sf_fits_status_text(status, cs, sizeof cs);
            return sf_fail(SF_ERR_FITS, "%s: cannot locate the data of HDU %d (%s)", path, hdunum, cs);
        }
        off = (off_t)data + (off_t)plane * (off_t)bytes;
        if ((LONGLONG)off + (LONGLONG)bytes > end)
            return sf_fail(SF_ERR_FORMAT, "%s: HDU %d: plane %d lies past the end of the data",
                           path, hdunum, plane + 1);
        if (!(*rq->buf = rq->get(rq->ctx, bytes)))
            return sf_fail(SF_ERR_NOMEM, "%s: no buffer for %.1f MB of pixels", path, bytes / 1e6);
        fd = open(root, O_RDONLY);
        if (fd < 0)
            return sf_fail(SF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        {
            struct stat sb;
            if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (off_t)(off + (off_t)bytes) > sb.st_size) {
                close(fd);
                got = sb.st_size > off ? (size_t)(sb.st_size - off) : 0;
                return sf_fail(SF_ERR_FITS, "%s: file is truncated: plane %d of HDU %d needs "
                               "%zu bytes from offset %lld, the file ends %zu bytes short",
                               path, plane + 1, hdunum, bytes, (long long)off, bytes - got);
            }
        }
        /* a plane of two chunks or more is read in 2 MB chunks by every
         * thread the caller has (from the page cache one thread copies at
         * a fraction of the memory's speed, and the buffer's first-touch
         * page faults are spread too). On the H100 machine's 16 cores
         * (tests/bench/RESULTS.md) a 16 MB plane took 5.0 ms on one thread
         * and 0.6-1.8 ms on 8-16; 64 MB 5.5 ms in 16 MB chunks on 8
         * threads (four chunks: four threads) and 2.1 ms in 2 MB chunks on
         * 16; 256 MB 15.2 and 9.3 ms. With rq->decode and 4-byte pixels
         * each chunk is read and decoded 256 kB at a time, the piece just
         * read decoded in place while it is in the core's cache: the
         * plane crosses the memory once less than a read and then a
         * decoding pass. */
        const size_t chunk = (size_t)2 << 20;
        const int dec = rq->decode && sf_raw_pixel_bytes(l) == 4;
        /* SKYFIND_READ_PIECE_KB: a developer knob for bench_read_decode */
        const char *pk = dec ? getenv("SKYFIND_READ_PIECE_KB") : NULL;
        const size_t piece = !dec ? chunk : pk && atoi(pk) >= 4 ? (size_t)atoi(pk) << 10 : (size_t)256 << 10;
        int nchunk = (int)((bytes + chunk - 1) / chunk), nth = 1, err = 0, eof = 0;
        long long nb = 0;
#ifdef _OPENMP
        nth = omp_get_max_threads() < nchunk ? omp_get_max_threads() : nchunk;
#endif
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth) reduction(| : err, eof) reduction(+ : nb)
        for (int c = 0; c < nchunk; c++) {
            size_t c0 = (size_t)c * chunk, c1 = c0 + chunk < bytes ? c0 + chunk : bytes;
            while (c0 < c1 && !err && !eof) {
                size_t p1 = c0 + piece < c1 ? c0 + piece : c1, q = c0;
                while (q < p1 && !err && !eof) {
                    ssize_t r = pread(fd, (char *)*rq->buf + q, p1 - q, off + (off_t)q);
                    if (r < 0 && errno == EINTR)
                        continue;
                    if (r < 0)
                        err = errno ? errno : EIO;
                    else if (r == 0)
                        eof = 1;
                    else
                        q += (size_t)r;
                }
                if (dec && q == p1) /* piece sizes are whole pixels: multiples of 4 bytes */
                    nb += sf_decode_cpu_span((char *)*rq->buf + c0, (int)((p1 - c0) / 4), l);
                c0 = q;
            }
        }
        if (err || eof) {
            close(fd);
            if (eof)
                return sf_fail(SF_ERR_FITS, "%s: file is truncated: plane %d of HDU %d needs "
                               "%zu bytes from offset %lld, the file ended while it was read",
                               path, plane + 1, hdunum, bytes, (long long)off);
            return sf_fail(SF_ERR_IO, "%s: read error: %s", path, strerror(err));
        }
        got = bytes;
        close(fd);
        l->decoded = dec;
        l->nblank = dec ? nb : 0;
        return SF_OK;
    }
    /* compressed, gzip'd or filtered: CFITSIO converts to float32 */
    l->bitpix = SF_RAW_NATIVE;
    l->bscale = 1.0;
    l->bzero = 0.0;
    if (!(*rq->buf = rq->get(rq->ctx, sf_raw_bytes(l))))
        return sf_fail(SF_ERR_NOMEM, "%s: no buffer for %.1f MB of pixels", path,
                       sf_raw_bytes(l) / 1e6);
    return sf_fits_read_plane(path, fp, hdunum, in, naxes, plane, *rq->buf);
    return SF_OK;
}

void sf_fits_info_free(sf_fits_info *info)
{
    if (!info)
        return;
    free(info->header);
    info->header = NULL;
    info->ncards = 0;
}

/* ---- writing ------------------------------------------------------------ */

static int sf_fits_header_has(const sf_fits_info *src, const char *key)
{
    size_t n = strlen(key);
    for (int i = 0; src && src->header && i < src->ncards; i++) {
        const char *c = src->header + (size_t)i * 80;
        if (strncmp(c, key, n) == 0 && (n == 8 || c[n] == ' ' || c[n] == '='))
            return 1;
    }
    return 0;
}

sf_status sf_fits_write_image(const char *path, const sf_fits_info *src,
                              sf_fits_type type, const void *data, int nx, int ny,
                              int drop_bunit, const char *bunit)
{
    fitsfile *fp = NULL;
    char *tmp = NULL, *cname = NULL;
    sf_status st = SF_OK;
    int status = 0, bitpix, dtype;
    long naxes[2];
    size_t plen;
    char cs[128];

    if (!path || !*path || !data || nx < 1 || ny < 1)
        return sf_fail(SF_ERR_PARAM, "%s: cannot write a %dx%d image%s", path ? path : "(null)",
                       nx, ny, data ? "" : " without data");
    switch (type) {
    case SF_FITS_FLOAT32: bitpix = FLOAT_IMG; dtype = TFLOAT; break;
    case SF_FITS_INT32: bitpix = LONG_IMG; dtype = TINT; break;
    case SF_FITS_UINT8: bitpix = BYTE_IMG; dtype = TBYTE; break;
    default:
        return sf_fail(SF_ERR_PARAM, "%s: unknown output pixel type %d", path, (int)type);
    }
    plen = strlen(path);
    tmp = malloc(plen + 160);
    cname = malloc(plen + 162);
    if (!tmp || !cname) {
        st = sf_fail(SF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (sf_tmp_name(path, tmp, plen + 160)) {
        st = sf_fail(SF_ERR_IO, "%s: the name is too long", path);
        goto fail;
    }
    snprintf(cname, plen + 162, "!%s", tmp);
    naxes[0] = nx;
    naxes[1] = ny;
    if (fits_create_file(&fp, cname, &status)) {
        fp = NULL;
        sf_fits_status_text(status, cs, sizeof cs);
        st = sf_fail(SF_ERR_IO, "%s: cannot create (%s)", path, cs);
        goto fail;
    }
    if (fits_create_img(fp, bitpix, 2, naxes, &status))
        goto cfitsio_fail;
    if (src && src->naxis > 2 && !sf_fits_header_has(src, "WCSAXES")) {
        int wcsaxes = src->naxis;
        if (fits_write_key(fp, TINT, "WCSAXES", &wcsaxes, "WCS axes of the input image",
                           &status))
            goto cfitsio_fail;
    }
    for (int i = 0; src && src->header && i < src->ncards; i++) {
        char card[81], key[9];
        memcpy(card, src->header + (size_t)i * 80, 80);
        card[80] = '\0';
        sf_card_key(card, key);
        if (sf_fits_structural(key, card))
            continue;
        if (memchr(card, '\0', 80) || !sf_fits_card_ok(card))
            continue; /* an unparseable card is not handed on to the next reader */
        if (strcmp(key, "BUNIT") == 0 && (drop_bunit || bunit))
            continue;
        if (fits_write_record(fp, card, &status)) {
            status = 0; /* a card CFITSIO will not take is left out, not fatal */
            fits_clear_errmsg();
        }
    }
    if (bunit && fits_update_key(fp, TSTRING, "BUNIT", (void *)bunit, "units of the pixels",
                                 &status))
        goto cfitsio_fail;
    if (fits_write_img(fp, dtype, 1, (LONGLONG)nx * ny, (void *)data, &status))
        goto cfitsio_fail;
    if (fits_close_file(fp, &status)) {
        fp = NULL;
        goto cfitsio_fail;
    }
    fp = NULL;
    if ((st = sf_atomic_rename(tmp, path)) != SF_OK)
        goto fail;
    free(tmp);
    free(cname);
    return SF_OK;

cfitsio_fail:
    sf_fits_status_text(status, cs, sizeof cs);
    st = sf_fail(status == FILE_NOT_CREATED || status == WRITE_ERROR ? SF_ERR_IO : SF_ERR_FITS,
                 "%s: cannot write (%s)", path, cs);
fail:
    if (fp) {
        int s2 = 0;
        fits_close_file(fp, &s2);
        fits_clear_errmsg();
    }
    if (tmp)
        remove(tmp);
    free(tmp);
    free(cname);
    return st;
}

/* CFITSIO (reentrant build) makes its lock and its driver table on first use,
 * and two threads making them at once race (ThreadSanitizer saw
 * fitsio_init_lock's pthread_mutex_init beside another thread's lock in
 * ffxmsg). Call this once on one thread before threads read FITS files. */
void sf_fits_threads_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sf_fits_threads_init_once);
}
