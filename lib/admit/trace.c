/* SPDX-License-Identifier: BSD-3-Clause */
/* The admission trace (nf_trace.h). Buffered, with a bound on what a crash
 * can lose: the stdio buffer is 64 KiB, and a record written a second or
 * more after the last flush flushes. Only whole lines are written, so a
 * killed run leaves a trace that ends at a line. The clock is
 * CLOCK_MONOTONIC_COARSE, read from the vDSO: no system call per call; a
 * write(2) at most once a second or per 64 KiB. */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nf_coll.h"
#include "nf_file.h"
#include "nf_log.h"
#include "nf_trace.h"
#include "nf_tracefmt.h"
#include "nf_util.h"

#define NF_TRACE_BUF (64u << 10) /* bytes a crash may lose, at most */
#define NF_TRACE_PERIOD 1        /* seconds: older records reach the file */

static nf_wfile_t nf_trace_f;
static char *nf_trace_buf; /* the stream's buffer: freed after fclose */
static struct timespec nf_trace_flushed;
static size_t nf_trace_pending; /* bytes in the buffer: whole lines */
static int nf_trace_open_;
static pthread_mutex_t nf_trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void nf_trace_clock(struct timespec *t)
{
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, t) != 0)
        clock_gettime(CLOCK_MONOTONIC, t);
}

static void nf_trace_flush(void)
{
    fflush(nf_trace_f.fp);
    nf_trace_pending = 0;
    nf_trace_clock(&nf_trace_flushed);
}

/* With the lock held. A line that would not fit in what is left of the
 * buffer flushes it first: stdio would otherwise write part of it. */
static void nf_trace_put(const char *line, size_t len)
{
    if (nf_trace_pending + len > NF_TRACE_BUF)
        nf_trace_flush();
    fwrite(line, 1, len, nf_trace_f.fp);
    nf_trace_pending += len;
    struct timespec now;
    nf_trace_clock(&now);
    if ((long long)(now.tv_sec - nf_trace_flushed.tv_sec) * 1000000000LL +
            (now.tv_nsec - nf_trace_flushed.tv_nsec) >= NF_TRACE_PERIOD * 1000000000LL)
        nf_trace_flush();
}

/* A record's region, offset, elements, the route it ran on and why. */
typedef struct nf_trace_seg {
    const char *region;
    uint64_t offset, elements;
    nf_route_t ran;
    const char *health;
    const char *why;
    int fallback;
} nf_trace_seg_t;

/* The why column: the reason's name, a profile entry's figures after it
 * (int4's cosine only where the entry has it: a v3 profile's). */
static const char *nf_trace_why(const nf_decide_reason_t *w, char *buf, size_t n)
{
    char b[48], t[48], i4[48];
    const char *name = nf_decide_why_name(w->why);
    if (w->pe == NULL)
        return name;
    if (w->why == NF_WHY_STALE)
        snprintf(buf, n, "%s:elements=%llu", name, (unsigned long long)w->pe->elements);
    else
        snprintf(buf, n, "%s:cos_binary=%s,cos_ternary=%s%s%s", name,
                 nf_format_fixed4(b, sizeof(b), w->pe->cos_binary),
                 nf_format_fixed4(t, sizeof(t), w->pe->cos_ternary),
                 isnan(w->pe->cos_int[0]) ? "" : ",cos_int4=",
                 isnan(w->pe->cos_int[0]) ? "" : nf_format_fixed4(i4, sizeof(i4), w->pe->cos_int[0]));
    return buf;
}

static int nf_trace_line(char *buf, size_t n, int rank, const nf_policy_query_t *q,
                         nf_route_t route, const nf_policy_action_t *a, const nf_trace_seg_t *g)
{
    return snprintf(buf, n, NF_TRACE_LINE, rank,
                    (unsigned long long)q->call,
                    q->comm_name && q->comm_name[0] ? q->comm_name : "-", q->comm_size,
                    nf_dtype_name(q->datatype), nf_opkind_name(q->op),
                    (unsigned long long)q->bytes, nf_route_name(route), a->rule,
                    a->file[0] ? a->file : "-", a->line, g->region != NULL ? g->region : "-",
                    (unsigned long long)g->offset, (unsigned long long)g->elements,
                    nf_route_name(g->ran), g->health != NULL ? g->health : "-", g->why,
                    g->fallback != NF_FALLBACK_NONE ? nf_fallback_name((nf_fallback_t)g->fallback) : "-");
}

void nf_trace_open(const char *path, int rank)
{
    char name[4096];
    const char *r = strstr(path, "%r");
    if (r != NULL)
        snprintf(name, sizeof(name), "%.*s%d%s", (int)(r - path), path, rank, r + 2);
    else
        snprintf(name, sizeof(name), "%s.%d", path, rank);
    if (nf_wfile_open(&nf_trace_f, name) != NF_OK || nf_wfile_publish(&nf_trace_f) != NF_OK) {
        if (nf_trace_f.fp != NULL)
            nf_wfile_abort(&nf_trace_f);
        nf_log_warn("cannot create NFCOLL_TRACE file %s; no trace is written", name);
        return;
    }
    /* Our own buffer: glibc ignores the size given with a NULL one. */
    nf_trace_buf = malloc(NF_TRACE_BUF);
    if (nf_trace_buf == NULL || setvbuf(nf_trace_f.fp, nf_trace_buf, _IOFBF, NF_TRACE_BUF) != 0) {
        nf_wfile_abort(&nf_trace_f);
        free(nf_trace_buf);
        nf_trace_buf = NULL;
        nf_log_warn("no memory for the NFCOLL_TRACE buffer; no trace is written");
        return;
    }
    fputs(NF_TRACE_HEADER, nf_trace_f.fp);
    nf_trace_flush(); /* a run that dies at once still leaves a valid trace */
    nf_trace_open_ = 1;
}

int nf_trace_on(void) { return nf_trace_open_; }

void nf_trace_record(int rank, const nf_policy_query_t *q, nf_route_t route,
                     const nf_policy_action_t *a, const char *region, uint64_t offset,
                     uint64_t elements, nf_route_t ran, const nf_trace_why_t *why)
{
    char small[512], *line = small, wb[96];
    nf_trace_seg_t g = {region, offset, elements, ran, why->health,
                        nf_trace_why(&why->reason, wb, sizeof(wb)), why->fallback};
    int n = nf_trace_line(small, sizeof(small), rank, q, route, a, &g);
    if (n >= (int)sizeof(small) && (line = malloc((size_t)n + 1)) != NULL)
        nf_trace_line(line, (size_t)n + 1, rank, q, route, a, &g); /* very long names */
    if (n < 0 || line == NULL)
        return;
    pthread_mutex_lock(&nf_trace_lock);
    if (nf_trace_open_)
        nf_trace_put(line, (size_t)n);
    pthread_mutex_unlock(&nf_trace_lock);
    if (line != small)
        free(line);
}

void nf_trace_close(void)
{
    pthread_mutex_lock(&nf_trace_lock);
    if (nf_trace_open_ && nf_wfile_commit(&nf_trace_f) != NF_OK)
        nf_log_warn("writing the NFCOLL_TRACE file failed");
    nf_trace_open_ = 0;
    free(nf_trace_buf); /* after the fclose in nf_wfile_commit */
    nf_trace_buf = NULL;
    pthread_mutex_unlock(&nf_trace_lock);
}
