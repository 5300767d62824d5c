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
    sf_status s;
    memset(&info, 0, sizeof info);
    if ((s = sf_fits_read(path, -1, NULL, &im, &info)) != SF_OK)
        return s; /* the detail names the file */
    /* the reader makes every non-finite weight NaN and counts it: the one
     * check a kernel's weights need, made here to name the file */
    if (info.nnan > 0) {
        long long first = -1;
        for (size_t i = 0; i < sf_npix(im.nx, im.ny) && first < 0; i++)
            if (isnan(im.data[i]))
                first = (long long)i;
        s = sf_fail(SF_ERR_PARAM, "kernel %s: %lld NaN weights (first at x=%lld, y=%lld); "
                    "a kernel must have finite weights", path, info.nnan,
                    first % im.nx, first / im.nx);
        goto done;
    }
    /* the reader's image is contiguous (stride nx) */
    if ((s = sf_kernel_from_array(&t, im.data, im.nx, im.ny, normalise)) != SF_OK) {
        sf_errcontext("%s", path);
        goto done;
    }
    snprintf(t.desc, sizeof t.desc, "fits %.100s %dx%d%s", path, t.nx, t.ny,
             normalise ? " normalised" : "");
    *k = t;
done:
    sf_image_free(&im, NULL);
    sf_fits_info_free(&info);
    return s;
}
