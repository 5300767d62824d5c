/* A helper of the CPU twins' walks over a label map (measure's two passes,
 * deblend's counting sort). */
#ifndef SKYFIND_CALC_LABELS_SCAN_H
#define SKYFIND_CALC_LABELS_SCAN_H

#include <stdint.h>
#include <string.h>

/* How many labels from x on a walk may skip as sky (0): 16 when labels x
 * .. x+15 are all sky (a cache line's worth, four 16-byte words OR'd), else
 * 4 when x .. x+3 are, else 0 (label x is then read). Walks skip the sky a
 * block at a time: islands cover a few percent of an image, and a test a
 * label was most of a walk on one thread. */
static inline int sf_labels_sky_run(const int32_t *lrow, int x, int nx)
{
    uint64_t w[8];
    if (x + 16 <= nx) {
        memcpy(w, lrow + x, sizeof w);
        if (!((w[0] | w[1]) | (w[2] | w[3]) | (w[4] | w[5]) | (w[6] | w[7])))
            return 16;
        return !(w[0] | w[1]) ? 4 : 0;
    }
    if (x + 4 > nx)
        return 0;
    memcpy(w, lrow + x, 2 * sizeof w[0]);
    return !(w[0] | w[1]) ? 4 : 0;
}

#endif
