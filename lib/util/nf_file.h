/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Files libnfcoll reads and writes, safely. No MPI calls.
 *
 * Reading (policy, layouts, profiles): only a regular file of bounded size
 * is read. A FIFO would block the open (and MPI_Init on every rank), a
 * device never ends, a directory is not text: they are refused by name.
 *
 * Writing (stats, trace, profiles, checkpoints): never through an existing
 * path. The data goes to a new temp file in the same directory, created
 * O_EXCL (so a planted symlink is not followed) with mode 0600, and replaces
 * the path by rename(2).
 */
#ifndef NF_FILE_H
#define NF_FILE_H

#include <stdio.h>

#include "nfcoll.h"

/* Read all of path, a regular file of at most max bytes, into a new
 * NUL-terminated buffer (*text, free() it; *len excludes the NUL). Opened
 * O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC, so nothing blocks or becomes a
 * terminal; checked with stat before and fstat after the open. Returns
 * NF_ERR_IO (cannot open or read, or not a regular file), NF_ERR_CAPACITY
 * (larger than max) or NF_ERR_NO_MEMORY; outputs are set only on success.
 * What was wrong, e.g. "not a regular file (a FIFO)", goes to why (why_len
 * bytes) for the caller to report with the path; with why NULL it is
 * logged as "PATH: WHAT". */
nf_status_t nf_file_read_all(const char *path, size_t max, char **text, size_t *len,
                             char *why, size_t why_len);

/* The checks of nf_file_read_all without the reading, for a reader that
 * streams (nfcoll_replay's traces): *fd (close it) of path, a regular file
 * of at most max bytes when opened (*size), opened the same way. It may
 * still grow: the reader bounds what it keeps, not the file. */
nf_status_t nf_file_open(const char *path, size_t max, int *fd, size_t *size, char *why,
                         size_t why_len);

typedef struct nf_wfile {
    FILE *fp;
    char tmp[4096];  /* the temp file while it is not yet renamed */
    char path[4096];
    int published;   /* renamed already (streams: nf_wfile_publish) */
} nf_wfile_t;

/* Create the temp file for path. NF_ERR_IO (logged, with errno) when the
 * directory does not take it, NF_ERR_INVALID for a path too long. */
nf_status_t nf_wfile_open(nf_wfile_t *f, const char *path);

/* Rename now and keep writing (a trace that must exist while the run
 * goes on); the data already written stays. */
nf_status_t nf_wfile_publish(nf_wfile_t *f);

/* Flush, fsync, close and (if not yet) rename into place. On a failure
 * the temp file is removed and the old file at path, if any, stays. */
nf_status_t nf_wfile_commit(nf_wfile_t *f);

/* Close and remove what was written (nothing replaces path). */
void nf_wfile_abort(nf_wfile_t *f);

#endif
