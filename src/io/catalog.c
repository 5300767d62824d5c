/* Catalogue writers (CSV, FITS binary table, VOTable 1.4, ds9 regions) of
 * a table given by its columns and a row source (src/io/catalog_columns.c:
 * the island table or the component table), and the atomic-output helpers
 * every writer uses. */
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
#include "numfmt.h"
#ifdef _OPENMP
#include <omp.h>
#endif

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
    m->pix_arcsec = b.pix_arcsec;
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

/* One value as text into buf (NaN as nan_text): the characters written
 * (without the NUL), or what they would need when cap is too small
 * (snprintf's rule). */
static int sf_cat_put_s(char *buf, size_t cap, const sf_cat_col *c, const sf_cat_any *r,
                        const char *nan_text)
{
    double v = c->get(r);
    int w;
    /* "%d", "%lld" and "%.Pg" by numfmt.c (the same bytes, several times
     * faster: the column says which, sf_cat_set); snprintf for any other
     * format, or where numfmt declines */
    if (c->type == SF_COL_INT) {
        if (c->plain_int && (w = sf_fmt_int(buf, cap, (int)v)) >= 0)
            return w;
        return snprintf(buf, cap, c->fmt, (int)v);
    }
    if (c->type == SF_COL_LONG) {
        if (c->plain_int && (w = sf_fmt_int(buf, cap, (long long)v)) >= 0)
            return w;
        return snprintf(buf, cap, c->fmt, (long long)v);
    }
    if (isfinite(v)) {
        if (c->gprec && (w = sf_fmt_g(buf, cap, v, c->gprec)) >= 0)
            return w;
        return snprintf(buf, cap, c->fmt, v);
    }
    return snprintf(buf, cap, "%s", nan_text);
}

/* The same onto f. */
static void sf_cat_put(FILE *f, const sf_cat_col *c, const sf_cat_any *r, const char *nan_text)
{
    char b[128];
    int w = sf_cat_put_s(b, sizeof b, c, r, nan_text);
    if (w >= 0 && (size_t)w < sizeof b)
        fputs(b, f);
    else if (w >= 0) { /* a format wider than any column's (none is) */
        char *big = malloc((size_t)w + 1);
        if (big && sf_cat_put_s(big, (size_t)w + 1, c, r, nan_text) == w)
            fputs(big, f);
        free(big);
    }
}

/* The CSV data rows [i0, i1) of t (rows already derived in r) as text into
 * a growing buffer *b (*cap bytes); returns its length, -1 without memory. */
static long sf_cat_csv_rows(const sf_cat_table *t, const sf_cat_any *r, int i0, int i1, char **b,
                            size_t *cap)
{
    size_t len = 0;
    for (int i = i0; i < i1; i++)
        for (int k = 0; k < t->ncol; k++) {
            int w;
            while ((w = sf_cat_put_s(*b + len, *cap - len, &t->col[k], &r[i], "nan")) < 0 ||
                   len + (size_t)w + 2 > *cap) {
                char *nb = w < 0 ? NULL : realloc(*b, 2 * *cap + (size_t)w + 2);
                if (!nb)
                    return -1;
                *b = nb;
                *cap = 2 * *cap + (size_t)w + 2;
            }
            len += (size_t)w;
            (*b)[len++] = k + 1 < t->ncol ? ',' : '\n';
        }
    return (long)len;
}

/* The CSV data rows of t: derived (world coordinates, sky shapes, Jy) and
 * formatted by the threads in chunks of rows, and written in order, the
 * same bytes as one fprintf after another. Each thread derives with its
 * own copy of the WCS (sf_wcs_dup: WCSLIB writes into the one it converts
 * with). printf's exact double conversion costs about a microsecond a
 * value: a 1849-row catalogue at 8192^2 took 15 ms to write, a tenth of
 * lesson.pipe on 16 cores; with the rows derived by one thread, 1752 rows
 * still took 2 ms before the formatting began. */
#define SF_CSV_CHUNK 64
static sf_status sf_cat_csv_data(FILE *f, const sf_cat_table *t)
{
    const int n = t->n, nch = (n + SF_CSV_CHUNK - 1) / SF_CSV_CHUNK;
    sf_cat_any *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
    char **txt = calloc((size_t)(nch > 0 ? nch : 1), sizeof *txt);
    long *len = calloc((size_t)(nch > 0 ? nch : 1), sizeof *len);
    int bad = 0;
    if (!r || !txt || !len) {
        free(r);
        free(txt);
        free(len);
        return sf_fail(SF_ERR_NOMEM, "catalogue: %d rows", n);
    }
#pragma omp parallel reduction(| : bad) if (nch > 1)
    {
        sf_catalog_meta mw = *t->m; /* this thread's: its own WCS when the team has two or more */
        sf_wcs *own = NULL;
#ifdef _OPENMP
        if (t->m->wcs && omp_get_num_threads() > 1 && !(mw.wcs = own = sf_wcs_dup(t->m->wcs)))
            bad = 2;
#endif
#pragma omp for schedule(dynamic, 1)
        for (int c = 0; c < nch; c++) {
            const int i0 = c * SF_CSV_CHUNK, i1 = i0 + SF_CSV_CHUNK < n ? i0 + SF_CSV_CHUNK : n;
            size_t cap = 256 * (size_t)t->ncol;
            if (bad)
                continue;
            for (int i = i0; i < i1; i++)
                t->row(t->items, i, &mw, &r[i]);
            txt[c] = malloc(cap);
            len[c] = txt[c] ? sf_cat_csv_rows(t, r, i0, i1, &txt[c], &cap) : -1;
            bad |= len[c] < 0;
        }
        sf_wcs_close(own);
    }
    for (int c = 0; c < nch && !bad; c++)
        fwrite(txt[c], 1, (size_t)len[c], f);
    for (int c = 0; c < nch; c++)
        free(txt[c]);
    free(txt);
    free(len);
    free(r);
    return bad ? sf_fail(SF_ERR_NOMEM, "catalogue: text of %d rows", n) : SF_OK;
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

static sf_status sf_cat_csv(FILE *f, const sf_cat_table *t)
{
    const sf_catalog_meta *m = t->m;
    const sf_cat_text *tx = t->text;
    const sf_cat_col *c = t->col;
    int nc = t->ncol;
    const char *u = sf_cat_units(m);
    double area = sf_catalog_beam_area(m);
    fprintf(f, "# skyfind %s %s of %s (pipeline %s, backend %s): %d %s\n", SKYFIND_VERSION,
            tx->title, m->input, m->pipeline, m->backend, t->n, tx->noun);
    fprintf(f, "# %s\n", tx->csv_pixel);
    sf_cat_units_line(f, c, nc);
    if (m->wcs)
        fprintf(f, "# world coordinates: %s, %s (frame %s); %s\n", sf_wcs_lon_name(m->wcs),
                sf_wcs_lat_name(m->wcs),
                *sf_wcs_frame(m->wcs) ? sf_wcs_frame(m->wcs) : sf_wcs_kind(m->wcs), tx->csv_sky);
    if (area > 0 && tx->local_beam && m->wcs && m->pix_arcsec > 0)
        fprintf(f, "# flux_jy = %s / the beam area in the pixels at the component: %.9g (pi/(4 ln "
                   "2) * %.6g * %.6g pixel FWHMs at the image centre) times the centre's pixel "
                   "solid angle over the component's\n", tx->fluxcol, area, m->bmaj_pix, m->bmin_pix);
    else if (area > 0)
        fprintf(f, "# flux_jy = %s / %.9g (beam area in pixels: pi/(4 ln 2) * %.6g * %.6g "
                   "pixel FWHMs)\n", tx->fluxcol, area, m->bmaj_pix, m->bmin_pix);
    else
        fprintf(f, "# flux_jy, flux_jy_err: nan (%s)\n",
                m->bmaj_pix > 0 ? "BUNIT is not Jy/beam" : "no restoring beam known");
    for (const char *const *l = tx->csv_notes; *l; l++)
        fprintf(f, "# %s\n", *l);
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
    return sf_cat_csv_data(f, t);
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

static sf_status sf_cat_votable(FILE *f, const sf_cat_table *t)
{
    static const char *dt[] = {"int", "long", "double"};
    const sf_catalog_meta *m = t->m;
    const sf_cat_col *c = t->col;
    int nc = t->ncol;
    const char *sys = NULL;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<VOTABLE version=\"1.4\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"\n"
          "  xmlns=\"http://www.ivoa.net/xml/VOTable/v1.3\"\n"
          "  xsi:schemaLocation=\"http://www.ivoa.net/xml/VOTable/v1.3 "
          "http://www.ivoa.net/xml/VOTable/v1.3\">\n", f);
    fprintf(f, "<RESOURCE type=\"results\">\n<DESCRIPTION>skyfind %s %s of ", SKYFIND_VERSION,
            t->text->title);
    sf_xml(f, m->input);
    fprintf(f, ": %d %s. ", t->n, t->text->noun);
    sf_xml(f, t->text->vo_desc);
    fputs("</DESCRIPTION>\n", f);
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
    fprintf(f, "<TABLE name=\"%s\" nrows=\"%d\">\n", t->text->extname, t->n);
    for (int k = 0; k < nc; k++) {
        fprintf(f, "<FIELD name=\"%s\" ID=\"%s\" datatype=\"%s\" ucd=\"%s\"", c[k].name,
                c[k].name, dt[c[k].type], c[k].ucd);
        if (c[k].unit[0]) {
            fputs(" unit=\"", f);
            sf_xml(f, c[k].unit);
            fputc('"', f);
        }
        if (sys && c[k].coord)
            fputs(" ref=\"sys\"", f);
        fputs("><DESCRIPTION>", f);
        sf_xml(f, c[k].desc);
        fputs("</DESCRIPTION></FIELD>\n", f);
    }
    fputs("<DATA><TABLEDATA>\n", f);
    for (int i = 0; i < t->n; i++) {
        sf_cat_any r;
        t->row(t->items, i, m, &r);
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

static int sf_cat_finite5(const double *v)
{
    return isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]) && isfinite(v[3]) && isfinite(v[4]);
}

/* One ellipse per row with a shape (the table's ellipse function gives it).
 * On the sky (a WCS with a frame ds9 knows): centre in degrees, radii in
 * arcsec, the angle from the longitude axis (counter-clockwise as displayed
 * north up, east left); otherwise in 1-based image pixels with the angle
 * from +x. Rows without one get a comment line. */
static sf_status sf_cat_region(FILE *f, const sf_cat_table *t)
{
    const sf_catalog_meta *m = t->m;
    const sf_wcs *w = m->wcs && *sf_wcs_frame(m->wcs) ? m->wcs : NULL;
    sf_catalog_meta mw = *m;
    mw.wcs = w;
    fputs("# Region file format: DS9 version 4.1\n", f);
    fprintf(f, "# skyfind %s %s of %s: %d %s, %s\n", SKYFIND_VERSION, t->text->title, m->input,
            t->n, t->text->noun, t->text->reg_desc);
    fputs("global color=green dashlist=8 3 width=1 font=\"helvetica 10 normal roman\" "
          "select=1 highlite=1 dash=0 fixed=0 edit=1 move=1 delete=1 include=1 source=1\n", f);
    fprintf(f, "%s\n", w ? sf_wcs_frame(w) : "image");
    for (int i = 0; i < t->n; i++) {
        sf_cat_any r;
        char label[64];
        double p[5], s[5];
        t->row(t->items, i, &mw, &r);
        t->ellipse(&r, p, s, label, sizeof label);
        if (!sf_cat_finite5(p))
            fprintf(f, "# %s %s has %s\n", t->text->item, label, t->text->reg_nopix);
        else if (!w)
            fprintf(f, "ellipse(%.8f,%.8f,%.6f,%.6f,%.6f) # text={%s}\n", p[0], p[1], p[2], p[3],
                    p[4], label);
        else if (!sf_cat_finite5(s) || !(s[3] > 0))
            fprintf(f, "# %s %s has no world coordinates or sky shape\n", t->text->item, label);
        else
            fprintf(f, "ellipse(%.9f,%.9f,%.6f\",%.6f\",%.6f) # text={%s}\n", s[0], s[1], s[2],
                    s[3], s[4], label);
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

static sf_status sf_cat_fits(const char *path, const sf_cat_table *t)
{
    static const char *tf[] = {"J", "K", "D"};
    const sf_catalog_meta *m = t->m;
    const sf_cat_text *tx = t->text;
    const sf_cat_col *c = t->col;
    char *ttype[SF_CAT_MAXCOL], *tform[SF_CAT_MAXCOL], *tunit[SF_CAT_MAXCOL];
    char tmp[4096], cname[4100], key[16], comment[96], *tmpstr;
    fitsfile *fp = NULL;
    double *dv = NULL;
    long long *lv = NULL;
    sf_cat_any *rows = NULL;
    int status = 0, n = t->n, nc = t->ncol;
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
        t->row(t->items, i, m, &rows[i]);
    for (int k = 0; k < nc; k++) {
        ttype[k] = (char *)c[k].name;
        tform[k] = (char *)tf[c[k].type];
        tunit[k] = (char *)c[k].unit;
    }
    if (fits_create_file(&fp, cname, &status)) {
        st = sf_fits_cat_fail(path, status, "cannot create the temporary file");
        fp = NULL;
        goto fail;
    }
    if (fits_create_tbl(fp, BINARY_TBL, n, nc, ttype, tform, tunit, tx->extname, &status))
        goto fits_fail;
    for (int k = 0; k < nc; k++) {
        snprintf(key, sizeof key, "TUCD%d", k + 1);
        fits_write_key(fp, TSTRING, key, (char *)c[k].ucd, "UCD of the column", &status);
        snprintf(key, sizeof key, "TCOMM%d", k + 1);
        fits_write_key(fp, TSTRING, key, (char *)c[k].desc, NULL, &status);
    }
    fits_write_key(fp, TSTRING, "ORIGIN", "skyfind " SKYFIND_VERSION, "software", &status);
    fits_write_key_longwarn(fp, &status);
    tmpstr = (char *)(m->input ? m->input : "");
    snprintf(comment, sizeof comment, "image the %s were found in", tx->noun);
    fits_write_key_longstr(fp, "INFILE", tmpstr, comment, &status);
    tmpstr = (char *)(m->pipeline ? m->pipeline : "");
    fits_write_key_longstr(fp, "PIPELINE", tmpstr, "pipeline", &status);
    tmpstr = (char *)(m->backend ? m->backend : "");
    fits_write_key(fp, TSTRING, "BACKEND", tmpstr, "cpu or gpu", &status);
    snprintf(comment, sizeof comment, "number of %s", tx->noun);
    fits_write_key(fp, TINT, (char *)tx->countkey, &n, comment, &status);
    if (m->have_bkg) {
        double v = m->bkg.median, sg = m->bkg.sigma;
        fits_write_key(fp, TDOUBLE, "BKGMED", &v, "clipped median of the background", &status);
        fits_write_key(fp, TDOUBLE, "BKGSIG", &sg, "clipped sigma of the background", &status);
    }
    if (area > 0) {
        if (tx->local_beam && m->wcs && m->pix_arcsec > 0)
            snprintf(comment, sizeof comment, "[pix] beam area at the centre (flux_jy: local)");
        else
            snprintf(comment, sizeof comment, "[pix] beam area: flux_jy = %s / BEAMAREA", tx->fluxcol);
        fits_write_key(fp, TDOUBLE, "BEAMAREA", &area, comment, &status);
    }
    for (const char *const *l = tx->fits_notes; *l; l++)
        fits_write_comment(fp, *l, &status);
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

/* Write table t to path in format fmt, atomically. */
static sf_status sf_cat_write_table(const char *path, sf_catalog_format fmt, const sf_cat_table *t)
{
    char tmp[4096];
    void *fv = NULL;
    sf_status st;
    if (fmt == SF_CAT_FITS)
        return sf_cat_fits(path, t);
    if (fmt != SF_CAT_CSV && fmt != SF_CAT_VOTABLE && fmt != SF_CAT_REGION)
        return sf_fail(SF_ERR_PARAM, "%s: unknown catalogue format %d", path, (int)fmt);
    if ((st = sf_atomic_open(path, tmp, sizeof tmp, &fv)))
        return st;
    if (fmt == SF_CAT_CSV)
        st = sf_cat_csv(fv, t);
    else if (fmt == SF_CAT_VOTABLE)
        st = sf_cat_votable(fv, t);
    else
        st = sf_cat_region(fv, t);
    if (st) {
        sf_atomic_abort(fv, tmp);
        return st;
    }
    return sf_atomic_commit(fv, tmp, path);
}

sf_status sf_catalog_write(const char *path, sf_catalog_format fmt, const sf_source *src,
                           int n, const sf_catalog_meta *m)
{
    sf_cat_table t;
    if (n < 0 || (n > 0 && !src) || !m)
        return sf_fail(SF_ERR_PARAM, "%s: bad catalogue arguments (n = %d)", path, n);
    sf_cat_table_sources(&t, src, n, m);
    return sf_cat_write_table(path, fmt, &t);
}

sf_status sf_catalog_write_components(const char *path, sf_catalog_format fmt,
                                      const sf_component *c, int n, const sf_catalog_meta *m)
{
    sf_cat_table t;
    if (n < 0 || (n > 0 && !c) || !m)
        return sf_fail(SF_ERR_PARAM, "%s: bad component catalogue arguments (n = %d)", path, n);
    sf_cat_table_comps(&t, c, n, m);
    return sf_cat_write_table(path, fmt, &t);
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

const char *sf_catalog_comp_suffix(sf_catalog_format fmt)
{
    switch (fmt) {
    case SF_CAT_FITS: return ".comp.fits";
    case SF_CAT_VOTABLE: return ".comp.vot";
    case SF_CAT_REGION: return ".comp.reg";
    default: return ".comp.csv";
    }
}
