/* Test helper: run the CPU `radio` pipeline on a FITS image and write the PNG
 * previews OUTDIR/{image,image_zscale,segmap,overlay}.png and the catalogue
 * OUTDIR/sources.csv; prints "nx ny nlabels nsources". usage: sf_preview_tool FILE OUTDIR */
#include <stdio.h>
#include "skyfind/catalog.h"
#include "skyfind/fits.h"
#include "skyfind/pipeline.h"
#include "skyfind/preview.h"

int main(int argc, char **argv)
{
    sf_image img = {0};
    sf_fits_info info = {0};
    sf_pipeline pl = {0};
    sf_run_result r = {0};
    sf_run_opts o = {0};
    sf_catalog_meta meta = {0};
    char pipe[1024], out[4096];
    int rc = 1, have_pl = 0;
    sf_status st;
    if (argc != 3) {
        fprintf(stderr, "usage: sf_preview_tool FILE OUTDIR\n");
        return 2;
    }
    if ((st = sf_fits_read(argv[1], -1, NULL, &img, &info)) ||
        (st = sf_pipeline_find("radio", pipe, sizeof pipe)) ||
        (st = sf_pipeline_load(pipe, &pl)))
        goto done;
    have_pl = 1;
    o.backend = SF_BACKEND_CPU;
    o.keep = SF_KEEP_LABELS;
    if ((st = sf_pipeline_run(&pl, &img, &o, &r)))
        goto done;
    snprintf(out, sizeof out, "%s/image.png", argv[2]);
    if ((st = sf_preview_image(out, &img, SF_STRETCH_ASINH)))
        goto done;
    snprintf(out, sizeof out, "%s/image_zscale.png", argv[2]);
    if ((st = sf_preview_image(out, &img, SF_STRETCH_ZSCALE)))
        goto done;
    snprintf(out, sizeof out, "%s/segmap.png", argv[2]);
    if ((st = sf_preview_segmap(out, &r.labels)))
        goto done;
    snprintf(out, sizeof out, "%s/overlay.png", argv[2]);
    if ((st = sf_preview_overlay(out, &img, r.sources, r.nsources, SF_STRETCH_ASINH)))
        goto done;
    snprintf(out, sizeof out, "%s/sources.csv", argv[2]);
    meta.input = argv[1];
    meta.pipeline = pipe;
    meta.backend = "cpu";
    meta.bunit = info.bunit;
    if ((st = sf_catalog_write_csv(out, r.sources, r.nsources, &meta)))
        goto done;
    printf("%d %d %d %d\n", img.nx, img.ny, r.nlabels, r.nsources);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "sf_preview_tool: %s: %s\n", sf_strerror(st), sf_errdetail());
    sf_run_result_free(&r);
    if (have_pl)
        sf_pipeline_free(&pl);
    sf_image_free(&img, NULL);
    sf_fits_info_free(&info);
    return rc;
}
