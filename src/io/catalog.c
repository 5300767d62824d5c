/* Catalogue writers (CSV, FITS binary table, VOTable 1.4, ds9 regions) over
 * one column table, and the atomic-output helpers every writer uses. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <fitsio.h>
#include "skyfind/catalog.h"
#include "catalog_columns.h"

void sf_catalog_meta_init(sf_catalog_meta *m, const char *input, const char *pipeline,
                          const char *backend, const sf_fits_info *info, const sf_run_result *r,
                          const sf_wcs *w)
{
    sf_beam_pixels b;
    sf_fits_beam_pixels(info, r->nx, r->ny, &b);
    memset(m, 0, sizeof *m);
    m->input = input;
    m->pipeline = pipeline;
    m->backend = backend;
    m->bunit = info->bunit;
    m->have_bkg = r->have_bkg;
    m->bkg = r->bkg;
    m->wcs = w;
    m->box = r->box;
    m->bmaj_pix = b.bmaj_pix;
    m->bmin_pix = b.bmin_pix;
}

sf_status sf_atomic_open(const char *path, char *tmp, size_t tmpn, void **file)
{
    FILE *f;
    if (sf_tmp_name(path, tmp, tmpn))
        return sf_fail(SF_ERR_IO, "%s: the name is too long", path);
    f = fopen(tmp, "w");
    *file = f;
    if (!f)
        return sf_fail(SF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    return SF_OK;
}

sf_status sf_atomic_commit(void *file, const char *tmp, const char *path)
{
    FILE *f = file;
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        int e = errno;
        remove(tmp);
        return sf_fail(SF_ERR_IO, "%s: write failed: %s", path, strerror(e ? e : EIO));
    }
    return sf_atomic_rename(tmp, path);
}

sf_status sf_atomic_rename(const char *tmp, const char *path)
{
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return sf_fail(SF_ERR_IO, "%s: cannot rename the finished %s into place: %s", path, tmp,
                       strerror(e));
    }
    return SF_OK;
}

void sf_atomic_abort(void *file, const char *tmp)
{
    if (file)
        fclose(file);
    remove(tmp);
}

/* One value as text; NaN as nan_text. */
static void sf_cat_put(FILE *f, const sf_cat_col *c, const sf_cat_row *r, const char *nan_text)
{
    double v = c->get(r);
    if (c->type == SF_COL_INT)
        fprintf(f, c->fmt, (int)v);
    else if (c->type == SF_COL_LONG)
        fprintf(f, c->fmt, (long long)v);
    else if (isfinite(v))
        fprintf(f, c->fmt, v);
    else
        fputs(nan_text, f);
}

static const char *sf_cat_units(const sf_catalog_meta *m)
{
    return m->bunit && *m->bunit ? m->bunit : "image units";
}

/* ---- CSV --------------------------------------------------------------- */

/* A column's unit for the CSV units line: unitless columns as "none", flux
 * columns of an image without BUNIT as "image units". */
static const char *sf_cat_unit_label(const sf_cat_col *c)
{
    return c->unit[0] ? c->unit : c->bunit ? "image units" : "none";
}

/* "# units: pix: x, y, ...; deg: ..." : the columns grouped by unit, in
 * column order. */
static void sf_cat_units_line(FILE *f, const sf_cat_col *c, int nc)
{
    int done[SF_CAT_MAXCOL] = {0};
    fputs("# units:", f);
    for (int k = 0; k < nc; k++) {
        const char *u = sf_cat_unit_label(&c[k]);
        if (done[k])
            continue;
        fprintf(f, "%s %s:", k ? ";" : "", u);
        for (int j = k, sep = 0; j < nc; j++)
            if (!done[j] && !strcmp(sf_cat_unit_label(&c[j]), u)) {
                fprintf(f, "%s %s", sep++ ? "," : "", c[j].name);
                done[j] = 1;
            }
    }
    fputc('\n', f);
}

static sf_status sf_cat_csv(FILE *f, const sf_source *src, int n, const sf_catalog_meta *m)
{
    sf_cat_col c[SF_CAT_MAXCOL];
    int nc = sf_cat_columns(m, c);
    const char *u = sf_cat_units(m);
    double area = sf_catalog_beam_area(m);
    fprintf(f, "# skyfind %s catalogue of %s (pipeline %s, backend %s): %d sources\n",
            SKYFIND_VERSION, m->input, m->pipeline, m->backend, n);
    fprintf(f, "# x,y (flux-weighted centroid), peak_x,peak_y and the box xmin..ymax are 1-based "
               "FITS pixel coordinates (SExtractor/ds9 convention: the first pixel's centre is "
               "1,1)\n");
    sf_cat_units_line(f, c, nc);
    if (m->wcs)
        fprintf(f, "# world coordinates: %s, %s (frame %s); a_arcsec, b_arcsec, pa_deg (east of "
                   "north) from the moments through the WCS at the centroid\n",
                sf_wcs_lon_name(m->wcs), sf_wcs_lat_name(m->wcs),
                *sf_wcs_frame(m->wcs) ? sf_wcs_frame(m->wcs) : sf_wcs_kind(m->wcs));
    if (area > 0)
        fprintf(f, "# flux_jy = flux_sum / %.9g (beam area in pixels: pi/(4 ln 2) * %.6g * %.6g "
                   "pixel FWHMs)\n", area, m->bmaj_pix, m->bmin_pix);
    else
        fprintf(f, "# flux_jy, flux_jy_err: nan (%s)\n",
                m->bmaj_pix > 0 ? "BUNIT is not Jy/beam" : "no restoring beam known");
    fputs("# errors: flux_err = sqrt(sum rms_i^2), x_err = sqrt(sum rms_i^2 (x_i-x)^2)/flux_sum "
          "(y_err alike): lower bounds when the noise is correlated (radio beams)\n", f);
    fputs("# flags: 1 island touches the border, 2 NaN/blank pixel in or next to it, 4 peak on the "
          "border (truncated), 8 merged (several seed maxima), 16 deblended (one of several objects cut from one island)\n", f);
    fputs("# ucd:", f);
    for (int k = 0; k < nc; k++)
        fprintf(f, " %s=%s", c[k].name, c[k].ucd);
    fputc('\n', f);
    if (m->have_bkg && m->box)
        fprintf(f, "# background: local maps, box %d px, median level %.9g, median rms %.9g %s\n", m->box,
                m->bkg.median, m->bkg.sigma, u);
    else if (m->have_bkg)
        fprintf(f, "# background: clipped median %.9g, sigma %.9g %s (%d iterations%s)\n",
                m->bkg.median, m->bkg.sigma, u, m->bkg.niter,
                m->bkg.converged ? ", converged" : ", NOT converged");
    for (int k = 0; k < nc; k++)
        fprintf(f, "%s%s", c[k].name, k + 1 < nc ? "," : "\n");
    for (int i = 0; i < n; i++) {
        sf_cat_row r = sf_cat_row_of(&src[i], m);
        for (int k = 0; k < nc; k++) {
            sf_cat_put(f, &c[k], &r, "nan");
            fputc(k + 1 < nc ? ',' : '\n', f);
        }
    }
    return SF_OK;
}

/* ---- VOTable 1.4 ------------------------------------------------------- */

static void sf_xml(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

static sf_status sf_cat_votable(FILE *f, const sf_source *src, int n,
                                const sf_catalog_meta *m)
{
    static const char *dt[] = {"int", "long", "double"};
    sf_cat_col c[SF_CAT_MAXCOL];
    int nc = sf_cat_columns(m, c);
    const char *sys = NULL;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<VOTABLE version=\"1.4\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"\n"
          "  xmlns=\"http://www.ivoa.net/xml/VOTable/v1.3\"\n"
          "  xsi:schemaLocation=\"http://www.ivoa.net/xml/VOTable/v1.3 "
          "http://www.ivoa.net/xml/VOTable/v1.3\">\n", f);
    fputs("<RESOURCE type=\"results\">\n<DESCRIPTION>skyfind " SKYFIND_VERSION
          " catalogue of ", f);
    sf_xml(f, m->input);
    fprintf(f, ": %d sources. x, y, peak_x, peak_y are 1-based FITS pixel coordinates "
               "(the first pixel's centre is 1,1).</DESCRIPTION>\n", n);
    fputs("<INFO name=\"pipeline\" value=\"", f);
    sf_xml(f, m->pipeline);
    fputs("\"/>\n<INFO name=\"backend\" value=\"", f);
    sf_xml(f, m->backend);
    fputs("\"/>\n", f);
    if (m->have_bkg)
        fprintf(f, "<INFO name=\"background\" value=\"median %.9g sigma %.9g\"/>\n",
                m->bkg.median, m->bkg.sigma);
    if (m->wcs) {
        const char *fr = sf_wcs_frame(m->wcs);
        sys = !strcmp(fr, "icrs") ? "ICRS" : !strcmp(fr, "fk5") ? "eq_FK5"
            : !strcmp(fr, "fk4") ? "eq_FK4" : !strcmp(fr, "galactic") ? "galactic"
            : !strcmp(fr, "ecliptic") ? "ecl_FK5" : NULL;
        if (sys)
            fprintf(f, "<COOSYS ID=\"sys\" system=\"%s\"/>\n", sys);
    }
    fprintf(f, "<TABLE name=\"CATALOG\" nrows=\"%d\">\n", n);
    for (int k = 0; k < nc; k++) {
        fprintf(f, "<FIELD name=\"%s\" ID=\"%s\" datatype=\"%s\" ucd=\"%s\"", c[k].name,
                c[k].name, dt[c[k].type], c[k].ucd);
        if (c[k].unit[0]) {
            fputs(" unit=\"", f);
            sf_xml(f, c[k].unit);
            fputc('"', f);
        }
        if (sys && k >= SF_CAT_NBASE && k < SF_CAT_NBASE + 4)
            fputs(" ref=\"sys\"", f);
        fprintf(f, "><DESCRIPTION>%s</DESCRIPTION></FIELD>\n", c[k].desc);
    }
    fputs("<DATA><TABLEDATA>\n", f);
    for (int i = 0; i < n; i++) {
        sf_cat_row r = sf_cat_row_of(&src[i], m);
        fputs("<TR>", f);
        for (int k = 0; k < nc; k++) {
            fputs("<TD>", f);
            sf_cat_put(f, &c[k], &r, "NaN");
            fputs("</TD>", f);
        }
        fputs("</TR>\n", f);
    }
    fputs("</TABLEDATA></DATA>\n</TABLE>\n</RESOURCE>\n</VOTABLE>\n", f);
    return SF_OK;
}

/* ---- ds9 regions ------------------------------------------------------- */

/* One ellipse per source with a shape: semi-axes sqrt(2 ln 2) a and
 * sqrt(2 ln 2) b (the Gaussian half widths at half maximum). On the sky
 * (a WCS with a frame ds9 knows): centre in degrees, radii in arcsec from
 * a_arcsec, b_arcsec, angle pa_deg + 90 (ds9 measures sky angles from the
 * longitude axis, counter-clockwise as displayed north up, east left);
 * otherwise in 1-based image pixels with angle theta (from +x). */
static sf_status sf_cat_region(FILE *f, const sf_source *src, int n, const sf_catalog_meta *m)
{
    const sf_wcs *w = m->wcs && *sf_wcs_frame(m->wcs) ? m->wcs : NULL;
    sf_catalog_meta mw = *m;
    mw.wcs = w;
    fputs("# Region file format: DS9 version 4.1\n", f);
    fprintf(f, "# skyfind %s catalogue of %s: %d sources, ellipses of semi-axes "
               "sqrt(2 ln 2) (a, b) (half widths at half maximum) at the flux-weighted "
               "centroids\n", SKYFIND_VERSION, m->input, n);
    fputs("global color=green dashlist=8 3 width=1 font=\"helvetica 10 normal roman\" "
          "select=1 highlite=1 dash=0 fixed=0 edit=1 move=1 delete=1 include=1 source=1\n", f);
    fprintf(f, "%s\n", w ? sf_wcs_frame(w) : "image");
    for (int i = 0; i < n; i++) {
        const sf_source *s = &src[i];
        sf_cat_row r;
        double ang;
        if (!isfinite(s->x) || !isfinite(s->y) || !isfinite(s->a) || !isfinite(s->b) ||
            !isfinite(s->theta)) {
            fprintf(f, "# source %d has no centroid or shape\n", s->id);
            continue;
        }
        if (!w) {
            fprintf(f, "ellipse(%.8f,%.8f,%.6f,%.6f,%.6f) # text={%d}\n", s->x + 1.0, s->y + 1.0,
                    SF_HWHM * s->a, SF_HWHM * s->b, s->theta, s->id);
            continue;
        }
        r = sf_cat_row_of(s, &mw);
        if (!isfinite(r.lon) || !isfinite(r.lat) || !isfinite(r.a_as) || !isfinite(r.b_as) ||
            !isfinite(r.pa) || !(r.b_as > 0)) {
            fprintf(f, "# source %d has no world coordinates or sky shape\n", s->id);
            continue;
        }
        ang = fmod(r.pa + 90.0, 360.0);
        fprintf(f, "ellipse(%.9f,%.9f,%.6f\",%.6f\",%.6f) # text={%d}\n", r.lon, r.lat,
                SF_HWHM * r.a_as, SF_HWHM * r.b_as, ang, s->id);
    }
    return SF_OK;
}

/* ---- FITS binary table ------------------------------------------------- */

static sf_status sf_fits_cat_fail(const char *path, int status, const char *what)
{
    char msg[FLEN_ERRMSG] = "";
    fits_get_errstatus(status, msg);
    return sf_fail(SF_ERR_FITS, "%s: %s: CFITSIO status %d (%s)", path, what, status, msg);
}

static sf_status sf_cat_fits(const char *path, const sf_source *src, int n,
                             const sf_catalog_meta *m)
{
    static const char *tf[] = {"J", "K", "D"};
    sf_cat_col c[SF_CAT_MAXCOL];
    char *ttype[SF_CAT_MAXCOL], *tform[SF_CAT_MAXCOL], *tunit[SF_CAT_MAXCOL];
    char tmp[4096], cname[4100], key[16], *tmpstr;
    fitsfile *fp = NULL;
    double *dv = NULL;
    long long *lv = NULL;
    sf_cat_row *rows = NULL;
    int status = 0, nc = sf_cat_columns(m, c);
    double area = sf_catalog_beam_area(m);
    sf_status st = SF_OK;

    if (sf_tmp_name(path, tmp, sizeof tmp))
        return sf_fail(SF_ERR_IO, "%s: the name is too long", path);
    snprintf(cname, sizeof cname, "!%s", tmp);
    dv = malloc((n > 0 ? n : 1) * sizeof *dv);
    lv = malloc((n > 0 ? n : 1) * sizeof *lv);
    rows = malloc((n > 0 ? n : 1) * sizeof *rows);
    if (!dv || !lv || !rows) {
        st = sf_fail(SF_ERR_NOMEM, "%s: malloc of %d rows failed", path, n);
        goto fail;
    }
    for (int i = 0; i < n; i++)
        rows[i] = sf_cat_row_of(&src[i], m);
    for (int k = 0; k < nc; k++) {
        ttype[k] = c[k].name;
        tform[k] = (char *)tf[c[k].type];
        tunit[k] = c[k].unit;
    }
    if (fits_create_file(&fp, cname, &status)) {
        st = sf_fits_cat_fail(path, status, "cannot create the temporary file");
        fp = NULL;
        goto fail;
    }
    if (fits_create_tbl(fp, BINARY_TBL, n, nc, ttype, tform, tunit, "CATALOG", &status))
        goto fits_fail;
    for (int k = 0; k < nc; k++) {
        snprintf(key, sizeof key, "TUCD%d", k + 1);
        fits_write_key(fp, TSTRING, key, c[k].ucd, "UCD of the column", &status);
        snprintf(key, sizeof key, "TCOMM%d", k + 1);
        fits_write_key(fp, TSTRING, key, (char *)c[k].desc, NULL, &status);
    }
    fits_write_key(fp, TSTRING, "ORIGIN", "skyfind " SKYFIND_VERSION, "software", &status);
    fits_write_key_longwarn(fp, &status);
    tmpstr = (char *)(m->input ? m->input : "");
    fits_write_key_longstr(fp, "INFILE", tmpstr, "image the sources were found in", &status);
    tmpstr = (char *)(m->pipeline ? m->pipeline : "");
    fits_write_key_longstr(fp, "PIPELINE", tmpstr, "pipeline", &status);
    tmpstr = (char *)(m->backend ? m->backend : "");
    fits_write_key(fp, TSTRING, "BACKEND", tmpstr, "cpu or gpu", &status);
    fits_write_key(fp, TINT, "NSOURCES", &n, "number of sources", &status);
    if (m->have_bkg) {
        double v = m->bkg.median, sg = m->bkg.sigma;
        fits_write_key(fp, TDOUBLE, "BKGMED", &v, "clipped median of the background", &status);
        fits_write_key(fp, TDOUBLE, "BKGSIG", &sg, "clipped sigma of the background", &status);
    }
    if (area > 0)
        fits_write_key(fp, TDOUBLE, "BEAMAREA", &area, "[pix] beam area: flux_jy = flux_sum / BEAMAREA",
                       &status);
    fits_write_comment(fp, "flux_err = sqrt(sum rms_i^2); x_err = sqrt(sum rms_i^2 (x_i - x)^2) "
                           "/ flux_sum, y_err alike: lower bounds for correlated noise.", &status);
    fits_write_comment(fp, "flags: 1 edge, 2 NaN/blank in or next to the island, 4 peak on the "
                           "border (truncated), 8 merged (several seed maxima), 16 deblended.", &status);
    fits_write_comment(fp, "x, y, peak_x, peak_y and the box xmin..ymax are 1-based FITS pixel "
                           "coordinates (SExtractor/ds9 convention: the first pixel's centre is "
                           "1,1).",
                       &status);
    if (m->wcs)
        fits_write_comment(fp, "World coordinates in degrees from the image WCS (WCSLIB).",
                           &status);
    if (status)
        goto fits_fail;
    for (int k = 0; k < nc && n > 0; k++) {
        for (int i = 0; i < n; i++) {
            dv[i] = c[k].get(&rows[i]);
            lv[i] = (long long)dv[i];
        }
        if (c[k].type == SF_COL_REAL)
            fits_write_col(fp, TDOUBLE, k + 1, 1, 1, n, dv, &status);
        else
            fits_write_col(fp, TLONGLONG, k + 1, 1, 1, n, lv, &status);
        if (status)
            goto fits_fail;
    }
    if (fits_close_file(fp, &status)) {
        fp = NULL;
        goto fits_fail;
    }
    fp = NULL;
    if ((st = sf_atomic_rename(tmp, path)) != SF_OK)
        goto fail;
    free(dv);
    free(lv);
    free(rows);
    return SF_OK;
fits_fail:
    st = sf_fits_cat_fail(path, status, "writing the catalogue table");
fail:
    if (fp) {
        status = 0;
        fits_close_file(fp, &status);
    }
    remove(tmp);
    free(dv);
    free(lv);
    free(rows);
    return st;
}

/* ---- entry points ------------------------------------------------------ */

sf_status sf_catalog_write(const char *path, sf_catalog_format fmt, const sf_source *src,
                           int n, const sf_catalog_meta *m)
{
    char tmp[4096];
    void *fv = NULL;
    sf_status st;
    if (n < 0 || (n > 0 && !src) || !m)
        return sf_fail(SF_ERR_PARAM, "%s: bad catalogue arguments (n = %d)", path, n);
    if (fmt == SF_CAT_FITS)
        return sf_cat_fits(path, src, n, m);
    if (fmt != SF_CAT_CSV && fmt != SF_CAT_VOTABLE && fmt != SF_CAT_REGION)
        return sf_fail(SF_ERR_PARAM, "%s: unknown catalogue format %d", path, (int)fmt);
    if ((st = sf_atomic_open(path, tmp, sizeof tmp, &fv)))
        return st;
    if (fmt == SF_CAT_CSV)
        st = sf_cat_csv(fv, src, n, m);
    else if (fmt == SF_CAT_VOTABLE)
        st = sf_cat_votable(fv, src, n, m);
    else
        st = sf_cat_region(fv, src, n, m);
    if (st) {
        sf_atomic_abort(fv, tmp);
        return st;
    }
    return sf_atomic_commit(fv, tmp, path);
}

sf_status sf_catalog_write_csv(const char *path, const sf_source *src, int n,
                               const sf_catalog_meta *m)
{
    return sf_catalog_write(path, SF_CAT_CSV, src, n, m);
}

int sf_catalog_format_parse(const char *name, sf_catalog_format *fmt)
{
    static const struct {
        const char *name;
        sf_catalog_format fmt;
    } t[] = {{"csv", SF_CAT_CSV},         {"fits", SF_CAT_FITS},   {"votable", SF_CAT_VOTABLE},
             {"vot", SF_CAT_VOTABLE},     {"xml", SF_CAT_VOTABLE}, {"reg", SF_CAT_REGION},
             {"region", SF_CAT_REGION},   {"ds9", SF_CAT_REGION}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcasecmp(name, t[i].name)) {
            *fmt = t[i].fmt;
            return 0;
        }
    sf_fail(SF_ERR_PARAM, "unknown catalogue format '%s' (csv, fits, votable, reg)", name);
    return -1;
}

const char *sf_catalog_format_suffix(sf_catalog_format fmt)
{
    switch (fmt) {
    case SF_CAT_FITS: return ".cat.fits";
    case SF_CAT_VOTABLE: return ".cat.vot";
    case SF_CAT_REGION: return ".reg";
    default: return ".cat.csv";
    }
}
