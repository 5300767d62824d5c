/* libFuzzer harness: the kernel readers, sf_kernel_read_conv (SExtractor
 * .conv text) and sf_kernel_read_fits (a FITS PSF, normalised or not), then
 * the kernel on a small image by both CPU methods and every edge mode.
 * Input: one byte choosing the reader and options, then the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "skyfind/convolve.h"
#include "skyfind/fits_mem.h"
#include "fuzz_common.h"

#define IMG_NX 37
#define IMG_NY 23

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setenv("OMP_NUM_THREADS", "1", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float in[IMG_NX * IMG_NY], out[IMG_NX * IMG_NY];
    sf_kernel k;
    char path[64];
    int fd, sel;
    sf_status s;
    if (size < 1)
        return 0;
    sel = data[0];
    data++;
    size--;
    if ((sel & 1) && fuzz_fits_skip(data, size))
        return -1;
    if ((fd = sf_memfile(data, size, path, sizeof path)) < 0)
        return 0;
    memset(&k, 0, sizeof k);
    s = (sel & 1) ? sf_kernel_read_fits(&k, path, (sel >> 1) & 1) : sf_kernel_read_conv(&k, path);
    close(fd);
    if (s != SF_OK)
        return 0;
    if (k.nx < 1 || k.ny < 1 || !k.w || !isfinite(k.sum) || !isfinite(k.sum2))
        abort(); /* a kernel the readers accept has finite weights */
    (void)sf_kernel_noise_gain(&k);
    if ((long)k.nx * k.ny <= 64L * 64L) {
        sf_image im = {IMG_NX, IMG_NY, IMG_NX, in, SF_HOST};
        sf_image om = {IMG_NX, IMG_NY, IMG_NX, out, SF_HOST};
        for (int i = 0; i < IMG_NX * IMG_NY; i++)
            in[i] = (i % 7 == 3) ? NAN : (float)((i * 37) % 101) * 0.01f;
        int method = (sel >> 2) % 3, edge = (sel >> 4) & 3;
        if (method == SF_CONV_DIRECT && (k.nx > SF_KERNEL_MAX || k.ny > SF_KERNEL_MAX))
            method = SF_CONV_FFT;
        (void)sf_convolve_pick(&k, IMG_NX, IMG_NY, 0);
        if (sf_convolve_cpu(&im, &k, method, edge, -1, &om) != SF_OK) {
            fprintf(stderr, "convolve failed: %s\n", sf_errdetail());
            abort(); /* a valid kernel and image must convolve */
        }
    }
    sf_kernel_free(&k);
    return 0;
}
