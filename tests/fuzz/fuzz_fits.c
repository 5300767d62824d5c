/* libFuzzer harness: a FITS file from memory through sf_fits_read (CFITSIO,
 * the raw-pixel path, header copy, beam), the WCS (sf_wcs_open,
 * sf_fits_beam_pixels) on images of at most 512x512 pixels, and the CPU
 * pipeline (radio.pipe and lesson.pipe) on those of at most 128x128 (a
 * 440x300 image takes 0.45 s through both: the fuzzer would spend its time
 * in the stages' arithmetic, not in the code that handles odd input). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "skyfind/fits_mem.h"
#include "skyfind/pipeline.h"
#include "skyfind/wcs.h"
#include "fuzz_common.h"

#define FUZZ_RUNPIX (128L * 128L)

static sf_pipeline pipes[2];
static int npipes;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *names[2] = {"radio", "lesson"};
    setenv("OMP_NUM_THREADS", "1", 0); /* one core per execution, like the fuzzer */
    for (int i = 0; i < 2; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s.pipe", SKYFIND_SOURCE_PIPELINE_DIR, names[i]);
        if (sf_pipeline_load(path, &pipes[npipes]) != SF_OK) {
            fprintf(stderr, "fuzz_fits: %s\n", sf_errdetail());
            abort();
        }
        npipes++;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_image img = {0};
    sf_fits_info info;
    sf_beam_pixels bp;
    if (fuzz_fits_skip(data, size))
        return -1; /* not added to the corpus */
    memset(&info, 0, sizeof info);
    if (sf_fits_read_mem(data, size, "fuzz.fits", -1, &img, &info) != SF_OK)
        return 0;
    if ((long)img.nx * img.ny <= FUZZ_MAXPIX) {
        sf_wcs *w = sf_wcs_open(&info, img.nx, img.ny);
        if (w) {
            double lon, lat;
            sf_wcs_pix2world(w, 0.5 * (img.nx - 1), 0.5 * (img.ny - 1), &lon, &lat);
            (void)sf_wcs_pixel_arcsec(w, 0, 0);
            (void)sf_wcs_frame(w);
            sf_wcs_close(w);
        }
        sf_fits_beam_pixels(&info, img.nx, img.ny, &bp);
        for (int i = 0; i < npipes && (long)img.nx * img.ny <= FUZZ_RUNPIX; i++) {
            sf_run_opts o = {0};
            sf_run_result r;
            memset(&r, 0, sizeof r);
            o.backend = SF_BACKEND_CPU;
            o.keep = SF_KEEP_MASK | SF_KEEP_LABELS;
            o.beam_pix = bp.bmaj_pix;
            o.beam_min_pix = bp.bmin_pix;
            o.beam_pa_deg = bp.bpa_deg;
            o.pix_arcsec = bp.pix_arcsec;
            if (sf_pipeline_run(&pipes[i], &img, &o, &r) == SF_OK) {
                /* every measured value is read (ASan sees stale memory) */
                double acc = 0;
                for (int k = 0; k < r.nsources; k++)
                    acc += r.sources[k].x + r.sources[k].y + r.sources[k].flux_sum;
                if (r.nsources < 0 || (r.nsources > 0 && !r.sources))
                    abort();
                (void)acc;
            }
            sf_run_result_free(&r);
        }
    }
    sf_image_free(&img, NULL);
    sf_fits_info_free(&info);
    return 0;
}
