/* A convolution kernel read from a FITS image (`convolve kernel=FILE.fits`):
 * the I/O layer's half of the kernels of src/core/kernel.c, so that the
 * runner's layer needs no FITS reader of its own. The convolve stage reaches
 * it through the public sf_kernel_read_fits (skyfind/convolve.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/convolve.h"
#include "skyfind/fits.h"

sf_status sf_kernel_read_fits(sf_kernel *k, const char *path, int normalise)
{
    sf_image im = {0};
    sf_fits_info info;
    sf_kernel t;
    float *w = NULL;
    sf_status s;
    memset(&info, 0, sizeof info);
    if ((s = sf_fits_read(path, -1, NULL, &im, &info)) != SF_OK)
        return s; /* the detail names the file */
    if (info.nnan > 0) {
        long long first = -1;
        for (int j = 0; j < im.ny && first < 0; j++)
            for (int i = 0; i < im.nx && first < 0; i++)
                if (isnan(im.data[(size_t)j * im.stride + i]))
                    first = (long long)j * im.nx + i;
        s = sf_fail(SF_ERR_PARAM, "kernel %s: %lld NaN weights (first at x=%lld, y=%lld); "
                    "a kernel must have finite weights", path, info.nnan,
                    first % im.nx, first / im.nx);
        goto done;
    }
    if (!(w = malloc(sf_npix(im.nx, im.ny) * sizeof *w))) {
        s = sf_fail(SF_ERR_NOMEM, "kernel %s: no memory for %dx%d weights", path, im.nx, im.ny);
        goto done;
    }
    for (int j = 0; j < im.ny; j++)
        for (int i = 0; i < im.nx; i++) {
            float v = im.data[(size_t)j * im.stride + i];
            if (!isfinite(v)) {
                s = sf_fail(SF_ERR_PARAM, "%s: weight (x=%d, y=%d) is %g (kernels must be finite)",
                            path, i, j, v);
                goto done;
            }
            w[(size_t)j * im.nx + i] = v;
        }
    if ((s = sf_kernel_from_array(&t, w, im.nx, im.ny, normalise)) != SF_OK) {
        sf_errcontext("%s", path);
        goto done;
    }
    snprintf(t.desc, sizeof t.desc, "fits %.100s %dx%d%s", path, t.nx, t.ny,
             normalise ? " normalised" : "");
    *k = t;
done:
    free(w);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&info);
    return s;
}
