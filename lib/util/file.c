/* SPDX-License-Identifier: BSD-3-Clause */
/* Safe reading and creation of the files libnfcoll reads and writes
 * (nf_file.h). */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nf_file.h"
#include "nf_log.h"

/* ------------------------------------------------------------ reading */

static const char *nf_file_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "an unknown kind of file";
}

/* Say what was wrong (errno intact for %m): into why, or logged. */
static nf_status_t nf_file_fail(nf_status_t st, const char *path, char *why, size_t why_len,
                                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static nf_status_t nf_file_fail(nf_status_t st, const char *path, char *why, size_t why_len,
                                const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", msg);
    else if (why == NULL)
        nf_log_error("%s: %s", path, msg);
    return st;
}

static nf_status_t nf_file_check(const struct stat *sb, size_t max, const char *path, char *why,
                                 size_t why_len)
{
    if (!S_ISREG(sb->st_mode))
        return nf_file_fail(NF_ERR_IO, path, why, why_len, "not a regular file (%s)",
                            nf_file_kind(sb->st_mode));
    if ((uintmax_t)sb->st_size > max)
        return nf_file_fail(NF_ERR_CAPACITY, path, why, why_len, "larger than %zu bytes", max);
    return NF_OK;
}

/* To end of file, whatever fstat said: the file may grow meanwhile, and
 * files such as /proc's say 0. Reads at most max + 1 bytes. */
static nf_status_t nf_file_slurp(int fd, size_t hint, size_t max, char **text, size_t *len,
                                 const char *path, char *why, size_t why_len)
{
    size_t cap = (hint < max ? hint : max) + 1, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL && n <= max) {
        if (n == cap) {
            size_t more = cap <= max / 2 ? 2 * cap : max + 1;
            char *b = realloc(buf, more + 1);
            if (b == NULL)
                break;
            buf = b, cap = more;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            return nf_file_fail(NF_ERR_IO, path, why, why_len, "cannot read: %m");
        }
        if (r == 0) {
            buf[n] = '\0';
            *text = buf;
            *len = n;
            return NF_OK;
        }
        n += (size_t)r;
    }
    if (buf == NULL || n <= max) {
        free(buf);
        return nf_file_fail(NF_ERR_NO_MEMORY, path, why, why_len, "out of memory");
    }
    free(buf);
    return nf_file_fail(NF_ERR_CAPACITY, path, why, why_len, "larger than %zu bytes", max);
}

/* stat first, so that a FIFO or device is not even opened (opening one can
 * block or have effects); fstat after the open is the check that counts,
 * since the path may have changed in between. */
nf_status_t nf_file_open(const char *path, size_t max, int *fd_out, size_t *size, char *why,
                         size_t why_len)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return nf_file_fail(NF_ERR_IO, path, why, why_len, "cannot open: %m");
    nf_status_t st = nf_file_check(&sb, max, path, why, why_len);
    if (st != NF_OK)
        return st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return nf_file_fail(NF_ERR_IO, path, why, why_len, "cannot open: %m");
    if (fstat(fd, &sb) != 0)
        st = nf_file_fail(NF_ERR_IO, path, why, why_len, "cannot read: %m");
    else
        st = nf_file_check(&sb, max, path, why, why_len);
    if (st != NF_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    *size = (size_t)sb.st_size;
    return NF_OK;
}

nf_status_t nf_file_read_all(const char *path, size_t max, char **text, size_t *len, char *why,
                             size_t why_len)
{
    int fd;
    size_t size;
    nf_status_t st = nf_file_open(path, max, &fd, &size, why, why_len);
    if (st != NF_OK)
        return st;
    st = nf_file_slurp(fd, size, max, text, len, path, why, why_len);
    close(fd);
    return st;
}

/* ------------------------------------------------------------ writing */

nf_status_t nf_wfile_open(nf_wfile_t *f, const char *path)
{
    memset(f, 0, sizeof(*f));
    if (snprintf(f->path, sizeof(f->path), "%s", path) >= (int)sizeof(f->path) ||
        snprintf(f->tmp, sizeof(f->tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(f->tmp)) {
        nf_log_error("path too long: %.64s...", path);
        return NF_ERR_INVALID;
    }
    /* mkostemp: O_CREAT | O_EXCL, mode 0600 */
    int fd = mkostemp(f->tmp, O_CLOEXEC);
    if (fd < 0) {
        nf_log_error("cannot create a file next to %s: %m", path);
        return NF_ERR_IO;
    }
    f->fp = fdopen(fd, "w");
    if (f->fp == NULL) {
        nf_log_error("cannot open %s: %m", f->tmp);
        close(fd);
        unlink(f->tmp);
        return NF_ERR_IO;
    }
    return NF_OK;
}

nf_status_t nf_wfile_publish(nf_wfile_t *f)
{
    if (f->published)
        return NF_OK;
    if (rename(f->tmp, f->path) != 0) {
        nf_log_error("cannot rename %s to %s: %m", f->tmp, f->path);
        return NF_ERR_IO;
    }
    f->published = 1;
    return NF_OK;
}

nf_status_t nf_wfile_commit(nf_wfile_t *f)
{
    int bad = f->fp == NULL || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0;
    int err = errno;
    if (f->fp != NULL && fclose(f->fp) != 0 && !bad)
        bad = 1, err = errno;
    f->fp = NULL;
    if (bad) {
        errno = err;
        nf_log_error("writing %s failed: %m", f->path);
        if (!f->published)
            unlink(f->tmp);
        return NF_ERR_IO;
    }
    return nf_wfile_publish(f);
}

void nf_wfile_abort(nf_wfile_t *f)
{
    if (f->fp != NULL)
        fclose(f->fp);
    f->fp = NULL;
    unlink(f->published ? f->path : f->tmp);
}
