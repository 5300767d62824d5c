/* Test helper: find sources in a FITS image with the CPU `radio` pipeline and
 * write the catalogue in every format (STEM.cat.csv, .cat.fits, .cat.vot, .reg)
 * with world coordinates when the image has a WCS and fluxes in Jy when it has
 * a beam. usage: sf_catwrite FILE STEM */
#include <stdio.h>
#include "skyfind/catalog.h"
#include "skyfind/fits.h"
#include "skyfind/pipeline.h"
#include "skyfind/wcs.h"

int main(int argc, char **argv)
{
    static const sf_catalog_format fmts[] = {SF_CAT_CSV, SF_CAT_FITS, SF_CAT_VOTABLE,
                                             SF_CAT_REGION};
    sf_image img = {0};
    sf_fits_info info = {0};
    sf_pipeline pl = {0};
    sf_run_result r = {0};
    sf_run_opts o = {SF_BACKEND_CPU, NULL, 0, 0};
    sf_wcs *w = NULL;
    char pipe[4096], out[4200];
    sf_beam_pixels beam;
    sf_status st;
    int rc = 1, have_pl = 0;
    if (argc != 3) {
        fprintf(stderr, "usage: sf_catwrite FILE STEM\n");
        return 2;
    }
    if ((st = sf_fits_read(argv[1], -1, NULL, &img, &info)) ||
        (st = sf_pipeline_find("radio", pipe, sizeof pipe)) ||
        (st = sf_pipeline_load(pipe, &pl)))
        goto fail;
    have_pl = 1;
    sf_fits_beam_pixels(&info, img.nx, img.ny, &beam);
    o.beam_pix = beam.bmaj_pix;
    if ((st = sf_pipeline_run(&pl, &img, &o, &r)))
        goto fail;
    w = sf_wcs_open(&info, img.nx, img.ny);
    {
        sf_catalog_meta m = {argv[1], pl.name, "cpu", info.bunit, r.have_bkg, r.bkg, w, r.box};
        m.bmaj_pix = beam.bmaj_pix;
        m.bmin_pix = beam.bmin_pix;
        for (int k = 0; k < 4; k++) {
            snprintf(out, sizeof out, "%s%s", argv[2], sf_catalog_format_suffix(fmts[k]));
            if ((st = sf_catalog_write(out, fmts[k], r.sources, r.nsources, &m)))
                goto fail;
        }
    }
    printf("%d sources, wcs %s\n", r.nsources, w ? sf_wcs_frame(w) : "none");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "sf_catwrite: %s: %s\n", sf_strerror(st), sf_errdetail());
done:
    sf_wcs_close(w);
    sf_run_result_free(&r);
    if (have_pl)
        sf_pipeline_free(&pl);
    sf_image_free(&img, NULL);
    sf_fits_info_free(&info);
    return rc;
}
