/* The wall clock in milliseconds (CLOCK_MONOTONIC), for the CPU twins'
 * developer profiles (SKYFIND_BKG_PROFILE, SKYFIND_MESH_PROFILE,
 * SKYFIND_BANE_PROFILE). The core, engine and CLI layers, which do not see
 * src/calc, keep their own. */
#ifndef SKYFIND_CALC_WALLCLOCK_H
#define SKYFIND_CALC_WALLCLOCK_H

#include <time.h>

static inline double sf_wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#endif
