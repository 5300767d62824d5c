/* Catalogue writers (CSV) and the atomic-output helpers every writer uses. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "skyfind/catalog.h"

sf_status sf_atomic_open(const char *path, char *tmp, size_t tmpn, void **file)
{
    FILE *f;
    snprintf(tmp, tmpn, "%s.tmp.%ld", path, (long)getpid());
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
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return sf_fail(SF_ERR_IO, "%s: cannot rename the finished file into place: %s", path,
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

static void put_num(FILE *f, double v, const char *sep)
{
    if (isfinite(v))
        fprintf(f, "%.12g%s", v, sep);
    else
        fprintf(f, "nan%s", sep);
}

sf_status sf_catalog_write_csv(const char *path, const sf_source *src, int n,
                               const sf_catalog_meta *m)
{
    char tmp[4096];
    void *fv = NULL;
    FILE *f;
    sf_status st = sf_atomic_open(path, tmp, sizeof tmp, &fv);
    const char *u = m->bunit && *m->bunit ? m->bunit : "image units";
    if (st)
        return st;
    f = fv;
    fprintf(f, "# skyfind %s catalogue of %s (pipeline %s, backend %s): %d sources\n",
            SKYFIND_VERSION, m->input, m->pipeline, m->backend, n);
    fprintf(f, "# x,y (flux-weighted centroid) and peak_x,peak_y are 1-based FITS pixel "
               "coordinates (SExtractor/ds9 convention: the first pixel's centre is 1,1)\n");
    fprintf(f, "# units: npix pixels; flux_sum (sum of pixel values) and peak in %s\n", u);
    if (m->have_bkg)
        fprintf(f, "# background: clipped median %.9g, sigma %.9g %s (%d iterations%s)\n",
                m->bkg.median, m->bkg.sigma, u, m->bkg.niter,
                m->bkg.converged ? ", converged" : ", NOT converged");
    fprintf(f, "id,x,y,npix,flux_sum,peak,peak_x,peak_y\n");
    for (int i = 0; i < n; i++) {
        const sf_source *s = &src[i];
        fprintf(f, "%d,", s->id);
        put_num(f, s->x + 1.0, ",");
        put_num(f, s->y + 1.0, ",");
        fprintf(f, "%lld,", s->npix);
        put_num(f, s->flux_sum, ",");
        put_num(f, s->peak, ",");
        fprintf(f, "%d,%d\n", s->peak_x + 1, s->peak_y + 1);
    }
    return sf_atomic_commit(f, tmp, path);
}
