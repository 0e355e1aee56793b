/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading NFCOLL_TRACE files (trace_read.c), the format of nf_tracefmt.h:
 * one record per admitted call, or per segment of a fused call. Errors are
 * printed as "file:line: message" on stderr by the function that finds
 * them. No MPI.
 */
#ifndef NF_TRACE_READ_H
#define NF_TRACE_READ_H

#include <stdint.h>
#include <stdio.h>

#include "nfcoll.h"
#include "nf_types.h"

/* One record. Strings point into the reader's line and are valid until the
 * next trace_read_next. */
typedef struct trace_rec {
    int rank;
    uint64_t call;       /* the communicator's call index */
    const char *comm;    /* "" for an unnamed communicator ('-') */
    int comm_size;
    nf_dtype_t dt;
    nf_opkind_t op;
    uint64_t bytes;      /* of the call, or of the segment */
    nf_route_t route;    /* admission's decision */
    const char *rule;    /* the rule that decided, as the trace names it */
    const char *region;  /* NULL for an unbound buffer or gap ('-') */
    uint64_t offset, elements;
    nf_route_t ran;      /* what the call or segment ran on */
    const char *health;  /* the health signal that cooled it down, "reentry", or NULL */
    const char *why;     /* v4: admission's reason (nf_decide_why_name[:figures]); NULL in v3 */
    const char *fallback; /* v4: the runner's fallback, or NULL */
} trace_rec_t;

typedef struct trace_reader {
    const char *path;
    FILE *fp;
    char *line;          /* TR_LINE_MAX + 1 bytes, once a line was read */
    long lineno;
    int version;         /* of the header: 3 or 4 */
} trace_reader_t;

/* Open path and check its header. 0, or -1 (said why). */
int trace_read_open(trace_reader_t *r, const char *path);
/* 1 with *rec set, 0 at the end, -1 on a malformed line (said why). */
int trace_read_next(trace_reader_t *r, trace_rec_t *rec);
void trace_read_close(trace_reader_t *r);

#endif
