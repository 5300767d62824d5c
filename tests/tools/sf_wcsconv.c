/* Test helper: 0-based pixel coordinates to world coordinates with
 * sf_wcs_open/sf_wcs_pix2world, one "lon lat" line (%.12f) per pair.
 * usage: sf_wcsconv FILE x y [x y ...]; exit 3 when FILE has no celestial WCS. */
#include <stdio.h>
#include <stdlib.h>
#include "skyfind/fits.h"
#include "skyfind/wcs.h"

int main(int argc, char **argv)
{
    sf_image img = {0};
    sf_fits_info info = {0};
    sf_wcs *w = NULL;
    sf_status st;
    int rc = 1;
    if (argc < 2 || argc % 2) {
        fprintf(stderr, "usage: sf_wcsconv FILE x y [x y ...]\n");
        return 2;
    }
    if ((st = sf_fits_read(argv[1], -1, NULL, &img, &info))) {
        fprintf(stderr, "sf_wcsconv: %s: %s\n", sf_strerror(st), sf_errdetail());
        goto done;
    }
    if (!(w = sf_wcs_open(&info, img.nx, img.ny))) {
        printf("no celestial WCS: %s\n", sf_errdetail());
        rc = 3;
        goto done;
    }
    printf("# %s %s %s\n", sf_wcs_lon_name(w), sf_wcs_lat_name(w), sf_wcs_frame(w));
    for (int i = 2; i + 1 < argc; i += 2) {
        double lon, lat;
        sf_wcs_pix2world(w, atof(argv[i]), atof(argv[i + 1]), &lon, &lat);
        printf("%.12f %.12f\n", lon, lat);
    }
    rc = 0;
done:
    sf_wcs_close(w);
    sf_image_free(&img, NULL);
    sf_fits_info_free(&info);
    return rc;
}
