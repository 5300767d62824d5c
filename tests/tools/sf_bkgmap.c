/* Test helper: the CPU twin of the `background` stage with method=mesh on a
 * FITS image, writing the background and rms maps (and the mesh grid).
 * usage: sf_bkgmap FILE BOX FILTER ESTIMATOR INTERP OUT_BKG.fits OUT_RMS.fits [MESH.txt] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/background.h"
#include "skyfind/fits.h"

static int pick(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

int main(int argc, char **argv)
{
    static const char *const est[] = {"sextractor", "median", "mean"};
    static const char *const interp[] = {"bicubic", "bilinear"};
    sf_image img = {0}, bkg = {0}, rms = {0};
    sf_fits_info info;
    sf_bkg_params p;
    sf_bkg_stats st;
    sf_bkg_mesh mesh = {0};
    sf_status s;
    int rc = 1;
    FILE *f = NULL;

    memset(&info, 0, sizeof info);
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: sf_bkgmap FILE BOX FILTER sextractor|median|mean "
                        "bicubic|bilinear OUT_BKG.fits OUT_RMS.fits [MESH.txt]\n");
        return 2;
    }
    sf_bkg_params_default(&p);
    p.method = SF_BKG_MESH;
    p.box = atoi(argv[2]);
    p.filter = atoi(argv[3]);
    p.estimator = pick(argv[4], est, 3);
    p.interp = pick(argv[5], interp, 2);
    if ((s = sf_fits_read(argv[1], -1, NULL, &img, &info)) != SF_OK ||
        (s = sf_image_alloc(&bkg, img.nx, img.ny, SF_HOST, NULL)) != SF_OK ||
        (s = sf_image_alloc(&rms, img.nx, img.ny, SF_HOST, NULL)) != SF_OK ||
        (s = sf_background_cpu(&img, &p, &st, &bkg, &rms)) != SF_OK ||
        (s = sf_fits_write_image(argv[6], &info, SF_FITS_FLOAT32, bkg.data, img.nx, img.ny, 0,
                                 NULL)) != SF_OK ||
        (s = sf_fits_write_image(argv[7], &info, SF_FITS_FLOAT32, rms.data, img.nx, img.ny, 0,
                                 NULL)) != SF_OK) {
        fprintf(stderr, "sf_bkgmap: %s: %s\n", sf_strerror(s), sf_errdetail());
        goto done;
    }
    if (argc == 9) {
        int nbx, nby;
        sf_bkg_mesh_shape(img.nx, img.ny, p.box, &nbx, &nby);
        mesh.loc = SF_HOST;
        mesh.bkg = malloc((size_t)nbx * nby * sizeof(float));
        mesh.rms = malloc((size_t)nbx * nby * sizeof(float));
        if (!mesh.bkg || !mesh.rms || (s = sf_bkg_mesh_cpu(&img, &p, &mesh)) != SF_OK) {
            fprintf(stderr, "sf_bkgmap: mesh: %s\n", sf_errdetail());
            goto done;
        }
        if (!(f = fopen(argv[8], "w"))) {
            fprintf(stderr, "sf_bkgmap: cannot write %s\n", argv[8]);
            goto done;
        }
        fprintf(f, "# nbx %d nby %d box %d\n# bx by bkg rms\n", nbx, nby, p.box);
        for (int i = 0; i < nbx * nby; i++)
            fprintf(f, "%d %d %.9g %.9g\n", i % nbx, i / nbx, mesh.bkg[i], mesh.rms[i]);
        if (fclose(f) != 0) {
            f = NULL;
            fprintf(stderr, "sf_bkgmap: cannot write %s\n", argv[8]);
            goto done;
        }
        f = NULL;
    }
    printf("median %.9g sigma %.9g mean %.9g nvalid %lld niter %d converged %d\n", st.median,
           st.sigma, st.mean, st.nvalid, st.niter, st.converged);
    rc = 0;
done:
    if (f)
        fclose(f);
    free(mesh.bkg);
    free(mesh.rms);
    sf_image_free(&img, NULL);
    sf_image_free(&bkg, NULL);
    sf_image_free(&rms, NULL);
    sf_fits_info_free(&info);
    return rc;
}
