/* SPDX-License-Identifier: BSD-3-Clause */
/* Gathering a trace's records into calls (trace_calls.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_calls.h"

void *trace_xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) {
        fprintf(stderr, "nfcoll_replay: out of memory\n");
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(trace_xrealloc(NULL, n), s, n);
}


static void tc_seg_add(trace_call_t *c, const trace_rec_t *r)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->seg = trace_xrealloc(c->seg, c->cap * sizeof(*c->seg));
    }
    c->seg[c->n++] = (trace_seg_t){.bytes = r->bytes, .elements = r->elements,
                                .offset = r->offset, .route = r->route, .ran = r->ran,
                                .region = r->region != NULL ? xstrdup(r->region) : NULL};
}

static void tc_flush(trace_calls_t *tc, trace_call_t *c)
{
    if (!c->used)
        return;
    tc->fn(tc->arg, c);
    for (size_t s = 0; s < c->n; s++)
        free(c->seg[s].region);
    free(c->comm);
    c->n = 0, c->comm = NULL, c->used = 0;
}

void trace_calls_flush(trace_calls_t *tc)
{
    for (int i = 0; i < TRACE_OPEN; i++)
        tc_flush(tc, &tc->open[i]);
}

/* The call gathered on r's communicator, or a free place (the oldest call
 * is replayed to make one). */
static trace_call_t *tc_slot(trace_calls_t *tc, const trace_rec_t *r, int *same_comm)
{
    trace_call_t *free_slot = NULL, *oldest = &tc->open[0];
    for (int i = 0; i < TRACE_OPEN; i++) {
        trace_call_t *c = &tc->open[i];
        if (!c->used) {
            free_slot = free_slot ? free_slot : c;
            continue;
        }
        if (c->rank == r->rank && c->comm_size == r->comm_size && strcmp(c->comm, r->comm) == 0) {
            *same_comm = 1;
            return c;
        }
        if (c->seq < oldest->seq)
            oldest = c;
    }
    *same_comm = 0;
    if (free_slot != NULL)
        return free_slot;
    tc_flush(tc, oldest);
    return oldest;
}

/* A fused call's segments follow each other from offset 0; calls on one
 * communicator are ordered, so another record there starts the next call. */
static void tc_add(trace_calls_t *tc, const trace_rec_t *r)
{
    int same_comm;
    trace_call_t *c = tc_slot(tc, r, &same_comm);
    tc->records++;
    if (same_comm) {
        const trace_seg_t *last = &c->seg[c->n - 1];
        if (r->offset > 0 && r->call == c->call && r->offset == last->offset + last->elements &&
            r->dt == c->dt && r->op == c->op) {
            tc_seg_add(c, r);
            return;
        }
        tc_flush(tc, c);
    }
    trace_seg_t *seg = c->seg; /* a slot keeps its array */
    size_t cap = c->cap;
    *c = (trace_call_t){.used = 1, .rank = r->rank, .comm_size = r->comm_size, .seq = tc->seq++,
                     .comm = xstrdup(r->comm), .call = r->call, .dt = r->dt, .op = r->op,
                     .seg = seg, .cap = cap};
    tc_seg_add(c, r);
}

/* The place of rank in the open-addressed set (tc->caprank a power of 2):
 * its entry, or the empty one where it goes. */
static trace_rank_t *tc_rank_place(const trace_calls_t *tc, int rank)
{
    size_t mask = tc->caprank - 1, i = ((size_t)(unsigned)rank * 0x9e3779b97f4a7c15u) & mask;
    while (tc->rank[i].rank >= 0 && tc->rank[i].rank != rank)
        i = (i + 1) & mask;
    return &tc->rank[i];
}

/* Twice the room, the ranks placed again. */
static void tc_rank_grow(trace_calls_t *tc)
{
    trace_rank_t *old = tc->rank;
    size_t n = tc->caprank;
    tc->caprank = n ? 2 * n : 64;
    tc->rank = trace_xrealloc(NULL, tc->caprank * sizeof(*tc->rank));
    for (size_t i = 0; i < tc->caprank; i++)
        tc->rank[i].rank = -1;
    for (size_t i = 0; i < n; i++)
        if (old[i].rank >= 0)
            *tc_rank_place(tc, old[i].rank) = old[i];
    free(old);
}

/* Distinct ranks, a set (a file may hold many: time stays linear); a rank
 * read from two traces counts twice: say so. */
static void tc_note_rank(trace_calls_t *tc, int rank, int file, char **files)
{
    if (2 * (tc->nrank + 1) > tc->caprank)
        tc_rank_grow(tc);
    trace_rank_t *k = tc_rank_place(tc, rank);
    if (k->rank == rank) {
        if (k->file != file)
            fprintf(stderr, "nfcoll_replay: warning: rank %d is in %s and in %s: its calls "
                    "count twice\n", rank, files[k->file], files[file]);
        return;
    }
    *k = (trace_rank_t){.rank = rank, .file = file};
    tc->nrank++;
}

int trace_calls_read(trace_calls_t *tc, char **files, int file)
{
    trace_reader_t tr;
    trace_rec_t r;
    int got, last_rank = -1;
    if (trace_read_open(&tr, files[file]) != 0)
        return -1;
    while ((got = trace_read_next(&tr, &r)) > 0) {
        if (r.rank != last_rank)
            tc_note_rank(tc, r.rank, file, files);
        last_rank = r.rank;
        tc_add(tc, &r);
    }
    trace_read_close(&tr);
    trace_calls_flush(tc);
    return got;
}

void trace_calls_free(trace_calls_t *tc)
{
    for (int i = 0; i < TRACE_OPEN; i++)
        free(tc->open[i].seg);
    free(tc->rank);
}
