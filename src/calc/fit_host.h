/* Host-side pieces of the fit stage that both backends call (defined in
 * cpu/fit.c): the checks, the object -> island table, the objects of each
 * island, the inputs as measure_calc.h's ms_in, the beam's covariance. */
#ifndef SKYFIND_FIT_HOST_H
#define SKYFIND_FIT_HOST_H

#include "fit_calc.h"

#ifdef __cplusplus
extern "C" {
#endif

sf_status sf_fit_check(const sf_image *img, const sf_labels *labels, const sf_fit_in *in,
                       const sf_fit_params *p);
/* isl_of[l] (l = 0..nobj): the island of object l (malloc'd). */
sf_status sf_fit_island_map(const sf_fit_in *in, int **isl_of);
/* The objects of each island in label order: olist[off[k] .. off[k+1]). */
sf_status sf_fit_objects(const sf_fit_in *in, const int *isl_of, int **off, int **olist);
void sf_fit_ms_in(const sf_fit_in *in, ms_in *mi);
void sf_fit_beam_cov(const sf_fit_in *in, sf_fit_cov2 *beam);

#ifdef __cplusplus
}
#endif
#endif
