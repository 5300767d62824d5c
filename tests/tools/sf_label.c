/* Test helper: label a raw uint8 mask with the CPU twin of the `segment`
 * stage and write the int32 labels raw, printing N (for the scipy test).
 * usage: sf_label NX NY CONN MINAREA mask.raw labels.raw */
#include <stdio.h>
#include <stdlib.h>
#include "skyfind/segment.h"

int main(int argc, char **argv)
{
    sf_mask m = {0};
    sf_labels l = {0};
    sf_seg_params p;
    FILE *f = NULL;
    int nx, ny, n = 0, rc = 1;
    size_t npix;
    sf_status st;
    if (argc != 7) {
        fprintf(stderr, "usage: sf_label NX NY CONN MINAREA mask.raw labels.raw\n");
        return 2;
    }
    nx = atoi(argv[1]);
    ny = atoi(argv[2]);
    p.connectivity = atoi(argv[3]);
    p.min_area = atoi(argv[4]);
    if (sf_mask_alloc(&m, nx, ny, SF_HOST, NULL) != SF_OK ||
        sf_labels_alloc(&l, nx, ny, SF_HOST, NULL) != SF_OK) {
        fprintf(stderr, "sf_label: %s\n", sf_errdetail());
        goto done;
    }
    npix = sf_npix(nx, ny);
    if (!(f = fopen(argv[5], "rb")) || fread(m.data, 1, npix, f) != npix) {
        fprintf(stderr, "sf_label: cannot read %zu bytes from %s\n", npix, argv[5]);
        goto done;
    }
    fclose(f);
    f = NULL;
    if ((st = sf_segment_cpu(&m, &p, &l, &n)) != SF_OK) {
        fprintf(stderr, "sf_label: %s: %s\n", sf_strerror(st), sf_errdetail());
        goto done;
    }
    if (!(f = fopen(argv[6], "wb")) || fwrite(l.data, sizeof(int32_t), npix, f) != npix ||
        fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "sf_label: cannot write %s\n", argv[6]);
        goto done;
    }
    f = NULL;
    printf("%d\n", n);
    rc = 0;
done:
    if (f)
        fclose(f);
    sf_labels_free(&l, NULL);
    sf_mask_free(&m, NULL);
    return rc;
}
