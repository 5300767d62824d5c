/* Shared by the libFuzzer harnesses of tests/fuzz: which FITS inputs are not
 * handed to the readers (too large to keep an execution fast, whole-file
 * compression) and, with SKYFIND_FUZZ_SKIP_KNOWN=1 in the environment, the
 * patterns of the four CFITSIO/WCSLIB crashes that ../shared/data/fuzz/
 * reproduces (for a tree older than the src/io/fits.c precheck and the WCS card
 * filter, which refuse them: by default they are fuzzed). */
#ifndef SKYFIND_FUZZ_COMMON_H
#define SKYFIND_FUZZ_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Largest image plane (nx * ny) and tile (product of ZTILEn) let through. */
#define FUZZ_MAXPIX (512L * 512L)

static int fuzz_all(void)
{
    static int all = -1;
    if (all < 0) {
        const char *e = getenv("SKYFIND_FUZZ_SKIP_KNOWN");
        all = !(e && *e && strcmp(e, "0") != 0);
    }
    return all;
}

/* The integer value of an 80-byte card, or def when it has none. */
static long fuzz_card_long(const char *c, long def)
{
    char v[72], *end;
    long x;
    if (c[8] != '=')
        return def;
    memcpy(v, c + 10, 70);
    v[70] = 0;
    x = strtol(v, &end, 10);
    return end == v ? def : x;
}

/* Pixels of a plane of naxis axes a[0] x a[1] as the skip rule compares them
 * with FUZZ_MAXPIX: each axis clamped to [-1, FUZZ_MAXPIX + 1] first, so the
 * product cannot overflow (NAXIS1 = 440 and NAXIS2 = 2^63 - 1 did, in the
 * harness itself); the decision is the same for every header. */
static long fuzz_plane_pix(long naxis, const long a[2])
{
    long a0 = a[0] < -1 ? -1 : a[0] > FUZZ_MAXPIX ? FUZZ_MAXPIX + 1 : a[0];
    long a1 = a[1] < -1 ? -1 : a[1] > FUZZ_MAXPIX ? FUZZ_MAXPIX + 1 : a[1];
    return naxis >= 2 ? a0 * (a1 > 0 ? a1 : 1) : naxis == 1 ? a0 : 0;
}

static int fuzz_card_has(const char *c, const char *word)
{
    char t[81];
    memcpy(t, c, 80);
    t[80] = 0;
    return strstr(t, word) != NULL;
}

/* Scan the 80-byte cards of every 2880-byte block that looks like a header
 * (data blocks that happen to hold card-like text are scanned too: a
 * conservative skip). Returns a reason to skip, or NULL. */
static const char *fuzz_scan_cards(const uint8_t *d, size_t n)
{
    long tile = 1, ax[2] = {1, 1}, zax[2] = {1, 1}, naxis = 0, znaxis = 0;
    int in_header = 1;
    for (size_t off = 0; off + 80 <= n; off += 80) {
        const char *c = (const char *)d + off;
        if (off % 2880 == 0) /* a header starts with SIMPLE or XTENSION */
            in_header = !memcmp(c, "SIMPLE  ", 8) || !memcmp(c, "XTENSION", 8) || in_header;
        if (!in_header)
            continue;
        /* the size of an image plane (or of a tile-compressed one), whatever
         * the HDU's type: a conservative skip, made from the raw cards (CFITSIO
         * itself, walking hostile HDUs here, crashed in the harness) */
        if (!memcmp(c, "NAXIS   ", 8))
            naxis = fuzz_card_long(c, 0);
        else if (!memcmp(c, "NAXIS1  ", 8) || !memcmp(c, "NAXIS2  ", 8))
            ax[c[5] - '1'] = fuzz_card_long(c, 1);
        else if (!memcmp(c, "ZNAXIS  ", 8))
            znaxis = fuzz_card_long(c, 0);
        else if (!memcmp(c, "ZNAXIS1 ", 8) || !memcmp(c, "ZNAXIS2 ", 8))
            zax[c[6] - '1'] = fuzz_card_long(c, 1);
        if (!memcmp(c, "END", 3) && (c[3] == ' ' || c[3] == '=')) { /* as CFITSIO ends a header */
            long px = fuzz_plane_pix(naxis, ax), zpx = fuzz_plane_pix(znaxis, zax);
            if ((ax[0] > FUZZ_MAXPIX || ax[1] > FUZZ_MAXPIX || px > FUZZ_MAXPIX) && naxis >= 1)
                return "image plane over 512x512 pixels";
            if ((zax[0] > FUZZ_MAXPIX || zax[1] > FUZZ_MAXPIX || zpx > FUZZ_MAXPIX) && znaxis >= 1)
                return "tile-compressed image plane over 512x512 pixels";
            in_header = 0;
            tile = 1;
            ax[0] = ax[1] = zax[0] = zax[1] = 1;
            naxis = znaxis = 0;
            continue;
        }
        if (!memcmp(c, "ZTILE", 5)) {
            long t = fuzz_card_long(c, 1);
            if (t <= 0 && !fuzz_all())
                return "ZTILEn <= 0 (known: CFITSIO SIGFPE)";
            if (t > 0 && (tile *= (t > FUZZ_MAXPIX ? FUZZ_MAXPIX + 1 : t)) > FUZZ_MAXPIX)
                return "tile too large";
        }
        if (fuzz_all())
            continue;
        if (!memcmp(c, "ZCMPTYPE", 8) && fuzz_card_has(c, "GZIP"))
            return "GZIP tiles (known: CFITSIO realloc bomb on a corrupt tile)";
        for (int i = 0; i < 80; i++)
            if ((unsigned char)c[i] < 0x20 || (unsigned char)c[i] > 0x7e)
                return "non-ASCII byte in a header card (known: WCSLIB wcspih abort)";
        if (c[8] == '=' && c[10] == '\'') { /* a string value must close */
            int closed = 0;
            for (int i = 11; i < 80; i++) {
                if (c[i] == '\'') {
                    if (i + 1 < 80 && c[i + 1] == '\'') { i++; continue; }
                    closed = 1;
                    for (int j = i + 1; j < 80 && c[j] != '/'; j++)
                        if (c[j] != ' ')
                            closed = 0; /* text after the closing quote */
                    break;
                }
            }
            if (!closed)
                return "malformed quoted string (known: WCSLIB wcspih abort)";
        }
    }
    return NULL;
}

/* NULL when the FITS bytes may go to sf_fits_read; otherwise why not. Made
 * from the raw bytes only: the harness must not hand hostile HDUs to CFITSIO
 * itself (a walk with fits_get_num_hdus here was the "crash after another
 * file" of RESULTS.md #4, in the harness, not in skyfind). */
static const char *fuzz_fits_skip(const uint8_t *d, size_t n)
{
    if (n >= 2 && ((d[0] == 0x1f && (d[1] == 0x8b || d[1] == 0x9d)) || (d[0] == 'B' && d[1] == 'Z')))
        return "whole-file compression (CFITSIO trusts the stored size)";
    return fuzz_scan_cards(d, n);
}

#endif
