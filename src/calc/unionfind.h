/* Union-find over an array of parents (P[k] == k for a root), the smaller
 * index the root, with path halving: so a set's root is its first element
 * (the first pixel in raster order, for sets of pixels or labels numbered in
 * that order). The CPU twins' segment (joining strips) and deblend (the
 * components at each level) use it. */
#ifndef SKYFIND_UNIONFIND_H
#define SKYFIND_UNIONFIND_H

#include <stdint.h>

static inline int32_t sf_uf_root(int32_t *P, int32_t a)
{
    while (P[a] != a) {
        P[a] = P[P[a]];
        a = P[a];
    }
    return a;
}

/* Joins the set whose root is ra with b's set (the smaller root stays) and
 * returns the joined set's root: for a caller that joins one element with
 * several neighbours and so knows its root already. */
static inline int32_t sf_uf_join_root(int32_t *P, int32_t ra, int32_t b)
{
    const int32_t rb = sf_uf_root(P, b);
    if (rb < ra) {
        P[ra] = rb;
        return rb;
    }
    if (ra < rb)
        P[rb] = ra;
    return ra;
}

static inline void sf_uf_join(int32_t *P, int32_t a, int32_t b)
{
    (void)sf_uf_join_root(P, sf_uf_root(P, a), b);
}

#endif
