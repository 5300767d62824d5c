/* Test helper: `sf_simulate_tool NX NY SEED OUT.fits OUT.csv [NSRC]` writes a
 * simulated image (default parameters otherwise; NSRC <= 0 or absent: automatic) and
 * its truth catalogue through sf_simulate_write, for tests without the skyfind CLI. */
#include <stdio.h>
#include <stdlib.h>
#include "skyfind/simulate.h"

int main(int argc, char **argv)
{
    sf_sim_params p;
    char *end;
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s NX NY SEED OUT.fits OUT.csv [NSRC]\n", argv[0]);
        return 2;
    }
    sf_sim_params_default(&p);
    p.nx = (int)strtol(argv[1], &end, 10);
    if (*end) {
        fprintf(stderr, "%s: NX '%s' is not an integer\n", argv[0], argv[1]);
        return 2;
    }
    p.ny = (int)strtol(argv[2], &end, 10);
    if (*end) {
        fprintf(stderr, "%s: NY '%s' is not an integer\n", argv[0], argv[2]);
        return 2;
    }
    p.seed = strtoull(argv[3], &end, 10);
    if (*end) {
        fprintf(stderr, "%s: SEED '%s' is not an integer\n", argv[0], argv[3]);
        return 2;
    }
    if (argc == 7) {
        p.nsrc = (int)strtol(argv[6], &end, 10);
        if (*end) {
            fprintf(stderr, "%s: NSRC '%s' is not an integer\n", argv[0], argv[6]);
            return 2;
        }
    }
    sf_status st = sf_simulate_write(&p, argv[4], argv[5]);
    if (st != SF_OK) {
        fprintf(stderr, "%s: %s: %s\n", argv[0], sf_strerror(st), sf_errdetail());
        return 1;
    }
    return 0;
}
