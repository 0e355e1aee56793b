/*
 * Files libnfcoll writes (stats, trace, profiles, checkpoints) are never
 * written through an existing path: the data goes to a new temp file in the
 * same directory, created O_EXCL (so a planted symlink is not followed) with
 * mode 0600, and replaces the path by rename(2). No MPI calls.
 */
#ifndef NF_FILE_H
#define NF_FILE_H

#include <stdio.h>

#include "nfcoll.h"

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
