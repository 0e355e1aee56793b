/* Safe creation of the files libnfcoll writes (nf_file.h). */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nf_file.h"
#include "nf_log.h"

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
