/* FITS input from a memory buffer through an anonymous in-memory file
 * (memfd_create): the same sf_fits_read, header, raw and CFITSIO paths, as
 * for a file on disk. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "skyfind/fits_mem.h"
#include "skyfind/status.h"

int sf_memfile(const void *buf, size_t n, char *path, size_t pathlen)
{
    const char *p = buf;
    int fd = memfd_create("skyfind-mem", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            errno = e;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

sf_status sf_fits_read_mem(const void *buf, size_t n, const char *name, int plane,
                           sf_image *img, sf_fits_info *info)
{
    char path[64];
    int fd = sf_memfile(buf, n, path, sizeof path);
    sf_status s;
    if (fd < 0)
        return sf_fail(SF_ERR_IO, "%s: cannot make an in-memory file of %zu bytes: %s",
                       name ? name : "buffer", n, strerror(errno));
    s = sf_fits_read(path, plane, NULL, img, info);
    close(fd);
    if (s == SF_OK && name)
        snprintf(info->path, sizeof info->path, "%s", name);
    return s;
}
