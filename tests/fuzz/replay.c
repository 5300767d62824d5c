/* A main for the fuzzing harnesses without libFuzzer (any compiler): runs
 * LLVMFuzzerTestOneInput once on every file named, and on every file of
 * every folder named, so the regression inputs and seed corpora run as
 * ordinary tests (under ASan/UBSan in the sanitizer build). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static long nrun;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;
    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
        !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        if (f)
            fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    fprintf(stderr, "replay: %s (%ld bytes)\n", path, n);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    nrun++;
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    int bad = 0;
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        struct dirent **names;
        int n;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            bad |= run_file(argv[i]);
            continue;
        }
        if ((n = scandir(argv[i], &names, NULL, by_name)) < 0) {
            fprintf(stderr, "replay: cannot list %s\n", argv[i]);
            return 1;
        }
        for (int j = 0; j < n; j++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[j]->d_name);
            if (names[j]->d_name[0] != '.' && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
                bad |= run_file(path);
            free(names[j]);
        }
        free(names);
    }
    printf("replay: %ld inputs run\n", nrun);
    return bad;
}
