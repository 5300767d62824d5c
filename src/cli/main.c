/* skyfind command-line tool: dispatches the subcommands (run, compare,
 * info, stages, simulate) to src/cli/cli_*.c. Only the CLI's files choose
 * exit codes; like every file of src/cli/ this one includes only the public
 * headers and the CLI's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "skyfind/gpu.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: skyfind COMMAND [OPTIONS] [FILE...]\n"
            "Find sources in FITS sky images, on the CPU or the GPU.\n"
            "\n"
            "Commands:\n"
            "  run FILE...        run a pipeline and write a catalogue per image\n"
            "  compare FILE...    run the CPU and GPU backends and compare every stage\n"
            "  info FILE...       describe images: size, scaling, units, beam, WCS, statistics\n"
            "  stages             list the stages and their parameters\n"
            "  simulate -n N -o F write a simulated radio image and its truth catalogue\n"
            "\n"
            "Options:\n"
            "  -h, --help         show this help (COMMAND --help: that command's options)\n"
            "  -V, --version      show the version\n"
            "\n"
            "Exit status: 0 success; 1 a file could not be processed; 2 usage error;\n"
            "3 invalid pipeline file; 4 compare found CPU and GPU disagreeing.\n"
            "See skyfind(1) and skyfind-pipeline(5).\n");
}

#ifdef SKYFIND_STATIC_GOMP
/* GCC's OpenMP runtime, linked into the tool (CMakeLists.txt,
 * SKYFIND_STATIC_GOMP), reads its settings in a constructor of its own; this
 * one runs before it. Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT say
 * otherwise, libgomp's idle threads spin 300000 rounds before they sleep: on
 * a virtual machine whose host is shared the spinning vCPUs take the host's
 * time from the working ones (on the lent H200 host 6 of 20 runs of
 * lesson.pipe at 4096^2 and 16 threads stalled 15-80 ms, none with
 * GOMP_SPINCOUNT=10000 or OMP_WAIT_POLICY=passive, and the medians were the
 * same: tests/bench/RESULTS.md). The tool spins 10000 rounds; the variable is
 * taken out of its environment again in main. */
static int spin_set;
__attribute__((constructor(101))) static void omp_spin_default(void)
{
    if (!getenv("GOMP_SPINCOUNT") && !getenv("OMP_WAIT_POLICY"))
        spin_set = setenv("GOMP_SPINCOUNT", "10000", 0) == 0;
}
#endif

int main(int argc, char **argv)
{
    const char *cmd;
#ifdef SKYFIND_STATIC_GOMP
    if (spin_set) /* libgomp has read it */
        unsetenv("GOMP_SPINCOUNT");
#endif
    /* load each CUDA kernel when it is first launched, not all at start-up
     * (the default since CUDA 12.2; said here for older drivers) */
    setenv("CUDA_MODULE_LOADING", "LAZY", 0);
    if (argc < 2)
        return cli_usage_error(NULL, "no command given (run, compare, info, stages, simulate)");
    cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return SF_EXIT_OK;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("skyfind %s (%s)\n", SKYFIND_VERSION,
               sf_gpu_compiled() ? "with CUDA GPU stages" : "CPU only: built without CUDA");
        return SF_EXIT_OK;
    }
    argv[1] = argv[0];
    if (!strcmp(cmd, "run")) {
        int rc = cmd_run(argc - 1, argv + 1);
        /* After a GPU run the CUDA runtime's exit handlers would destroy the
         * contexts (tens to a hundred ms); the files are written and closed,
         * so leave that to the driver, unless a CUDA tool is attached. */
        if (sf_gpu_used() && !getenv("CUDA_INJECTION64_PATH") && !getenv("SKYFIND_CLEAN_EXIT")) {
            fflush(NULL);
            _exit(rc);
        }
        return rc;
    }
    if (!strcmp(cmd, "compare"))
        return cmd_compare(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "stages"))
        return cmd_stages(argc - 1, argv + 1);
    if (!strcmp(cmd, "simulate"))
        return cmd_simulate(argc - 1, argv + 1);
    return cli_usage_error(NULL, "unknown command '%s'", cmd);
}
