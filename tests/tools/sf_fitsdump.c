/* sf_fitsdump FILE [PLANE] OUT.raw: read one plane with sf_fits_read and
 * write it as raw little-endian float32 (x fastest); prints "nx ny nnan".
 * OUT ending in ".fits" writes a 2-D FITS copy with sf_fits_write_image
 * instead. Used by tests/py/test_fits_read.py to compare with astropy. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/fits.h"

static int sf_write_le(FILE *f, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        unsigned char b[4];
        memcpy(&u, &v[i], 4);
        b[0] = (unsigned char)(u & 0xff);
        b[1] = (unsigned char)((u >> 8) & 0xff);
        b[2] = (unsigned char)((u >> 16) & 0xff);
        b[3] = (unsigned char)((u >> 24) & 0xff);
        if (fwrite(b, 1, 4, f) != 4)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    sf_image im = {0};
    sf_fits_info info;
    sf_status st;
    const char *in, *outp;
    int plane = -1, rc = 1;
    FILE *f = NULL;

    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: sf_fitsdump FILE [PLANE] OUT.raw\n");
        return 2;
    }
    in = argv[1];
    outp = argv[argc - 1];
    if (argc == 4) {
        char *end;
        plane = (int)strtol(argv[2], &end, 10);
        if (*end) {
            fprintf(stderr, "sf_fitsdump: bad plane '%s'\n", argv[2]);
            return 2;
        }
    }
    st = sf_fits_read(in, plane, NULL, &im, &info);
    if (st) {
        fprintf(stderr, "sf_fitsdump: %s: %s\n", sf_strerror(st), sf_errdetail());
        return 1;
    }
    if (strlen(outp) > 5 && strcmp(outp + strlen(outp) - 5, ".fits") == 0) {
        st = sf_fits_write_image(outp, &info, SF_FITS_FLOAT32, im.data, im.nx, im.ny, 0, NULL);
        if (st) {
            fprintf(stderr, "sf_fitsdump: %s: %s\n", sf_strerror(st), sf_errdetail());
            goto done;
        }
        printf("%d %d %lld\n", im.nx, im.ny, info.nnan);
        rc = 0;
        goto done;
    }
    f = fopen(outp, "wb");
    if (!f || sf_write_le(f, im.data, sf_npix(im.nx, im.ny)) != 0) {
        fprintf(stderr, "sf_fitsdump: cannot write %s\n", outp);
        goto done;
    }
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "sf_fitsdump: cannot write %s\n", outp);
        goto done;
    }
    f = NULL;
    printf("%d %d %lld\n", im.nx, im.ny, info.nnan);
    rc = 0;
done:
    if (f)
        fclose(f);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&info);
    return rc;
}
