/* Temporary names of the atomic writers ("PATH.tmp.HOST.PID.N") and the
 * removal of those left by dead processes of this host (a run killed with
 * SIGKILL between creating a temporary and renaming it into place). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "skyfind/catalog.h"

static void host_name(char *h, size_t n)
{
    if (gethostname(h, n) != 0 || !h[0])
        snprintf(h, n, "host");
    h[n - 1] = '\0';
    for (char *p = h; *p; p++) /* one token: no dots, no separators */
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
            *p = '-';
}

int sf_tmp_name(const char *path, char *out, size_t n)
{
    static atomic_uint seq;
    char host[72];
    int k;
    host_name(host, sizeof host);
    k = snprintf(out, n, "%s.tmp.%s.%ld.%u", path, host, (long)getpid(),
                 atomic_fetch_add(&seq, 1u));
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* Digits only, at least one; the value in *v. */
static int all_digits(const char *s, size_t len, long *v)
{
    char buf[24];
    if (len == 0 || len >= sizeof buf)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    *v = strtol(buf, NULL, 10);
    return 1;
}

/* The PID of a temporary of this host ("x.tmp.HOST.PID.N", or the older
 * "x.tmp.PID" and "x.tmp.PID.N"); 0 when the name is no such temporary. */
static long tmp_pid(const char *name, const char *host)
{
    const char *t = NULL, *p = name;
    long pid = 0, n;
    while ((p = strstr(p, ".tmp.")))
        t = p++;
    if (!t)
        return 0;
    t += 5;
    const char *d1 = strchr(t, '.');
    if (!d1) /* x.tmp.PID */
        return all_digits(t, strlen(t), &pid) ? pid : 0;
    const char *d2 = strchr(d1 + 1, '.');
    if (!d2) { /* x.tmp.PID.N */
        if (all_digits(t, (size_t)(d1 - t), &pid) && all_digits(d1 + 1, strlen(d1 + 1), &n))
            return pid;
        /* a host name with no PID after it is not ours */
        return 0;
    }
    /* x.tmp.HOST.PID.N: only this host's */
    if ((size_t)(d1 - t) != strlen(host) || strncmp(t, host, (size_t)(d1 - t)) != 0)
        return 0;
    if (strchr(d2 + 1, '.') || !all_digits(d1 + 1, (size_t)(d2 - d1 - 1), &pid) ||
        !all_digits(d2 + 1, strlen(d2 + 1), &n))
        return 0;
    return pid;
}

sf_status sf_outdir_clean_stale(const char *dir, int *nremoved)
{
    char host[72], path[4200];
    DIR *d;
    struct dirent *e;
    int removed = 0;
    if (nremoved)
        *nremoved = 0;
    host_name(host, sizeof host);
    if (!(d = opendir(dir)))
        return sf_fail(SF_ERR_IO, "%s: cannot list the folder: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        long pid = tmp_pid(e->d_name, host);
        if (pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) /* alive (or not ours to judge) */
            continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        if (remove(path) == 0)
            removed++;
    }
    closedir(d);
    if (nremoved)
        *nremoved = removed;
    return SF_OK;
}
