/* The pre-check of a FITS file (src/io/fits_internal.h): the raw header blocks
 * and, for tile-compressed HDUs, the tiles are checked before CFITSIO reads
 * the file, so damaged cards, impossible sizes and corrupt tiles are refused
 * with a message naming the HDU and the problem instead of reaching the
 * library code that would crash or hang on them (tests/fuzz/RESULTS.md lists
 * what each check answers). In this file, in order: card and raw keyword
 * readers (sf_card_value_ok, sf_raw_key, sf_raw_int, ...), the size limit;
 * the tiles' decoders' checks (gzip, Rice); one
 * tile-compressed HDU's table and tiles (sf_raw_check_zimage); the walk over
 * the file's HDUs (sf_fits_precheck). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <fitsio.h>
#include "skyfind/fits.h"
#include "fits_internal.h"

/* ---- checks on the raw header blocks, before CFITSIO reads the file ------ */

/* Is the value of a card (its token: a closed quoted string, or anything up
 * to the first blank or '/') made of printable ASCII? What follows the
 * token is not looked at (CFITSIO does not read it either). */
static int sf_card_value_ok(const char *c)
{
    int i = 10;
    if (c[8] != '=' || c[9] != ' ')
        return 1;
    while (i < 80 && c[i] == ' ')
        i++;
    if (i < 80 && c[i] == '\'') {
        for (i++; i < 80; i++) {
            if ((unsigned char)c[i] < 0x20 || (unsigned char)c[i] > 0x7e)
                return 0;
            if (c[i] == '\'') {
                if (i + 1 < 80 && c[i + 1] == '\'') {
                    i++;
                    continue;
                }
                return 1;
            }
        }
        return 0;
    }
    for (; i < 80 && c[i] != ' ' && c[i] != '/'; i++)
        if ((unsigned char)c[i] < 0x20 || (unsigned char)c[i] > 0x7e)
            return 0;
    return 1;
}

/* The limit on the pixels of one plane of a tile-compressed image (whose
 * size the file's size does not bound): SKYFIND_MAX_PIXELS, else 2^32. */
static long long sf_fits_max_pixels(void)
{
    const char *e = getenv("SKYFIND_MAX_PIXELS");
    char *end;
    long long v;
    if (e && *e) {
        v = strtoll(e, &end, 10);
        if (*end == '\0' && v > 0)
            return v;
    }
    return 4294967296LL;
}

/* The value text of keyword key among n cards (quotes removed for a string,
 * trailing blanks dropped); 0 when absent. A card is read as CFITSIO reads
 * it (ffgcrd, ffpsvc): its name ends at the first blank or '=' of the first
 * 8 columns, and its value starts after "= " in columns 9-10 or else after
 * the card's first '=' (a card without any '=' has no value and is skipped).
 * The stricter "= " in columns 9-10 only had let "ZIMAGE =    T" (the '='
 * in column 8, fuzzing) pass as no ZIMAGE here while CFITSIO decompressed
 * the HDU's unchecked tiles and read past a buffer. */
static int sf_raw_key(const char *hdr, int n, const char *key, char val[72])
{
    size_t kl = strlen(key);
    for (int i = 0; i < n; i++) {
        const char *c = hdr + (size_t)i * 80;
        const char *eq;
        int j, k = 0;
        if (kl > 8 || strncmp(c, key, kl) != 0 || (kl < 8 && c[kl] != ' ' && c[kl] != '='))
            continue;
        if (c[8] == '=' && c[9] == ' ')
            j = 10;
        else if ((eq = memchr(c, '=', 80)) != NULL)
            j = (int)(eq - c) + 1;
        else
            continue;
        while (j < 80 && c[j] == ' ')
            j++;
        if (j < 80 && c[j] == '\'') {
            for (j++; j < 80 && k < 71; j++) {
                if (c[j] == '\'') {
                    if (j + 1 < 80 && c[j + 1] == '\'') {
                        val[k++] = c[++j];
                        continue;
                    }
                    break;
                }
                val[k++] = c[j];
            }
        } else {
            for (; j < 80 && c[j] != '/' && k < 71; j++)
                val[k++] = c[j];
        }
        while (k > 0 && val[k - 1] == ' ')
            k--;
        val[k] = '\0';
        return 1;
    }
    return 0;
}

/* Whether any card of keyword key is a logical that CFITSIO reads as true
 * (its value begins with T). CFITSIO has taken a tile-compressed HDU for one
 * when a first ZIMAGE card was blank and a second one T (fuzzing): the
 * pre-check walks the tiles of every HDU that any ZIMAGE card calls one. */
static int sf_raw_any_true(const char *hdr, int n, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 0; i < n; i++) {
        const char *c = hdr + (size_t)i * 80;
        char one[81], val[72];
        if (strncmp(c, key, kl) != 0)
            continue;
        memcpy(one, c, 80);
        one[80] = '\0';
        if (sf_raw_key(one, 1, key, val) && val[0] == 'T')
            return 1;
    }
    return 0;
}

/* An integer keyword: 1 and *v when present and an integer, 0 when absent,
 * -1 when present but not an integer (text in val). As CFITSIO reads it
 * (ffc2jj): the number may be followed by a blank and anything ("0   10"
 * is 0), so this walk sees the file as CFITSIO will. */
static int sf_raw_int(const char *hdr, int n, const char *key, long long *v, char val[72])
{
    char *end;
    if (!sf_raw_key(hdr, n, key, val))
        return 0;
    errno = 0;
    *v = strtoll(val, &end, 10);
    if (end == val || (*end != '\0' && *end != ' ') || errno)
        return -1;
    return 1;
}

/* Bytes per row element of a binary-table TFORM ("1PB(24)", "8A", "D");
 * the descriptor kind in *pq ('P', 'Q' or 0). -1 when unknown. */
static long long sf_raw_tform_bytes(const char *t, char *pq)
{
    long long r = 0;
    int have = 0;
    while (*t == ' ')
        t++;
    for (; *t >= '0' && *t <= '9'; t++, have = 1)
        r = r * 10 + (*t - '0');
    if (!have)
        r = 1;
    *pq = 0;
    switch (*t) {
    case 'L': case 'A': case 'B': return r;
    case 'X': return (r + 7) / 8;
    case 'I': return 2 * r;
    case 'J': case 'E': return 4 * r;
    case 'K': case 'D': case 'C': return 8 * r;
    case 'M': return 16 * r;
    case 'P': *pq = 'P'; return 8 * r;
    case 'Q': *pq = 'Q'; return 16 * r;
    default: return -1;
    }
}

/* zlib as loaded with CFITSIO (which inflates GZIP tiles with it); found at
 * run time so the library needs no link of its own. */
typedef int (*sf_inflate_init_fn)(z_streamp, int, const char *, int);
typedef int (*sf_inflate_fn)(z_streamp, int);
typedef int (*sf_inflate_end_fn)(z_streamp);
static int sf_zlib(sf_inflate_init_fn *init, sf_inflate_fn *inf, sf_inflate_end_fn *end)
{
    *init = (sf_inflate_init_fn)dlsym(RTLD_DEFAULT, "inflateInit2_");
    *inf = (sf_inflate_fn)dlsym(RTLD_DEFAULT, "inflate");
    *end = (sf_inflate_end_fn)dlsym(RTLD_DEFAULT, "inflateEnd");
    return *init && *inf && *end;
}

/* Inflate one GZIP tile into at most cap bytes: 0 when the stream ends
 * there, else 1. CFITSIO grows its buffer without bound while a corrupt
 * stream does not end (a few mutated bytes made it realloc past 68 GB). */
static int sf_raw_gzip_tile_bad(const unsigned char *in, size_t nin, unsigned char *out,
                                size_t cap)
{
    sf_inflate_init_fn init;
    sf_inflate_fn inf;
    sf_inflate_end_fn end;
    z_stream z;
    int r;
    if (!sf_zlib(&init, &inf, &end))
        return 0; /* no zlib in the process: CFITSIO could not inflate either */
    memset(&z, 0, sizeof z);
    if (init(&z, 15 + 32, ZLIB_VERSION, (int)sizeof z) != Z_OK)
        return 0;
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)nin;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    do
        r = inf(&z, Z_NO_FLUSH);
    while (r == Z_OK && z.avail_in > 0 && z.avail_out > 0);
    end(&z);
    return r != Z_STREAM_END;
}

/* Does a RICE_1 tile of nx pixels decode within its n bytes? The same walk
 * over the bits as CFITSIO's fits_rdecomp (bytepix 1, 2 or 4; blocks of
 * nblock pixels), without the pixels: CFITSIO checks for the end of the
 * stream only after each block and reads on past it inside one (a corrupt
 * tile: SIGSEGV in fits_rdecomp_short); a tile that passes here never makes
 * it read past its bytes. */
static int sf_raw_rice_ok(const unsigned char *c, size_t n, long long nx, int bytepix, int nblock)
{
    const int fsbits = bytepix == 1 ? 3 : bytepix == 2 ? 4 : 5;
    const int fsmax = bytepix == 1 ? 6 : bytepix == 2 ? 14 : 25;
    const int bbits = 1 << fsbits;
    size_t p = (size_t)bytepix;
    unsigned int b;
    int nbits = 8;
#define RICE_NEXT(dst) do { if (p >= n) return 0; (dst) = c[p++]; } while (0)
    if (n < (size_t)bytepix + 1 || nblock < 1)
        return 0;
    RICE_NEXT(b);
    for (long long i = 0; i < nx;) {
        unsigned int byte;
        long long imax = i + nblock < nx ? i + nblock : nx;
        int fs;
        nbits -= fsbits;
        while (nbits < 0) {
            RICE_NEXT(byte);
            b = (b << 8) | byte;
            nbits += 8;
        }
        fs = (int)(b >> nbits) - 1;
        b &= (1u << nbits) - 1;
        if (fs < 0) {
            i = imax;
        } else if (fs == fsmax) {
            for (; i < imax; i++) {
                int k = bbits - nbits;
                for (k -= 8; k >= 0; k -= 8)
                    RICE_NEXT(byte);
                if (nbits > 0) {
                    RICE_NEXT(b);
                    b &= (1u << nbits) - 1;
                } else {
                    b = 0;
                }
            }
        } else {
            for (; i < imax; i++) {
                int nz;
                while (b == 0) {
                    nbits += 8;
                    RICE_NEXT(b);
                }
                nz = nbits - (32 - __builtin_clz(b)); /* b's significant bits */
                nbits -= nz + 1;
                b ^= 1u << nbits;
                nbits -= fs;
                while (nbits < 0) {
                    RICE_NEXT(byte);
                    b = (b << 8) | byte;
                    nbits += 8;
                }
                b &= (1u << nbits) - 1;
            }
        }
    }
#undef RICE_NEXT
    return 1;
}

/* Check the keywords of a tile-compressed HDU (n cards at hdr, its data at
 * data in f) before CFITSIO sees it: CFITSIO divides by ZTILEn (SIGFPE at 0)
 * and trusts the table. */
static sf_status sf_raw_check_zimage(const char *path, int hdu, FILE *f, const char *hdr, int n,
                                     long long data, long long datasize)
{
    char val[72], key[16], cmp[72], pq = 0, cpq = 0, gzpq = 0;
    long long znaxis, zbitpix, ntiles = 1, tilepix = 1, planepix = 1, v, rowlen, nrows;
    long long zax[SF_FITS_MAXAXES], ztl[SF_FITS_MAXAXES], blocksize = 32, bytepix = 0;
    long long heap, pcount = 0, coloff = -1, gzoff = -1, off = 0, tfields;
    int r, gzip0, hcomp0, rice0;
    unsigned char *tile = NULL, *out = NULL;
    sf_status st = SF_OK;

#define ZBAD(...) do { st = sf_fail(SF_ERR_FORMAT, __VA_ARGS__); goto done; } while (0)
    /* a tile's descriptor or bytes past the end of the file: CFITSIO would
     * allocate what stale buffer bytes say (gigabytes) before it notices */
#define ZSHORT(what) do { st = sf_fail(SF_ERR_FITS, "%s: file is truncated: the %s of tile " \
        "%lld of the tile-compressed image in HDU %d lie past the end of the file", \
        path, (what), row + 1, hdu); goto done; } while (0)
    if ((r = sf_raw_int(hdr, n, "ZBITPIX", &zbitpix, val)) <= 0)
        ZBAD("%s: HDU %d: tile-compressed image %s ZBITPIX%s%s", path, hdu,
             r ? "with a bad" : "without", r ? " = " : "", r ? val : "");
    if (zbitpix != 8 && zbitpix != 16 && zbitpix != 32 && zbitpix != 64 && zbitpix != -32 &&
        zbitpix != -64)
        ZBAD("%s: HDU %d: tile-compressed image with ZBITPIX = %lld (not 8, 16, 32, 64, -32, -64)",
             path, hdu, zbitpix);
    if (!sf_raw_key(hdr, n, "ZCMPTYPE", cmp))
        ZBAD("%s: HDU %d: tile-compressed image without ZCMPTYPE", path, hdu);
    if (strcmp(cmp, "RICE_1") && strcmp(cmp, "RICE_ONE") && strcmp(cmp, "GZIP_1") &&
        strcmp(cmp, "GZIP_2") && strcmp(cmp, "PLIO_1") && strcmp(cmp, "HCOMPRESS_1") &&
        strcmp(cmp, "NOCOMPRESS"))
        ZBAD("%s: HDU %d: tile-compressed image with an unknown ZCMPTYPE = '%s'", path, hdu, cmp);
    gzip0 = !strncmp(cmp, "GZIP_", 5);
    hcomp0 = !strcmp(cmp, "HCOMPRESS_1");
    rice0 = !strcmp(cmp, "RICE_1") || !strcmp(cmp, "RICE_ONE");
    if ((r = sf_raw_int(hdr, n, "ZNAXIS", &znaxis, val)) <= 0 || znaxis < 1 ||
        znaxis > SF_FITS_MAXAXES)
        ZBAD("%s: HDU %d: tile-compressed image with %s ZNAXIS%s%s (1..%d)", path, hdu,
             r ? "a bad" : "no", r ? " = " : "", r ? val : "", SF_FITS_MAXAXES);
    for (int k = 1; k <= znaxis; k++) {
        long long ax, t;
        snprintf(key, sizeof key, "ZNAXIS%d", k);
        if ((r = sf_raw_int(hdr, n, key, &ax, val)) <= 0 || ax < 1 || ax > INT_MAX)
            ZBAD("%s: HDU %d: tile-compressed image with %s %s%s%s (must be 1..%d)", path, hdu,
                 r ? "a bad" : "no", key, r ? " = " : "", r ? val : "", INT_MAX);
        snprintf(key, sizeof key, "ZTILE%d", k);
        r = sf_raw_int(hdr, n, key, &t, val);
        if (r == 0) /* CFITSIO's default: whole rows */
            t = k == 1 ? ax : 1;
        if (r < 0 || t < 1 || t > INT_MAX)
            ZBAD("%s: HDU %d: tile-compressed image with %s = %s (must be an integer >= 1)", path,
                 hdu, key, val);
        if (t > ax)
            t = ax;
        zax[k - 1] = ax;
        ztl[k - 1] = t;
        ntiles *= (ax + t - 1) / t;
        tilepix *= t;
        if (k <= 2)
            planepix *= ax;
        if (tilepix > (1LL << 31) || ntiles > (1LL << 40))
            ZBAD("%s: HDU %d: tile-compressed image with tiles of more than 2^31 pixels (%s)",
                 path, hdu, key);
    }
    for (int k = 1; k <= 99; k++) { /* compression parameters: CFITSIO divides by BLOCKSIZE */
        char zname[72], zkey[16];
        long long zv;
        snprintf(key, sizeof key, "ZNAME%d", k);
        if (!sf_raw_key(hdr, n, key, zname))
            break;
        snprintf(zkey, sizeof zkey, "ZVAL%d", k);
        if (!strcmp(zname, "BLOCKSIZE") || !strcmp(zname, "BYTEPIX")) {
            r = sf_raw_int(hdr, n, zkey, &zv, val);
            if (r < 0 || (r > 0 && (zv < 1 || zv > 1 << 20 ||
                                    (!strcmp(zname, "BYTEPIX") && zv != 1 && zv != 2 &&
                                     zv != 4 && zv != 8))))
                ZBAD("%s: HDU %d: tile-compressed image with %s = %s for %s", path, hdu, zkey,
                     val, zname);
            if (r > 0)
                *(!strcmp(zname, "BYTEPIX") ? &bytepix : &blocksize) = zv;
        } else if (sf_raw_key(hdr, n, zkey, val)) {
            char *end;
            double d = strtod(val, &end);
            if (end == val || *end != '\0' || !isfinite(d))
                ZBAD("%s: HDU %d: tile-compressed image with %s = %s (not a number) for %s",
                     path, hdu, zkey, val, zname);
        }
    }
    if (bytepix == 0) /* the convention's default, and CFITSIO's: 4 (whatever ZBITPIX) */
        bytepix = 4;
    if (rice0 && bytepix == 8)
        ZBAD("%s: HDU %d: RICE_1 with BYTEPIX = 8 (CFITSIO cannot decode it)", path, hdu);
    if (planepix > sf_fits_max_pixels())
        ZBAD("%s: HDU %d: tile-compressed image of %lld pixels per plane (%.3g GB as float32): "
             "more than the limit of %lld pixels (SKYFIND_MAX_PIXELS)",
             path, hdu, planepix, planepix * 4e-9, sf_fits_max_pixels());
    if (sf_raw_int(hdr, n, "NAXIS1", &rowlen, val) <= 0 ||
        sf_raw_int(hdr, n, "NAXIS2", &nrows, val) <= 0 || rowlen < 0 || nrows < 0)
        ZBAD("%s: HDU %d: tile-compressed image without a valid table size (NAXIS1, NAXIS2)",
             path, hdu);
    if (nrows != ntiles)
        ZBAD("%s: HDU %d: tile-compressed image: the table has %lld rows but ZNAXISn/ZTILEn "
             "make %lld tiles", path, hdu, nrows, ntiles);
    sf_raw_int(hdr, n, "PCOUNT", &pcount, val);
    heap = rowlen * nrows;
    if (sf_raw_int(hdr, n, "THEAP", &v, val) > 0)
        heap = v;
    if (heap < rowlen * nrows || heap + pcount > datasize)
        ZBAD("%s: HDU %d: tile-compressed image: the heap (THEAP, PCOUNT) lies outside the table",
             path, hdu);
    if (sf_raw_int(hdr, n, "TFIELDS", &tfields, val) <= 0 || tfields < 1 || tfields > 999)
        ZBAD("%s: HDU %d: tile-compressed image with a bad TFIELDS", path, hdu);
    for (int k = 1; k <= tfields; k++) {
        char form[72], type[72];
        long long w;
        snprintf(key, sizeof key, "TFORM%d", k);
        if (!sf_raw_key(hdr, n, key, form) || (w = sf_raw_tform_bytes(form, &cpq)) < 0)
            ZBAD("%s: HDU %d: tile-compressed image with a bad %s", path, hdu, key);
        snprintf(key, sizeof key, "TTYPE%d", k);
        if (sf_raw_key(hdr, n, key, type) && !strcmp(type, "COMPRESSED_DATA")) {
            if (!cpq)
                ZBAD("%s: HDU %d: COMPRESSED_DATA is not a variable-length column", path, hdu);
            coloff = off;
            pq = cpq;
        } else if (!strcmp(type, "GZIP_COMPRESSED_DATA") && cpq) {
            gzoff = off; /* tiles CFITSIO kept lossless with GZIP (floats) */
            gzpq = cpq;
        }
        off += w;
    }
    if (coloff < 0)
        ZBAD("%s: HDU %d: tile-compressed image without a COMPRESSED_DATA column", path, hdu);
    if (coloff + (pq == 'P' ? 8 : 16) > rowlen || (gzoff >= 0 && gzoff + (gzpq == 'P' ? 8 : 16) > rowlen))
        ZBAD("%s: HDU %d: tile-compressed image: the columns are wider than NAXIS1", path, hdu);
    /* every tile's descriptor inside the heap; GZIP tiles must end in a tile's bytes */
    {
        size_t cap = (size_t)tilepix * 8 + 1024;
        if ((gzip0 || gzoff >= 0) && !(out = malloc(cap)))
            ZBAD("%s: HDU %d: no memory to check a tile", path, hdu);
        for (long long rc = 0; rc < 2 * nrows; rc++) {
            /* COMPRESSED_DATA's tiles, then GZIP_COMPRESSED_DATA's (if any) */
            const long long row = rc % nrows, coff = rc < nrows ? coloff : gzoff;
            const char kq = rc < nrows ? pq : gzpq;
            const int hcomp = rc < nrows && hcomp0, rice = rc < nrows && rice0;
            const int gzip = rc < nrows ? gzip0 : 1;
            unsigned char d[16];
            unsigned long long len = 0, pos = 0;
            if (coff < 0)
                break;
            if (fseeko(f, (off_t)(data + row * rowlen + coff), SEEK_SET) ||
                fread(d, 1, kq == 'P' ? 8 : 16, f) != (size_t)(kq == 'P' ? 8 : 16))
                ZSHORT("descriptor"); /* CFITSIO would read it from stale buffers */
            for (int b = 0; b < (kq == 'P' ? 4 : 8); b++) {
                len = len << 8 | d[b];
                pos = pos << 8 | d[b + (kq == 'P' ? 4 : 8)];
            }
            if (len > (unsigned long long)pcount || pos > (unsigned long long)pcount - len)
                ZBAD("%s: HDU %d: tile %lld of the tile-compressed image lies outside the heap "
                     "(%llu bytes at %llu, heap %lld bytes)", path, hdu, row + 1, len, pos, pcount);
            long long tpix = 1;
            {
                long long idx = row;
                for (int k = 0; k < znaxis; k++) { /* this tile's pixels (edge tiles are smaller) */
                    long long nt = (zax[k] + ztl[k] - 1) / ztl[k], tk = idx % nt;
                    idx /= nt;
                    tpix *= zax[k] - tk * ztl[k] < ztl[k] ? zax[k] - tk * ztl[k] : ztl[k];
                }
            }
            if (hcomp && len > 0) {
                /* the stream's own tile size: CFITSIO decodes nx x ny into a
                 * buffer of the tile's pixels (a larger one: SIGSEGV) */
                unsigned char h[10];
                long long hx, hy;
                if (len < 10 || fseeko(f, (off_t)(data + heap + (long long)pos), SEEK_SET) ||
                    fread(h, 1, 10, f) != 10)
                    ZBAD("%s: HDU %d: tile %lld of the tile-compressed image is corrupt (a "
                         "HCOMPRESS stream of %llu bytes)", path, hdu, row + 1, len);
                hx = (int32_t)((uint32_t)h[2] << 24 | (uint32_t)h[3] << 16 | (uint32_t)h[4] << 8 | h[5]);
                hy = (int32_t)((uint32_t)h[6] << 24 | (uint32_t)h[7] << 16 | (uint32_t)h[8] << 8 | h[9]);
                if (h[0] != 0xdd || h[1] != 0x99 || hx < 1 || hy < 1 || hx * hy != tpix)
                    ZBAD("%s: HDU %d: tile %lld of the tile-compressed image is corrupt (its "
                         "HCOMPRESS stream says %lld x %lld pixels, the tile has %lld)",
                         path, hdu, row + 1, hx, hy, tpix);
            }
            if (rice && len > 0) {
                if (!(tile = realloc(tile, len)))
                    ZBAD("%s: HDU %d: no memory to check tile %lld", path, hdu, row + 1);
                if (fseeko(f, (off_t)(data + heap + (long long)pos), SEEK_SET) ||
                    fread(tile, 1, len, f) != len)
                    ZSHORT("compressed bytes");
                if (!sf_raw_rice_ok(tile, len, tpix, (int)bytepix, (int)blocksize))
                    ZBAD("%s: HDU %d: tile %lld of the tile-compressed image is corrupt (its "
                         "RICE_1 stream ends before the tile's %lld pixels)",
                         path, hdu, row + 1, tpix);
            }
            if (!gzip || len == 0)
                continue;
            if (!(tile = realloc(tile, len)))
                ZBAD("%s: HDU %d: no memory to check tile %lld", path, hdu, row + 1);
            if (fseeko(f, (off_t)(data + heap + (long long)pos), SEEK_SET) ||
                fread(tile, 1, len, f) != len)
                ZSHORT("compressed bytes");
            if (sf_raw_gzip_tile_bad(tile, len, out, cap))
                ZBAD("%s: HDU %d: tile %lld of the tile-compressed image is corrupt (its %s "
                     "stream does not end within the tile's %lld pixels)",
                     path, hdu, row + 1, rc < nrows ? cmp : "GZIP", tilepix);
        }
    }
#undef ZBAD
#undef ZSHORT
done:
    free(tile);
    free(out);
    return st;
}

/* The END card as CFITSIO finds it: the keyword name is "END", ended by a
 * blank or '=' (so "END   xx" ends a header too; a stricter test here let a
 * mutated header through whose data CFITSIO then read at another offset). */
static int sf_card_is_end(const char *c)
{
    return !strncmp(c, "END", 3) && (c[3] == ' ' || c[3] == '=');
}

/* Before CFITSIO opens a plain disk file: say what a non-file is (a
 * directory, a FIFO that would block the open, a device), then walk the
 * raw 2880-byte header blocks and refuse an image HDU that declares more
 * data than the file holds (before anything allocates it), a damaged
 * mandatory keyword in a header CFITSIO will parse on the way to the image
 * (when the name gives no HDU, the walk stops at the first image: CFITSIO
 * reads no further, so a damaged later HDU does not lose the image) and a
 * tile-compressed HDU whose keywords CFITSIO would trip on. Anything else
 * unusual is left to CFITSIO's own messages. */
sf_status sf_fits_precheck(const char *path)
{
    char urltype[FLEN_FILENAME], infile[FLEN_FILENAME], outfile[FLEN_FILENAME];
    char extspec[FLEN_FILENAME], filter[FLEN_FILENAME], binspec[FLEN_FILENAME];
    char colspec[FLEN_FILENAME], val[72];
    struct stat sb;
    FILE *f = NULL;
    char *hdr = NULL;
    long long pos = 0, fsize;
    int status = 0, strict, hdu, ended = 0, absent = 0;
    char why[160] = "";
    sf_status st = SF_OK;
    unsigned char magic[2];

    if (strlen(path) >= FLEN_FILENAME)
        return SF_OK;
    urltype[0] = infile[0] = extspec[0] = '\0';
    fits_parse_input_url((char *)path, urltype, infile, outfile, extspec, filter, binspec,
                         colspec, &status);
    fits_clear_errmsg();
    if (status || (urltype[0] && strcmp(urltype, "file://") != 0) || !infile[0] ||
        !strcmp(infile, "-") || !strcmp(infile, "stdin"))
        return SF_OK;
    if (stat(infile, &sb) != 0)
        return SF_OK; /* CFITSIO's open says what is wrong */
    if (S_ISDIR(sb.st_mode))
        return sf_fail(SF_ERR_IO, "%s: is a directory, not a FITS file", path);
    if (S_ISFIFO(sb.st_mode))
        return sf_fail(SF_ERR_IO, "%s: is a FIFO (named pipe), not a FITS file: "
                       "skyfind reads regular files", path);
    if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode))
        return sf_fail(SF_ERR_IO, "%s: is a %s device, not a FITS file", path,
                       S_ISCHR(sb.st_mode) ? "character" : "block");
    if (S_ISSOCK(sb.st_mode))
        return sf_fail(SF_ERR_IO, "%s: is a socket, not a FITS file", path);
    if (!S_ISREG(sb.st_mode) || !(f = fopen(infile, "rb")))
        return SF_OK;
    fsize = (long long)sb.st_size;
    if (fread(magic, 1, 2, f) != 2 || (magic[0] == 0x1f && (magic[1] == 0x8b || magic[1] == 0x9d)) ||
        (magic[0] == 'B' && magic[1] == 'Z'))
        goto done; /* empty, or compressed as a whole: CFITSIO's business */
    if (!(hdr = malloc(2880)))
        goto done;
    strict = !extspec[0];
    for (hdu = 1; hdu <= 10000 && pos < fsize; hdu++) {
        long long bitpix, naxis, ax[999], pcount = 0, gcount = 1, npix = 1, size;
        int n = 0, isimage, r;
        char xt[72] = "";
        /* the header: blocks until END (ended 1), or the end of the file
         * (ended -1: its whole cards are checked all the same, as CFITSIO
         * parses the mandatory keywords before it looks for END) */
        ended = 0;
        while (!ended) {
            char *h2 = realloc(hdr, (size_t)(n / 36 + 1) * 2880 + 1);
            size_t got;
            if (!h2 || n >= 36 * 10000)
                goto done;
            hdr = h2;
            if (fseeko(f, (off_t)(pos + (long long)n / 36 * 2880), SEEK_SET))
                goto done;
            got = fread(hdr + (size_t)n * 80, 1, 2880, f);
            if (got < 2880) {
                n += (int)(got / 80);
                hdr[(size_t)n * 80] = '\0';
                ended = -1;
                break;
            }
            hdr[(size_t)(n + 36) * 80] = '\0'; /* strspn and sf_raw_key stop there */
            for (int i = 0; i < 36 && !ended; i++, n++)
                if (sf_card_is_end(hdr + (size_t)n * 80))
                    ended = 1;
            n = ((n + 35) / 36) * 36;
        }
        pos += (long long)n / 36 * 2880;
        for (int i = 0; i < n; i++) { /* CFITSIO parses these: a bad byte there aborted it */
            const char *c = hdr + (size_t)i * 80;
            char key[9];
            sf_card_key(c, key);
            if (key[0] && strcmp(key, "COMMENT") && sf_fits_structural(key, c) &&
                (!sf_card_value_ok(c) || memchr(c, '\0', 8))) {
                st = sf_fail(SF_ERR_FORMAT, "%s: HDU %d: the %s card is malformed (a byte that is "
                             "not printable ASCII, or a quote that does not close)", path, hdu,
                             key);
                goto done;
            }
        }
        if (n == 0 || strncmp(hdr, hdu == 1 ? "SIMPLE  =" : "XTENSION=", 9) != 0)
            goto done; /* not FITS, or junk after the last HDU: CFITSIO's business */
        /* The mandatory keywords. Up to the HDU that will be read (the
         * first with an image, when the name names none), CFITSIO parses
         * every header on the way, and a damaged one has made it allocate
         * from garbage (fuzzing): refused here with its name. */
        if ((r = sf_raw_int(hdr, n, "BITPIX", &bitpix, val)) <= 0 ||
            (bitpix != 8 && bitpix != 16 && bitpix != 32 && bitpix != 64 && bitpix != -32 &&
             bitpix != -64)) {
            absent = r == 0;
            snprintf(why, sizeof why, "BITPIX is missing or not one of 8, 16, 32, 64, -32, -64");
            goto damaged;
        }
        if ((r = sf_raw_int(hdr, n, "NAXIS", &naxis, val)) <= 0 || naxis < 0 || naxis > 999) {
            absent = r == 0;
            snprintf(why, sizeof why, "NAXIS is missing or not an integer from 0 to 999");
            goto damaged;
        }
        for (int k = 0; k < naxis; k++) {
            char key[24];
            snprintf(key, sizeof key, "NAXIS%d", k + 1);
            if ((r = sf_raw_int(hdr, n, key, &ax[k], val)) <= 0 || ax[k] < 0) {
                absent = r == 0;
                snprintf(why, sizeof why, "%s is missing or not an integer >= 0", key);
                goto damaged;
            }
            if (ax[k] > 0 && npix > (1LL << 62) / ax[k])
                npix = 1LL << 62;
            else
                npix *= ax[k];
        }
        if (naxis == 0)
            npix = 0;
        if (sf_raw_int(hdr, n, "PCOUNT", &pcount, val) < 0 ||
            sf_raw_int(hdr, n, "GCOUNT", &gcount, val) < 0 || pcount < 0 || gcount < 0 ||
            pcount > (1LL << 50) || gcount > 1000) {
            absent = 0;
            snprintf(why, sizeof why, "PCOUNT or GCOUNT is not an integer in range");
            goto damaged;
        }
        isimage = hdu == 1 || (sf_raw_key(hdr, n, "XTENSION", xt) && !strcmp(xt, "IMAGE"));
        if (!isimage && (!strcmp(xt, "BINTABLE") || !strcmp(xt, "TABLE"))) {
            long long tfields;
            if ((r = sf_raw_int(hdr, n, "TFIELDS", &tfields, val)) <= 0 || tfields < 0 ||
                tfields > 999) {
                absent = r == 0;
                snprintf(why, sizeof why, "TFIELDS of the %s is missing or not an integer from "
                         "0 to 999", xt);
                goto damaged;
            }
        }
        if (ended < 0) {
            absent = 1;
            goto damaged;
        }
        size = (npix >= (1LL << 62) / 8 ? (1LL << 59) : npix * (bitpix < 0 ? -bitpix : bitpix) / 8);
        size = (size + pcount) * gcount;
        if (isimage && naxis >= 2 && size > 0 && pos + size > fsize) {
            double by = (double)(bitpix < 0 ? -bitpix : bitpix) / 8.0;
            char dims[256], amount[32];
            int k2 = 0;
            for (int k = 0; k < naxis; k++)
                by *= (double)ax[k];
            for (int k = 0; k < naxis && k2 < 200; k++)
                k2 += snprintf(dims + k2, sizeof dims - (size_t)k2, "%s%lld", k ? " x " : "", ax[k]);
            if (by >= 1e9)
                snprintf(amount, sizeof amount, "%.3g GB", by / 1e9);
            else if (by >= 1e6)
                snprintf(amount, sizeof amount, "%.3g MB", by / 1e6);
            else
                snprintf(amount, sizeof amount, "%.0f bytes", by);
            st = sf_fail(SF_ERR_FITS, "%s: file is truncated or its header is wrong: HDU %d "
                         "declares %s pixels (%s) but the file holds only %lld bytes",
                         path, hdu, dims, amount, fsize);
            goto done;
        }
        {
            /* a logical as CFITSIO reads it: true when the value begins
             * with T ("THEAP   =..." is true: fuzzing), on any ZIMAGE card */
            int zimage = sf_raw_any_true(hdr, n, "ZIMAGE");
            if (zimage && (st = sf_raw_check_zimage(path, hdu, f, hdr, n, pos, size)) != SF_OK)
                goto done;
            if (strict && ((isimage && naxis > 0) || zimage))
                goto done; /* the HDU that will be read: CFITSIO goes no further */
        }
        pos += (size + 2879) / 2880 * 2880;
    }
    goto done;
damaged:
    if (strict && ended < 0 && absent)
        st = sf_fail(SF_ERR_FITS, "%s: HDU %d: the header has no END card before the end of the "
                     "file: the file is truncated or damaged", path, hdu);
    else if (strict)
        st = sf_fail(SF_ERR_FITS, "%s: HDU %d: the header is damaged: %s", path, hdu, why);
done:
    free(hdr);
    if (f)
        fclose(f);
    return st;
}

