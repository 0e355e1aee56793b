/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A trace's records gathered into calls (trace_calls.c): one record, or
 * the segments of a fused call, each handed whole to a callback; the ranks
 * read, across the traces. No MPI.
 */
#ifndef NF_TRACE_CALLS_H
#define NF_TRACE_CALLS_H

#include "trace_read.h"

typedef struct trace_rank {
    int rank, file;            /* the first trace it was read from */
} trace_rank_t;

/* A traced record of a call: the call, or one of its segments. */
typedef struct trace_seg {
    uint64_t bytes, elements, offset;
    nf_route_t route, ran;     /* as traced */
    char *region;              /* NULL for an unbound buffer or gap */
} trace_seg_t;

/* One call: one record, or the segments of a fused call. */
typedef struct trace_call {
    int used, rank, comm_size;
    uint64_t seq;              /* when it was opened: the oldest goes first */
    char *comm;
    uint64_t call;
    nf_dtype_t dt;
    nf_opkind_t op;
    trace_seg_t *seg;
    size_t n, cap;
} trace_call_t;

#define TRACE_OPEN 64 /* calls gathered at once: one per communicator in use */

typedef struct trace_calls {
    void (*fn)(void *arg, const trace_call_t *c); /* each call, once complete */
    void *arg;
    trace_rank_t *rank;        /* an open-addressed set */
    size_t nrank, caprank;
    uint64_t records, seq;
    trace_call_t open[TRACE_OPEN];
} trace_calls_t;

/* Read files[file] into calls. 0 when the whole trace was read, -1 (said
 * why); a rank read from two traces is said once per rank and file. */
int trace_calls_read(trace_calls_t *tc, char **files, int file);
/* Hand every call still gathered to the callback. */
void trace_calls_flush(trace_calls_t *tc);
void trace_calls_free(trace_calls_t *tc);

/* realloc, or exit(1) with "nfcoll_replay: out of memory": the replay's
 * one allocator (its modules keep nothing worth a partial report). */
void *trace_xrealloc(void *p, size_t n);

#endif
