/* `skyfind info`, `skyfind stages` and `skyfind simulate`. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "skyfind/fits.h"
#include "skyfind/pipeline.h"
#include "skyfind/simulate.h"

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"plane", required_argument, 0, 'P'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c, plane = 0, json = 0, nfail = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'P':
            plane = (int)strtol(optarg, &end, 10);
            if (*end || plane < 1)
                return cli_usage_error("info", "--plane needs a plane number from 1, not '%s'", optarg);
            break;
        case 'j': json = 1; break;
        case 'h':
            printf("Usage: skyfind info [--plane N] [--json] FILE...\n"
                   "Describe each image: HDU, size and axes, BITPIX and scaling, BLANK, BUNIT,\n"
                   "restoring beam (BMAJ/BMIN/BPA or the AIPS HISTORY card), WCS axes and the\n"
                   "world position of the centre, NaN count and min/median/max.\n"
                   "  --plane N   plane of a cube to describe (1-based, default 1)\n"
                   "  --json      one JSON object per file on stdout\n");
            return SF_EXIT_OK;
        default: return cli_usage_error("info", "invalid option");
        }
    }
    if (optind >= argc)
        return cli_usage_error("info", "no input FILE given");
    for (int i = optind; i < argc; i++) {
        if (sf_fits_describe(argv[i], plane - 1, stdout, json)) {
            const char *d = sf_errdetail();
            cli_error("%s%s%s", strstr(d, argv[i]) ? "" : argv[i], strstr(d, argv[i]) ? "" : ": ", d);
            nfail++;
        }
        if (!json && i + 1 < argc)
            printf("\n");
        fflush(stdout);
    }
    return nfail ? SF_EXIT_FAIL : SF_EXIT_OK;
}

int cmd_stages(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("Usage: skyfind stages\nList every stage with its parameters: type, default, "
               "range and unit.\n");
        return SF_EXIT_OK;
    }
    if (argc > 1)
        return cli_usage_error("stages", "unexpected argument '%s'", argv[1]);
    for (int i = 0; i < sf_stage_count(); i++) {
        const sf_stage_def *d = sf_stage_at(i);
        printf("%s\n    %s\n", d->name, d->desc);
        for (int k = 0; k < d->nparams; k++) {
            const sf_param_spec *p = &d->params[k];
            char range[96];
            const char *type = p->type == SF_PT_INT ? (p->choices ? (strcmp(p->choices, "auto") ? p->choices : "int|auto") : "int") : p->type == SF_PT_REAL ? "real"
                               : p->type == SF_PT_BOOL ? "yes|no" : p->type == SF_PT_STRING ? "text" : p->choices;
            if (p->type == SF_PT_INT || p->type == SF_PT_REAL)
                snprintf(range, sizeof range, "[%g, %g]", p->min, p->max);
            else
                range[0] = '\0';
            printf("    %-13s %-8s default %-7s %-16s %-7s %s\n", p->name, type, p->def, range,
                   p->unit, p->help);
        }
    }
    return SF_EXIT_OK;
}

static int parse_beam(const char *s, double *a, double *b, double *pa)
{
    return sscanf(s, "%lf,%lf,%lf", a, b, pa) == 3 ? 0 : -1;
}

int cmd_simulate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"size", required_argument, 0, 'n'},   {"ny", required_argument, 0, 'y'}, {"nx", required_argument, 0, 'X'},
        {"output", required_argument, 0, 'o'}, {"seed", required_argument, 0, 's'},
        {"nsrc", required_argument, 0, 'N'},   {"noise", required_argument, 0, 'r'},
        {"beam", required_argument, 0, 'B'},   {"pixel", required_argument, 0, 'x'},
        {"truth", required_argument, 0, 't'},  {"quiet", no_argument, 0, 'q'},
        {"pairs", required_argument, 0, 'P'},  {"pair-sep", required_argument, 0, 'S'},
        {"pair-ratio", required_argument, 0, 'R'}, {"ext-frac", required_argument, 0, 'E'},
        {"snr", required_argument, 0, 'L'},    {"noise-corr", required_argument, 0, 'C'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    sf_sim_params p;
    const char *out = NULL, *truth = NULL;
    char truthbuf[4096];
    int c;
    sf_sim_params_default(&p);
    p.nx = p.ny = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "n:o:qh", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'n': p.nx = (int)strtol(optarg, &end, 10); if (!p.ny) p.ny = p.nx; break;
        case 'y': p.ny = (int)strtol(optarg, &end, 10); break;
        case 'X': p.nx = (int)strtol(optarg, &end, 10); break;
        case 'o': out = optarg; break;
        case 's': p.seed = strtoull(optarg, &end, 10); break;
        case 'N':
            p.nsrc = (int)strtol(optarg, &end, 10);
            if (p.nsrc < 0)
                return cli_usage_error("simulate", "--nsrc takes a count >= 0 (0: noise only)");
            break;
        case 'r': p.noise = strtod(optarg, &end); break;
        case 'C':
            if (!strcmp(optarg, "white"))
                p.corr_noise = 0;
            else if (!strcmp(optarg, "beam"))
                p.corr_noise = 1;
            else
                return cli_usage_error("simulate", "--noise-corr takes white or beam, not '%s'", optarg);
            break;
        case 'x': p.pix_arcsec = strtod(optarg, &end); break;
        case 'B':
            if (parse_beam(optarg, &p.bmaj_arcsec, &p.bmin_arcsec, &p.bpa_deg))
                return cli_usage_error("simulate", "--beam takes BMAJ,BMIN,BPA (arcsec, arcsec, deg)");
            break;
        case 't': truth = optarg; break;
        case 'P': p.npairs = (int)strtol(optarg, &end, 10); break;
        case 'R': p.pair_ratio_max = strtod(optarg, &end); break;
        case 'E': p.ext_frac = strtod(optarg, &end); break;
        case 'S':
            if (sscanf(optarg, "%lf,%lf", &p.pair_sep_min, &p.pair_sep_max) != 2)
                return cli_usage_error("simulate", "--pair-sep takes MIN,MAX (beam FWHMs)");
            break;
        case 'L':
            if (sscanf(optarg, "%lf,%lf", &p.snr_min, &p.snr_max) != 2)
                return cli_usage_error("simulate", "--snr takes LO,HI (peak signal-to-noise)");
            break;
        case 'q': sf_verbosity = 0; break;
        case 'h':
            printf("Usage: skyfind simulate -n SIZE -o FILE [OPTIONS]\n"
                   "Write a simulated radio image (Gaussian noise in Jy/beam, point and extended\n"
                   "Gaussian sources convolved with an elliptical beam, NAXIS=4 with SIN WCS and\n"
                   "BMAJ/BMIN/BPA) and its truth catalogue (FILE without .fits + .truth.csv).\n"
                   "The same options and seed always give the same image.\n"
                   "  -n, --size N         image size N x N pixels\n"
                   "      --nx N, --ny N   width and height, when not square\n"
                   "  -o, --output FILE    FITS file to write\n"
                   "      --seed S         random seed (default 1)\n"
                   "      --nsrc N         number of sources (0: noise only; default: about one per\n"
                   "                       40x40 beams)\n"
                   "      --noise JY       noise rms in Jy/beam (default 1e-4)\n"
                   "      --noise-corr white|beam\n"
                   "                       white: independent pixels (default); beam: noise\n"
                   "                       convolved with the beam, rescaled to rms JY, as in an\n"
                   "                       image made from visibilities (FITS key SIMCORR = 'BEAM')\n"
                   "      --beam A,B,PA    restoring beam FWHM in arcsec and PA in deg (default 10,7,30)\n"
                   "      --pixel ARCSEC   pixel size (default 2)\n"
                   "      --truth FILE     where to write the truth catalogue (also lists each\n"
                   "                       source's observed shape: intrinsic convolved with the beam)\n"
                   "      --snr LO,HI      peak SNR range of the sources (default 3,300; power law)\n"
                   "      --ext-frac F     fraction of extended sources (default 0.2)\n"
                   "      --pairs N        add N blended pairs of point sources (truth column pair)\n"
                   "      --pair-sep A,B   their separation, uniform in [A, B] beam FWHMs (default 0.5,3)\n"
                   "      --pair-ratio R   their flux ratio, log-uniform in [1, R] (default 10)\n"
                   "  -q, --quiet          no summary\n");
            return SF_EXIT_OK;
        default: return cli_usage_error("simulate", "invalid option");
        }
        if (end && *end)
            return cli_usage_error("simulate", "'%s' is not a number", optarg);
    }
    if (optind < argc)
        return cli_usage_error("simulate", "unexpected argument '%s'", argv[optind]);
    if (p.nx <= 0 || p.ny <= 0 || !out)
        return cli_usage_error("simulate", "give the size with -n N and the output with -o FILE");
    if (!truth) {
        size_t l = strlen(out);
        snprintf(truthbuf, sizeof truthbuf, "%s", out);
        if (l > 5 && !strcmp(out + l - 5, ".fits"))
            truthbuf[l - 5] = '\0';
        strncat(truthbuf, ".truth.csv", sizeof truthbuf - strlen(truthbuf) - 1);
        truth = truthbuf;
    }
    if (sf_simulate_write(&p, out, truth)) {
        cli_error("%s", sf_errdetail());
        return sf_errdetail()[0] && strstr(sf_errdetail(), "must") ? SF_EXIT_USAGE : SF_EXIT_FAIL;
    }
    cli_note("wrote %s (%dx%d, seed %llu) and %s", out, p.nx, p.ny, p.seed, truth);
    return SF_EXIT_OK;
}
