/* Check suite for the temporary names of the atomic writers and the removal
 * of stale temporaries (src/io/outdir.c: sf_tmp_name, sf_outdir_clean_stale):
 * a dead process's temporaries of this host go, a live process's, another
 * host's and every final name stay. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include "sftest.h"
#include "skyfind/catalog.h"

static char dir[256];

static const char *in_dir(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void touch(const char *name)
{
    FILE *f = fopen(in_dir(name), "w");
    ck_assert_msg(f != NULL, "%s: %s", in_dir(name), strerror(errno));
    fputs("x\n", f);
    fclose(f);
}

static int exists(const char *name)
{
    struct stat sb;
    return stat(in_dir(name), &sb) == 0;
}

/* This host's token in temporary names, taken from a name sf_tmp_name made. */
static void host_token(char *host, size_t n)
{
    char name[512], *p, *q;
    ck_assert_int_eq(sf_tmp_name("x", name, sizeof name), 0);
    p = name + strlen("x.tmp.");
    q = strchr(p, '.');
    ck_assert_ptr_nonnull(q);
    snprintf(host, n, "%.*s", (int)(q - p), p);
}

/* A PID that existed and is gone: a child that exited and was reaped. */
static long dead_pid(void)
{
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0)
        _exit(0);
    waitpid(c, NULL, 0);
    ck_assert_int_eq(kill(c, 0), -1);
    return (long)c;
}

START_TEST(test_tmp_name)
{
    char a[512], b[512], host[128], want[640], tiny[8];
    host_token(host, sizeof host);
    ck_assert_int_gt((int)strlen(host), 0);
    ck_assert_ptr_null(strpbrk(host, "./ "));
    ck_assert_int_eq(sf_tmp_name("out/img.cat.csv", a, sizeof a), 0);
    ck_assert_int_eq(sf_tmp_name("out/img.cat.csv", b, sizeof b), 0);
    ck_assert_str_ne(a, b); /* N counts the names of this process */
    snprintf(want, sizeof want, "out/img.cat.csv.tmp.%s.%ld.", host, (long)getpid());
    ck_assert_msg(strncmp(a, want, strlen(want)) == 0, "%s does not start with %s", a, want);
    ck_assert_int_eq(sf_tmp_name("out/img.cat.csv", tiny, sizeof tiny), -1);
}
END_TEST

START_TEST(test_clean_stale)
{
    char host[128], name[512];
    long dead = dead_pid(), dead2 = dead_pid(), live;
    int n = -1;
    pid_t child;
    snprintf(dir, sizeof dir, "/tmp/sf_test_outdir.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    host_token(host, sizeof host);
    child = fork(); /* a live process of this host */
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    live = (long)child;
    /* finals, and names that only look like temporaries */
    touch("img.cat.csv");
    touch("img.seg.fits");
    touch("notes.tmp.txt");
    touch("img.tmp.fits");
    touch("a.tmp.12x.0");
    /* dead processes of this host: the new form and the older two */
    snprintf(name, sizeof name, "img.cat.csv.tmp.%s.%ld.0", host, dead);
    touch(name);
    snprintf(name, sizeof name, "img.seg.fits.tmp.%s.%ld.7", host, dead2);
    touch(name);
    snprintf(name, sizeof name, "old.cat.csv.tmp.%ld", dead);
    touch(name);
    snprintf(name, sizeof name, "old.seg.fits.tmp.%ld.3", dead2);
    touch(name);
    /* kept: a live process's, this process's, another host's (even with a dead PID) */
    snprintf(name, sizeof name, "live.cat.csv.tmp.%s.%ld.0", host, live);
    touch(name);
    snprintf(name, sizeof name, "self.cat.csv.tmp.%s.%ld.1", host, (long)getpid());
    touch(name);
    snprintf(name, sizeof name, "far.cat.csv.tmp.%sX.%ld.0", host, dead);
    touch(name);

    ck_assert_int_eq(sf_outdir_clean_stale(dir, &n), SF_OK);
    ck_assert_int_eq(n, 4);
    snprintf(name, sizeof name, "img.cat.csv.tmp.%s.%ld.0", host, dead);
    ck_assert(!exists(name));
    snprintf(name, sizeof name, "old.cat.csv.tmp.%ld", dead);
    ck_assert(!exists(name));
    snprintf(name, sizeof name, "live.cat.csv.tmp.%s.%ld.0", host, live);
    ck_assert(exists(name));
    snprintf(name, sizeof name, "self.cat.csv.tmp.%s.%ld.1", host, (long)getpid());
    ck_assert(exists(name));
    snprintf(name, sizeof name, "far.cat.csv.tmp.%sX.%ld.0", host, dead);
    ck_assert(exists(name));
    ck_assert(exists("img.cat.csv") && exists("img.seg.fits") && exists("notes.tmp.txt") &&
              exists("img.tmp.fits") && exists("a.tmp.12x.0"));
    /* a second pass finds nothing; the live process's goes once it is dead */
    ck_assert_int_eq(sf_outdir_clean_stale(dir, &n), SF_OK);
    ck_assert_int_eq(n, 0);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    ck_assert_int_eq(sf_outdir_clean_stale(dir, &n), SF_OK);
    ck_assert_int_eq(n, 1);
    /* a folder that is not there */
    ck_assert_int_eq(sf_outdir_clean_stale(in_dir("nope"), &n), SF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "nope"));
    ck_assert_int_eq(n, 0);
    {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.')
                remove(in_dir(e->d_name));
        if (d)
            closedir(d);
        rmdir(dir);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outdir");
    TCase *tc = tcase_create("outdir");
    tcase_add_test(tc, test_tmp_name);
    tcase_add_test(tc, test_clean_stale);
    suite_add_tcase(s, tc);
    return sftest_main(s, NULL, 0);
}
