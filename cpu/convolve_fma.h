/* The general 2-D direct convolution's sums on the CPU, as the GPU makes
 * them (direct2d_rb and direct2d_kernel in gpu/convolve_kernels.cuh):
 *
 *   p_kr = fma(wf[kr][kx-1], e_kr[x + kx-1], ... fma(wf[kr][0], e_kr[x], +0))
 *   sum  = p_0 + p_1 + ... + p_{ky-1}      (in float up to SF_CONV_FLOAT_ROWS_MAX
 *                                           taps, in double above)
 *
 * each kernel row's partial a chain of fused multiply-adds over its taps in
 * order, the rows added in order from the top, e_kr the extended input row
 * kr (edge mode applied, NaN as 0) and wf the weights flipped in both axes.
 * Every lane of a vector computes its own pixel's chain, so the AVX-512, the
 * AVX2 + FMA and the scalar fmaf() builds give the same bits, and the GPU's
 * sums are those bits too.
 *
 * sf_conv2d_band: the sums of rb output rows (rb <= SF_CONV2D_RB), columns
 * [0, nx), written to out row r at out + r * ostride, the rows added in
 * double when dbl (kernels over SF_CONV_FLOAT_ROWS_MAX taps); rows[jr] is extended
 * input row jr (rb + ky - 1 of them, top to bottom), whose [0, nx + kx - 1)
 * hold the row and which is readable, with anything there, up to
 * SF_CONV2D_VEC floats past nx + kx - 1 rounded up to SF_CONV2D_VEC. */
#ifndef SKYFIND_CPU_CONVOLVE_FMA_H
#define SKYFIND_CPU_CONVOLVE_FMA_H

#include <stddef.h>

#define SF_CONV2D_RB 8   /* output rows a band */
#define SF_CONV2D_VEC 64 /* columns a step (four AVX-512 vectors) */

void sf_conv2d_band(const float *const *rows, const float *wf, int kx, int ky, int nx, int rb,
                    int dbl, float *out, size_t ostride);

#endif
