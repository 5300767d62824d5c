/* A helper of the CPU twins' walks over a label map (measure's two passes,
 * deblend's counting sort). */
#ifndef SKYFIND_CALC_LABELS_SCAN_H
#define SKYFIND_CALC_LABELS_SCAN_H

#include <stdint.h>
#include <string.h>

/* Are labels x .. x+3 of a row all sky (0)? Walks skip the sky four labels
 * at a time: islands cover a few percent of an image, and a test a label
 * was most of a walk on one thread. */
static inline int sf_labels_sky4(const int32_t *lrow, int x, int nx)
{
    uint64_t w[2];
    if (x + 4 > nx)
        return 0;
    memcpy(w, lrow + x, sizeof w);
    return !(w[0] | w[1]);
}

#endif
