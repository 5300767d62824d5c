/* sf_fits_describe (`skyfind info`): describe a FITS image (HDU, axes, scaling, beam, WCS centre
 * and pixel scale through WCSLIB, NaN count, exact min/median/max) as
 * `key: value` lines or as one JSON object per file. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/fits.h"
#include "skyfind/wcs.h"
#include "skyfind/json.h"

typedef struct {
    int have_wcs;           /* celestial WCS on the first two axes */
    double lon, lat;        /* world coordinates of the centre pixel (deg) */
    double pix_arcsec;      /* geometric mean of the two pixel sides */
    double vmin, vmed, vmax;
} sf_fits_summary;

static sf_status sf_fits_stats(const sf_image *im, sf_fits_summary *s)
{
    size_t n = sf_npix(im->nx, im->ny), m = 0;
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return sf_fail(SF_ERR_NOMEM, "median: malloc of %zu floats failed", n);
    s->vmin = s->vmed = s->vmax = NAN;
    for (size_t i = 0; i < n; i++) {
        float x = im->data[i];
        if (isnan(x))
            continue;
        v[m++] = x;
        if (m == 1 || x < s->vmin)
            s->vmin = x;
        if (m == 1 || x > s->vmax)
            s->vmax = x;
    }
    if (m > 0) {
        s->vmed = sf_median_f32(v, m);
    }
    free(v);
    return SF_OK;
}

/* Centre pixel's world coordinates and pixel scale from the header's WCS,
 * restricted to the first two axes (wcssub), so a spectral axis WCSLIB cannot
 * set up (FELO-HEL, lowercase "freq") does not hide the celestial one. */
static void sf_fits_wcs(const sf_fits_info *in, int nx, int ny, sf_fits_summary *s);

int sf_fits_celestial(const sf_fits_info *in, int nx, int ny, double *lon, double *lat,
                      double *pix_arcsec)
{
    sf_fits_summary t;
    sf_fits_wcs(in, nx, ny, &t);
    if (!t.have_wcs)
        return 0;
    *lon = t.lon;
    *lat = t.lat;
    *pix_arcsec = t.pix_arcsec;
    return 1;
}

void sf_run_opts_beam(sf_run_opts *o, const sf_beam_pixels *b)
{
    o->beam_pix = b->bmaj_pix;
    o->beam_min_pix = b->bmin_pix;
    o->beam_pa_deg = b->bpa_deg;
    o->pix_arcsec = b->pix_arcsec;
}

void sf_fits_beam_pixels(const sf_fits_info *in, int nx, int ny, sf_beam_pixels *b)
{
    double lon, lat, pix;
    memset(b, 0, sizeof *b);
    if (!sf_fits_celestial(in, nx, ny, &lon, &lat, &pix) || !(pix > 0))
        return;
    b->pix_arcsec = pix;
    if (!in->has_beam || !(in->bmaj > 0))
        return;
    b->bmaj_pix = in->bmaj * 3600.0 / pix;
    b->bmin_pix = in->bmin > 0 ? b->bmaj_pix * in->bmin / in->bmaj : 0;
    b->bpa_deg = in->bpa;
}

static void sf_fits_wcs(const sf_fits_info *in, int nx, int ny, sf_fits_summary *s)
{
    sf_wcs *w = sf_wcs_open(in, nx, ny);
    double cx = 0.5 * (nx - 1), cy = 0.5 * (ny - 1);
    s->have_wcs = 0;
    if (!w)
        return;
    if (sf_wcs_pix2world(w, cx, cy, &s->lon, &s->lat) == 0) {
        s->pix_arcsec = sf_wcs_pixel_arcsec(w, cx, cy);
        s->have_wcs = isfinite(s->pix_arcsec);
    }
    sf_wcs_close(w);
}

static void sf_fits_print_json(FILE *out, const sf_fits_info *in, const sf_image *im,
                               const sf_fits_summary *s)
{
    fputs("{\"file\":", out);
    sf_json_str(out, in->path);
    fprintf(out, ",\"hdu\":%d,\"nx\":%d,\"ny\":%d,\"naxes\":[", in->hdu, im->nx, im->ny);
    for (int k = 0; k < in->naxis; k++)
        fprintf(out, "%s%ld", k ? "," : "", in->naxes[k]);
    fprintf(out, "],\"nplanes\":%d,\"plane\":%d,\"bitpix\":%d,\"bscale\":", in->nplanes,
            in->plane + 1, in->bitpix); /* plane: 1-based, as --plane */
    sf_json_num(out, in->bscale, "%.15g");
    fputs(",\"bzero\":", out);
    sf_json_num(out, in->bzero, "%.15g");
    if (in->has_blank)
        fprintf(out, ",\"blank\":%lld", in->blank);
    else
        fputs(",\"blank\":null", out);
    fputs(",\"bunit\":", out);
    sf_json_str(out, in->bunit);
    if (in->has_beam) {
        fputs(",\"beam\":{\"bmaj_arcsec\":", out);
        sf_json_num(out, in->bmaj * 3600.0, "%.6g");
        fputs(",\"bmin_arcsec\":", out);
        sf_json_num(out, in->bmin * 3600.0, "%.6g");
        fputs(",\"bpa_deg\":", out);
        sf_json_num(out, in->bpa, "%.6g");
        fputs(",\"source\":", out);
        sf_json_str(out, in->beam_source);
        fputc('}', out);
    } else {
        fputs(",\"beam\":null", out);
    }
    fputs(",\"ctype\":[", out);
    for (int k = 0; k < in->naxis; k++) {
        if (k)
            fputc(',', out);
        sf_json_str(out, in->ctype[k]);
    }
    fputc(']', out);
    if (s->have_wcs) {
        fprintf(out, ",\"wcs_center\":[%.10g,%.10g],\"pixel_arcsec\":", s->lon, s->lat);
        sf_json_num(out, s->pix_arcsec, "%.6g");
    } else {
        fputs(",\"wcs_center\":null,\"pixel_arcsec\":null", out);
    }
    fprintf(out, ",\"nnan\":%lld,\"min\":", in->nnan);
    sf_json_num(out, s->vmin, "%.9g");
    fputs(",\"median\":", out);
    sf_json_num(out, s->vmed, "%.9g");
    fputs(",\"max\":", out);
    sf_json_num(out, s->vmax, "%.9g");
    fputs("}\n", out);
}

static void sf_fits_print_text(FILE *out, const sf_fits_info *in, const sf_image *im,
                               const sf_fits_summary *s)
{
    size_t n = sf_npix(im->nx, im->ny);
    fprintf(out, "file: %s\n", in->path);
    fprintf(out, "hdu: %d%s\n", in->hdu, in->compressed ? " (tile-compressed)" : "");
    fprintf(out, "size: %d x %d\n", im->nx, im->ny);
    fprintf(out, "naxes: ");
    for (int k = 0; k < in->naxis; k++)
        fprintf(out, "%s%ld", k ? " x " : "", in->naxes[k]);
    fprintf(out, " (NAXIS=%d)\n", in->naxis);
    fprintf(out, "planes: %d (showing plane %d)\n", in->nplanes, in->plane + 1); /* 1-based, as --plane */
    fprintf(out, "bitpix: %d\n", in->bitpix);
    fprintf(out, "bscale: %.15g\nbzero: %.15g\n", in->bscale, in->bzero);
    if (in->has_blank)
        fprintf(out, "blank: %lld\n", in->blank);
    else
        fprintf(out, "blank: none\n");
    fprintf(out, "bunit: %s\n", in->bunit[0] ? in->bunit : "(none)");
    if (in->has_beam)
        fprintf(out, "beam: %.4g x %.4g arcsec, PA %.4g deg (from %s)\n", in->bmaj * 3600.0,
                in->bmin * 3600.0, in->bpa, in->beam_source);
    else
        fprintf(out, "beam: none\n");
    fprintf(out, "ctype: ");
    for (int k = 0; k < in->naxis; k++)
        fprintf(out, "%s%s", k ? ", " : "", in->ctype[k][0] ? in->ctype[k] : "(none)");
    fputc('\n', out);
    if (s->have_wcs) {
        fprintf(out, "wcs_center: %.8f %.8f deg\n", s->lon, s->lat);
        fprintf(out, "pixel_scale: %.6g arcsec\n", s->pix_arcsec);
    } else {
        fprintf(out, "wcs_center: none (no celestial WCS)\n");
    }
    if (in->nbadcards > 0)
        fprintf(out, "bad_cards: %d (unparseable header cards, left out of the WCS)\n",
                in->nbadcards);
    fprintf(out, "nan: %lld of %zu pixels (%.2f%%)\n", in->nnan, n,
            n ? 100.0 * (double)in->nnan / (double)n : 0.0);
    if (isnan(s->vmed)) {
        fprintf(out, "min: none\nmedian: none\nmax: none\n");
    } else {
        fprintf(out, "min: %.9g\nmedian: %.9g\nmax: %.9g\n", s->vmin, s->vmed, s->vmax);
    }
}

sf_status sf_fits_describe(const char *path, int plane, FILE *out, int json)
{
    sf_image im = {0};
    sf_fits_info in;
    sf_fits_summary s;
    sf_status st;

    memset(&in, 0, sizeof in);
    memset(&s, 0, sizeof s);
    if (!out)
        out = stdout;
    st = sf_fits_read(path, plane, NULL, &im, &in);
    if (st)
        goto fail;
    st = sf_fits_stats(&im, &s);
    if (st)
        goto fail;
    sf_fits_wcs(&in, im.nx, im.ny, &s);
    if (json)
        sf_fits_print_json(out, &in, &im, &s);
    else
        sf_fits_print_text(out, &in, &im, &s);
fail:
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
    return st;
}
