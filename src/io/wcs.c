/* Celestial WCS of an image's first two axes through WCSLIB (wcspih, wcssub,
 * wcsfix, wcsset) and pixel-to-world conversion with 0-based pixels, for the
 * catalogue writers and `skyfind info`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <wcslib/wcslib.h>
#include "skyfind/wcs.h"

struct sf_wcs {
    struct wcsprm sub;   /* axes 1 and 2 only, set up */
    int ndropped;        /* cards left out as unparseable (sf_fits_card_ok) */
    char lon_name[8], lat_name[8];
    char frame[16];
    const char *kind;
};

static void sf_wcs_names(sf_wcs *w)
{
    const char *ct = w->sub.ctype[w->sub.lng];
    const char *rs = w->sub.radesys;
    strcpy(w->frame, "");
    if (!strncmp(ct, "RA--", 4)) {
        strcpy(w->lon_name, "ra");
        strcpy(w->lat_name, "dec");
        w->kind = "eq";
        if (!strcmp(rs, "ICRS"))
            strcpy(w->frame, "icrs");
        else if (!strcmp(rs, "FK4") || !strcmp(rs, "FK4-NO-E"))
            strcpy(w->frame, "fk4");
        else if (!strcmp(rs, "FK5") || !rs[0])
            strcpy(w->frame, "fk5");
    } else if (!strncmp(ct, "GLON", 4)) {
        strcpy(w->lon_name, "glon");
        strcpy(w->lat_name, "glat");
        w->kind = "galactic";
        strcpy(w->frame, "galactic");
    } else if (!strncmp(ct, "ELON", 4)) {
        strcpy(w->lon_name, "elon");
        strcpy(w->lat_name, "elat");
        w->kind = "ecliptic";
        strcpy(w->frame, "ecliptic");
    } else {
        strcpy(w->lon_name, "lon");
        strcpy(w->lat_name, "lat");
        w->kind = "other";
    }
}

sf_wcs *sf_wcs_open(const sf_fits_info *in, int nx, int ny)
{
    struct wcsprm *wcs = NULL;
    sf_wcs *w = NULL;
    int nreject = 0, nwcs = 0, fixstat[NWCSFIX], nsub = 2, axes[2] = {1, 2}, have_sub = 0;
    int naxis_in[2] = {nx, ny}, err = 0, ngood = 0;
    char *hdr = NULL;

    if (!in || !in->header || in->ncards <= 0) {
        sf_fail(SF_ERR_FORMAT, "no header to read a WCS from");
        return NULL;
    }
    w = calloc(1, sizeof *w);
    if (!w) {
        sf_fail(SF_ERR_NOMEM, "sf_wcs_open: malloc failed");
        return NULL;
    }
    w->sub.flag = -1;
    /* WCSLIB's header parser aborts the process on some malformed cards (an
     * unclosed quote, a control byte): it only sees the cards that pass
     * sf_fits_card_ok; the others are counted (sf_wcs_ndropped) */
    if (!(hdr = malloc((size_t)in->ncards * 80 + 1))) {
        sf_fail(SF_ERR_NOMEM, "sf_wcs_open: malloc failed");
        goto fail;
    }
    for (int i = 0; i < in->ncards; i++) {
        const char *card = in->header + (size_t)i * 80;
        if (memchr(card, '\0', 80) || !sf_fits_card_ok(card)) {
            w->ndropped++;
            continue;
        }
        memcpy(hdr + (size_t)ngood * 80, card, 80);
        ngood++;
    }
    hdr[(size_t)ngood * 80] = '\0';
    if (ngood == 0 ||
        (err = wcspih(hdr, ngood, WCSHDR_all, 0, &nreject, &nwcs, &wcs)) || nwcs < 1) {
        sf_fail(SF_ERR_FORMAT, "%s: no WCS in the header (wcspih %d)", in->path, err);
        goto fail;
    }
    if (wcs->naxis < 2 || wcssub(1, wcs, &nsub, axes, &w->sub) || nsub != 2) {
        sf_fail(SF_ERR_FORMAT, "%s: no WCS on axes 1 and 2", in->path);
        goto fail;
    }
    have_sub = 1;
    wcsfix(7, naxis_in, &w->sub, fixstat);
    if ((err = wcsset(&w->sub)) || w->sub.lng < 0 || w->sub.lat < 0) {
        sf_fail(SF_ERR_FORMAT, "%s: no celestial WCS on axes 1 and 2 (wcsset %d)", in->path,
                err);
        goto fail;
    }
    sf_wcs_names(w);
    wcsvfree(&nwcs, &wcs);
    free(hdr);
    return w;
fail:
    if (have_sub)
        wcsfree(&w->sub);
    free(w);
    free(hdr);
    if (wcs)
        wcsvfree(&nwcs, &wcs);
    return NULL;
}

sf_wcs *sf_wcs_dup(const sf_wcs *w)
{
    sf_wcs *d = calloc(1, sizeof *d);
    if (!d) {
        sf_fail(SF_ERR_NOMEM, "sf_wcs_dup: malloc failed");
        return NULL;
    }
    *d = *w; /* the names, the frame, the count of dropped cards */
    memset(&d->sub, 0, sizeof d->sub);
    d->sub.flag = -1;
    /* wcscopy (wcssub of all axes) only reads its source: several threads may copy one */
    if (wcscopy(1, &w->sub, &d->sub) || wcsset(&d->sub)) {
        wcsfree(&d->sub);
        free(d);
        sf_fail(SF_ERR_NOMEM, "sf_wcs_dup: WCSLIB could not copy the WCS");
        return NULL;
    }
    return d;
}

void sf_wcs_close(sf_wcs *w)
{
    if (!w)
        return;
    wcsfree(&w->sub);
    free(w);
}

int sf_wcs_pix2world(const sf_wcs *w, double x0, double y0, double *lon, double *lat)
{
    /* wcsp2s takes a non-const wcsprm but, with the flag set by wcsset in
     * sf_wcs_open, only reads it. */
    struct wcsprm *p = (struct wcsprm *)&w->sub;
    double pix[2] = {x0 + 1.0, y0 + 1.0}, img[2], world[2], phi, theta;
    int stat[1] = {0};
    *lon = *lat = NAN;
    if (!isfinite(x0) || !isfinite(y0))
        return -1;
    if (wcsp2s(p, 1, 2, pix, img, &phi, &theta, world, stat) || stat[0])
        return -1;
    *lon = world[w->sub.lng];
    *lat = world[w->sub.lat];
    if (!isfinite(*lon) || !isfinite(*lat)) {
        *lon = *lat = NAN;
        return -1;
    }
    return 0;
}

static double sf_wcs_sep_deg(double lon1, double lat1, double lon2, double lat2)
{
    const double d2r = M_PI / 180.0;
    double dlat = (lat2 - lat1) * d2r, dlon = (lon2 - lon1) * d2r;
    double a = sin(dlat / 2) * sin(dlat / 2) +
               cos(lat1 * d2r) * cos(lat2 * d2r) * sin(dlon / 2) * sin(dlon / 2);
    return 2.0 * asin(sqrt(a < 1.0 ? a : 1.0)) / d2r;
}

double sf_wcs_pixel_arcsec(const sf_wcs *w, double x0, double y0)
{
    double l0, b0, l1, b1, l2, b2;
    if (sf_wcs_pix2world(w, x0, y0, &l0, &b0) || sf_wcs_pix2world(w, x0 + 1, y0, &l1, &b1) ||
        sf_wcs_pix2world(w, x0, y0 + 1, &l2, &b2))
        return NAN;
    return sqrt(sf_wcs_sep_deg(l0, b0, l1, b1) * sf_wcs_sep_deg(l0, b0, l2, b2)) * 3600.0;
}

const char *sf_wcs_lon_name(const sf_wcs *w) { return w->lon_name; }
const char *sf_wcs_lat_name(const sf_wcs *w) { return w->lat_name; }
const char *sf_wcs_frame(const sf_wcs *w) { return w->frame; }
const char *sf_wcs_kind(const sf_wcs *w) { return w->kind; }
int sf_wcs_ndropped(const sf_wcs *w) { return w->ndropped; }
