/*
 * nfcoll_replay: replay NFCOLL_TRACE files offline under a policy, without
 * MPI: the decisions per rule and route, and per route the calls and
 * traffic NFCOLL_STATS would have counted. docs/design.md, "Observability".
 *
 * The policy matcher, the traffic model and the count lanes are the
 * library's own functions. Admission and the runner need MPI, so the steps
 * of their decisions that a trace can replay are mirrored here, each naming
 * the function it mirrors: a change there must be made here too.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_kernels.h"
#include "nf_layout.h"
#include "nf_policy.h"
#include "nf_profile.h"
#include "nf_settings.h"
#include "nf_traffic.h"
#include "trace_read.h"

enum { EXIT_OK = 0, EXIT_PROBLEM = 1, EXIT_USAGE = 2 };

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: nfcoll_replay --policy FILE [--profile FILE] [--json] TRACE...\n"
            "\n"
            "Replay libnfcoll traces (NFCOLL_TRACE, one file per rank) under an admission\n"
            "policy, without MPI: decisions per rule and route, and per route the calls,\n"
            "bytes and traffic (upstream, total, %% of an FP32 ring allreduce) that\n"
            "NFCOLL_STATS would count, summed over the traces. Under the policy a trace was\n"
            "recorded with, the route counters are that run's; under another, what the\n"
            "same calls would have cost.\n"
            "\n"
            "  -p, --policy FILE   the policy to replay under (see nfcoll-policy(5))\n"
            "  -P, --profile FILE  the calibration profile route = auto reads (default:\n"
            "                      the policy's `profile`)\n"
            "  -j, --json          JSON on stdout: ranks, routes (the keys of the stats\n"
            "                      JSON's \"routes\"), rules\n"
            "  -h, --help          this text\n");
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) {
        fprintf(stderr, "nfcoll_replay: out of memory\n");
        exit(EXIT_PROBLEM);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

/* ---- what a replay counts ---- */

typedef struct rp_route {
    uint64_t calls, bytes, upstream, total, ring;
} rp_route_t;

typedef struct rp_rule {
    const char *name, *file;   /* the policy's strings */
    int line, index;
    uint64_t decisions[NF_ROUTE_COUNT], bytes;
} rp_rule_t;

typedef struct rp_rank {
    int rank, file;            /* the first trace it was read from */
} rp_rank_t;

/* A segment of a call: a traced record, or a part of a layout's cut. */
typedef struct rp_seg {
    uint64_t bytes, elements, offset;
    nf_route_t route, ran;     /* as traced; NF_ROUTE_COUNT for a layout's part */
    const char *region;        /* NULL for an unbound buffer or gap */
    char *own;                 /* a traced region name (region points to it) */
    nf_policy_action_t act;    /* the replay's match */
    nf_route_t want;           /* and the route it gives (route = auto resolved) */
} rp_seg_t;

/* One call: one record, or the segments of a fused call. */
typedef struct rp_call {
    int used, rank, comm_size;
    uint64_t seq;              /* when it was opened: the oldest goes first */
    char *comm;
    uint64_t call;
    nf_dtype_t dt;
    nf_opkind_t op;
    rp_seg_t *seg;
    size_t n, cap;
} rp_call_t;

#define RP_OPEN 64 /* calls gathered at once: one per communicator in use */

typedef struct replay {
    const nf_policy_t *pol;
    const nf_profile_t *prof;  /* for route = auto; may be NULL */
    const nf_layout_t *layout; /* the policy's `regions`; may be NULL */
    int calibrate;             /* a calibration run: float sums take fp32 */
    unsigned count_bits;
    rp_seg_t *cut;             /* a layout's cut of the call being replayed */
    size_t cap_cut;
    rp_route_t route[NF_ROUTE_COUNT];
    rp_rule_t *rule;
    size_t nrule, caprule;
    rp_rank_t *rank;
    size_t nrank, caprank;
    uint64_t records, calls, seq;
    rp_call_t open[RP_OPEN];
} replay_t;

/* nf_stats_count (lib/core/stats.c), with the communicator's k. */
static void rp_count(replay_t *rp, nf_route_t ran, uint64_t bytes, int comm_size)
{
    unsigned n = (unsigned)comm_size;
    nf_traffic_t t;
    nf_traffic_model(ran, bytes, n, nf_count_planes(n), &t);
    rp_route_t *c = &rp->route[ran];
    c->calls++, c->bytes += bytes, c->upstream += t.upstream, c->total += t.total;
    c->ring += t.ring;
}

static void rp_decided(replay_t *rp, const nf_policy_action_t *a, nf_route_t route,
                       uint64_t bytes)
{
    rp_rule_t *r = NULL;
    for (size_t i = 0; i < rp->nrule && r == NULL; i++)
        if (strcmp(rp->rule[i].name, a->rule) == 0)
            r = &rp->rule[i];
    if (r == NULL) {
        if (rp->nrule == rp->caprule) {
            rp->caprule = rp->caprule ? 2 * rp->caprule : 16;
            rp->rule = xrealloc(rp->rule, rp->caprule * sizeof(*rp->rule));
        }
        r = &rp->rule[rp->nrule++];
        *r = (rp_rule_t){.name = a->rule, .file = a->file, .line = a->line, .index = a->index};
    }
    r->decisions[route]++;
    r->bytes += bytes;
}

/* ---- the decisions, as admission and the runner make them ---- */

/* nf_unfit and nf_run_float (lib/core/run.c): fp32 and the low-bit routes
 * take sums of 4-byte floats, MPI_FLOAT or a 4-byte REAL. */
static int rp_fits(const rp_call_t *c, uint64_t bytes, uint64_t elements)
{
    return c->op == NF_OP_SUM && (c->dt == NF_DT_FLOAT || c->dt == NF_DT_REAL) &&
           bytes == elements * sizeof(float);
}

/* nf_adm_auto and nf_calib_name (lib/admit): route = auto takes the
 * profile's route for the segment (a region by name, anything else as
 * buffer:BYTES), fp32 where the profile has none. */
static nf_route_t rp_auto(const replay_t *rp, const nf_policy_action_t *a, const char *region,
                          uint64_t elements)
{
    char buf[40];
    if (!a->route_auto)
        return a->route;
    if (region == NULL)
        snprintf(buf, sizeof(buf), "buffer:%llu",
                 (unsigned long long)(elements * sizeof(float)));
    const nf_profile_entry_t *e = nf_profile_find(rp->prof, region != NULL ? region : buf);
    return e != NULL ? e->route : NF_ROUTE_FP32;
}

/* nf_adm_comm_check (lib/admit/admission.c): fewer than 2 ranks keep a call
 * on pmpi. Ranks that disagreed on the policy do not show in a trace. */
static nf_route_t rp_comm_check(nf_route_t route, int comm_size)
{
    return route != NF_ROUTE_PMPI && comm_size < 2 ? NF_ROUTE_PMPI : route;
}

/* nf_lanes_check (lib/core/run.c): a low-bit route on a communicator whose
 * counts NFCOLL_COUNT_BITS cannot hold runs fp32. */
static nf_route_t rp_lanes(const replay_t *rp, nf_route_t route, int comm_size)
{
    if ((route == NF_ROUTE_BINARY || route == NF_ROUTE_TERNARY) &&
        nf_count_planes((unsigned)comm_size) > rp->count_bits)
        return NF_ROUTE_FP32;
    return route;
}

/* nf_run_plan (lib/core/run.c): what a whole call sent to route runs, as
 * far as the call alone tells (not NaN, resources). */
static nf_route_t rp_ran_whole(const replay_t *rp, const rp_call_t *c, nf_route_t route,
                               uint64_t bytes, uint64_t elements)
{
    if (route == NF_ROUTE_PMPI || !rp_fits(c, bytes, elements))
        return NF_ROUTE_PMPI;
    if (elements == 0) /* counted on its route, nothing moves */
        return route;
    return rp_lanes(rp, route, c->comm_size);
}

static int rp_traced_fused(const rp_call_t *c)
{
    return c->n > 1 || c->seg[0].region != NULL || c->seg[0].offset > 0;
}

/* nf_admit_decide, a call run whole: the trace shows the whole call's route
 * (after the communicator check), the runner takes route = auto's
 * choice. Where the replay sends the call where the run did, it ran what
 * it ran then (NaN, resources); otherwise what the call tells. */
static void rp_whole(replay_t *rp, const rp_call_t *c, const nf_policy_action_t *a,
                     uint64_t bytes, uint64_t elements, int calibrate)
{
    nf_route_t route = rp_comm_check(calibrate ? NF_ROUTE_FP32 : a->route, c->comm_size);
    nf_route_t sent = route, ran;
    if (route != NF_ROUTE_PMPI && !calibrate)
        sent = rp_auto(rp, a, NULL, elements);
    const rp_seg_t *t = &c->seg[0];
    if (!rp_traced_fused(c) && (t->ran == sent || (t->route == route && !a->route_auto)))
        ran = t->ran;
    else
        ran = rp_ran_whole(rp, c, sent, bytes, elements);
    rp_decided(rp, a, sent, bytes);
    rp_count(rp, ran, bytes, c->comm_size);
}

/* nf_run_plan and nf_seg_stats (lib/core/run.c): inside a fused call a pmpi
 * segment runs fp32 (a calibration run: every segment), each segment is
 * counted on what it ran; the trace shows those routes. A traced call whose
 * every segment ran pmpi had no shared buffer: it ran whole on PMPI,
 * counted once. */
static void rp_segments(replay_t *rp, const rp_call_t *c, const rp_seg_t *seg, size_t n,
                        uint64_t bytes, int calibrate)
{
    int whole_pmpi = 1;
    for (size_t s = 0; s < n; s++)
        whole_pmpi &= seg[s].ran == NF_ROUTE_PMPI;
    for (size_t s = 0; s < n; s++) {
        const rp_seg_t *g = &seg[s];
        nf_route_t sent = calibrate || g->want == NF_ROUTE_PMPI ? NF_ROUTE_FP32 : g->want;
        nf_route_t r = rp_lanes(rp, sent, c->comm_size);
        int same = g->route == r || g->route == g->want;
        rp_decided(rp, &g->act, sent, g->bytes);
        if (!whole_pmpi)
            rp_count(rp, same ? g->ran : r, g->bytes, c->comm_size);
    }
    if (whole_pmpi)
        rp_count(rp, NF_ROUTE_PMPI, bytes, c->comm_size);
}

/* nf_plan_match and nf_adm_auto (lib/admit): each segment matched as a call
 * of its own. 0 when every segment says pmpi: the call runs whole on pmpi. */
static int rp_match_segments(replay_t *rp, rp_seg_t *seg, size_t n, const nf_policy_query_t *q)
{
    int any = 0;
    for (size_t s = 0; s < n; s++) {
        rp_seg_t *g = &seg[s];
        nf_policy_query_t sq = *q;
        sq.region = g->region, sq.bytes = g->elements * sizeof(float);
        nf_policy_match(rp->pol, &sq, &g->act);
        g->want = g->act.route_auto ? rp_auto(rp, &g->act, g->region, g->elements) : g->act.route;
        any |= g->want != NF_ROUTE_PMPI;
    }
    return any;
}

static void rp_cut_add(replay_t *rp, size_t *n, uint64_t off, uint64_t m, const char *name)
{
    if (*n == rp->cap_cut) {
        rp->cap_cut = rp->cap_cut ? 2 * rp->cap_cut : 16;
        rp->cut = xrealloc(rp->cut, rp->cap_cut * sizeof(*rp->cut));
    }
    rp->cut[(*n)++] = (rp_seg_t){.bytes = m * sizeof(float), .elements = m, .offset = off,
                                 .route = NF_ROUTE_COUNT, .ran = NF_ROUTE_COUNT, .region = name};
}

/* nf_adm_cut_layout and nf_plan_cut_layout (lib/admit): the layout's
 * regions for a call of this size, with the gaps between them. */
static size_t rp_cut_layout(replay_t *rp, uint64_t bytes, uint64_t m)
{
    const nf_layout_entry_t *e;
    size_t k = nf_layout_find(rp->layout, bytes, &e), n = 0;
    uint64_t at = 0;
    if (k == 0)
        return 0;
    for (size_t i = 0; i < k; i++) {
        if (e[i].off < at || e[i].count == 0 || e[i].off + e[i].count > m)
            continue;
        if (e[i].off > at)
            rp_cut_add(rp, &n, at, e[i].off - at, NULL);
        rp_cut_add(rp, &n, e[i].off, e[i].count, e[i].name);
        at = e[i].off + e[i].count;
    }
    if (at < m)
        rp_cut_add(rp, &n, at, m - at, NULL);
    return n;
}

/* nf_adm_fuse: a float sum is cut where the trace shows it cut (bound
 * regions, or the recording policy's layout), else by the replay policy's
 * layout for its size. 0 when it is not cut. */
static size_t rp_cut(replay_t *rp, rp_call_t *c, uint64_t bytes, uint64_t elements,
                     rp_seg_t **seg)
{
    if (rp_traced_fused(c)) {
        *seg = c->seg;
        return c->n;
    }
    size_t n = rp_cut_layout(rp, bytes, elements); /* may move rp->cut */
    *seg = rp->cut;
    return n;
}

/* nf_admit_decide: the whole call is matched first (region NULL); a float
 * sum is cut unless that match says `segment = buffer`, and runs fused
 * unless the communicator keeps it on pmpi; a cut call whose every segment
 * says pmpi runs whole on pmpi. A calibration run sends every float sum to
 * fp32. */
static void rp_replay(replay_t *rp, rp_call_t *c)
{
    uint64_t bytes = 0, elements = 0;
    for (size_t s = 0; s < c->n; s++)
        bytes += c->seg[s].bytes, elements += c->seg[s].elements;
    nf_policy_query_t q = {.region = NULL, .comm_name = c->comm, .comm_size = c->comm_size,
                           .datatype = c->dt, .op = c->op, .bytes = bytes, .call = c->call};
    nf_policy_action_t whole;
    nf_policy_match(rp->pol, &q, &whole);
    rp->calls++;
    int float_sum = rp_fits(c, bytes, elements) && elements > 0;
    int calibrate = rp->calibrate && float_sum;
    rp_seg_t *seg = NULL;
    size_t n = float_sum && whole.segment != NF_POLICY_SEGMENT_BUFFER
                   ? rp_cut(rp, c, bytes, elements, &seg) : 0;
    int any = n > 0 && rp_match_segments(rp, seg, n, &q);
    if (any && rp_comm_check(NF_ROUTE_FP32, c->comm_size) != NF_ROUTE_PMPI) {
        rp_segments(rp, c, seg, n, bytes, calibrate);
        return;
    }
    if (n > 0 && !any) { /* cut, and every segment says pmpi: whole on pmpi */
        whole.route = NF_ROUTE_PMPI;
        whole.route_auto = 0;
    }
    rp_whole(rp, c, &whole, bytes, elements, calibrate);
}

/* ---- gathering a call's records ---- */

static void rp_seg_add(rp_call_t *c, const trace_rec_t *r)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->seg = xrealloc(c->seg, c->cap * sizeof(*c->seg));
    }
    rp_seg_t *g = &c->seg[c->n++];
    *g = (rp_seg_t){.bytes = r->bytes, .elements = r->elements, .offset = r->offset,
                    .route = r->route, .ran = r->ran,
                    .own = r->region != NULL ? xstrdup(r->region) : NULL};
    g->region = g->own;
}

static void rp_flush(replay_t *rp, rp_call_t *c)
{
    if (!c->used)
        return;
    rp_replay(rp, c);
    for (size_t s = 0; s < c->n; s++)
        free(c->seg[s].own);
    free(c->comm);
    c->n = 0, c->comm = NULL, c->used = 0;
}

static void rp_flush_all(replay_t *rp)
{
    for (int i = 0; i < RP_OPEN; i++)
        rp_flush(rp, &rp->open[i]);
}

/* The call gathered on r's communicator, or a free place (the oldest call
 * is replayed to make one). */
static rp_call_t *rp_slot(replay_t *rp, const trace_rec_t *r, int *same_comm)
{
    rp_call_t *free_slot = NULL, *oldest = &rp->open[0];
    for (int i = 0; i < RP_OPEN; i++) {
        rp_call_t *c = &rp->open[i];
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
    rp_flush(rp, oldest);
    return oldest;
}

/* A fused call's segments follow each other from offset 0; calls on one
 * communicator are ordered, so another record there starts the next call. */
static void rp_add(replay_t *rp, const trace_rec_t *r)
{
    int same_comm;
    rp_call_t *c = rp_slot(rp, r, &same_comm);
    rp->records++;
    if (same_comm) {
        const rp_seg_t *last = &c->seg[c->n - 1];
        if (r->offset > 0 && r->call == c->call && r->offset == last->offset + last->elements &&
            r->dt == c->dt && r->op == c->op) {
            rp_seg_add(c, r);
            return;
        }
        rp_flush(rp, c);
    }
    rp_seg_t *seg = c->seg; /* a slot keeps its array */
    size_t cap = c->cap;
    *c = (rp_call_t){.used = 1, .rank = r->rank, .comm_size = r->comm_size, .seq = rp->seq++,
                     .comm = xstrdup(r->comm), .call = r->call, .dt = r->dt, .op = r->op,
                     .seg = seg, .cap = cap};
    rp_seg_add(c, r);
}

/* The place of rank in the open-addressed set (rp->caprank a power of 2):
 * its entry, or the empty one where it goes. */
static rp_rank_t *rp_rank_place(const replay_t *rp, int rank)
{
    size_t mask = rp->caprank - 1, i = ((size_t)(unsigned)rank * 0x9e3779b97f4a7c15u) & mask;
    while (rp->rank[i].rank >= 0 && rp->rank[i].rank != rank)
        i = (i + 1) & mask;
    return &rp->rank[i];
}

/* Twice the room, the ranks placed again. */
static void rp_rank_grow(replay_t *rp)
{
    rp_rank_t *old = rp->rank;
    size_t n = rp->caprank;
    rp->caprank = n ? 2 * n : 64;
    rp->rank = xrealloc(NULL, rp->caprank * sizeof(*rp->rank));
    for (size_t i = 0; i < rp->caprank; i++)
        rp->rank[i].rank = -1;
    for (size_t i = 0; i < n; i++)
        if (old[i].rank >= 0)
            *rp_rank_place(rp, old[i].rank) = old[i];
    free(old);
}

/* Distinct ranks, a set (a file may hold many: time stays linear); a rank
 * read from two traces counts twice: say so. */
static void rp_note_rank(replay_t *rp, int rank, int file, char **files)
{
    if (2 * (rp->nrank + 1) > rp->caprank)
        rp_rank_grow(rp);
    rp_rank_t *k = rp_rank_place(rp, rank);
    if (k->rank == rank) {
        if (k->file != file)
            fprintf(stderr, "nfcoll_replay: warning: rank %d is in %s and in %s: its calls "
                    "count twice\n", rank, files[k->file], files[file]);
        return;
    }
    *k = (rp_rank_t){.rank = rank, .file = file};
    rp->nrank++;
}

/* 0 when the whole trace was read. */
static int rp_read(replay_t *rp, char **files, int file)
{
    trace_reader_t tr;
    trace_rec_t r;
    int got, last_rank = -1;
    if (trace_read_open(&tr, files[file]) != 0)
        return -1;
    while ((got = trace_read_next(&tr, &r)) > 0) {
        if (r.rank != last_rank)
            rp_note_rank(rp, r.rank, file, files);
        last_rank = r.rank;
        rp_add(rp, &r);
    }
    trace_read_close(&tr);
    rp_flush_all(rp);
    return got;
}

static void rp_free(replay_t *rp)
{
    for (int i = 0; i < RP_OPEN; i++)
        free(rp->open[i].seg);
    free(rp->rule);
    free(rp->rank);
    free(rp->cut);
}

/* ---- output ---- */

typedef struct rp_opts {
    const char *policy;
    const char *profile; /* the one loaded, or NULL */
    int json, ntraces;
} rp_opts_t;

/* Rules in file order, then [default], then the built-in pmpi. */
static int rp_rule_order(const void *a, const void *b)
{
    const rp_rule_t *x = a, *y = b;
    int kx = x->index >= 0 ? x->index : strcmp(x->name, "default") == 0 ? -2 : -1;
    int ky = y->index >= 0 ? y->index : strcmp(y->name, "default") == 0 ? -2 : -1;
    unsigned ux = (unsigned)kx, uy = (unsigned)ky; /* negatives sort last */
    return ux < uy ? -1 : ux > uy;
}

/* A rule's decisions, and where it is ("-" for the built-in pmpi). */
static uint64_t rp_rule_sum(const rp_rule_t *r, char *where, size_t len)
{
    uint64_t n = 0;
    for (int k = 0; k < NF_ROUTE_COUNT; k++)
        n += r->decisions[k];
    if (r->file[0] != '\0')
        snprintf(where, len, "%s:%d", r->file, r->line);
    else
        snprintf(where, len, "-");
    return n;
}

static double rp_pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* The columns of nf_stats_table (lib/core/stats.c), and their sum. */
static void rp_route_line(FILE *fp, const char *name, const rp_route_t *o)
{
    fprintf(fp, "%-8s %10llu %14llu %14llu %7.2f%% %14llu %7.2f%%\n", name,
            (unsigned long long)o->calls, (unsigned long long)o->bytes,
            (unsigned long long)o->upstream, rp_pct(2 * o->upstream, o->ring),
            (unsigned long long)o->total, rp_pct(o->total, o->ring));
}

static void rp_text(FILE *fp, const replay_t *rp, const rp_opts_t *o)
{
    rp_route_t all = {0, 0, 0, 0, 0};
    fprintf(fp, "nfcoll_replay: %zu rank%s from %d trace%s, %llu records of %llu calls, under %s%s%s; "
            "%% of what an FP32 ring allreduce would move\n", rp->nrank,
            rp->nrank == 1 ? "" : "s", o->ntraces, o->ntraces == 1 ? "" : "s",
            (unsigned long long)rp->records, (unsigned long long)rp->calls, o->policy,
            o->profile ? " with profile " : "", o->profile ? o->profile : "");
    fprintf(fp, "%-8s %10s %14s %14s %8s %14s %8s\n", "route", "calls", "bytes", "upstream",
            "%ring", "total", "%ring");
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const rp_route_t *t = &rp->route[r];
        rp_route_line(fp, nf_route_name((nf_route_t)r), t);
        all.calls += t->calls, all.bytes += t->bytes, all.upstream += t->upstream;
        all.total += t->total, all.ring += t->ring;
    }
    rp_route_line(fp, "all", &all);
    fprintf(fp, "\n%-16s %10s %10s %10s %10s %10s %14s  %s\n", "rule", "decisions", "pmpi",
            "fp32", "binary", "ternary", "bytes", "where");
    for (size_t i = 0; i < rp->nrule; i++) {
        const rp_rule_t *u = &rp->rule[i];
        char where[4200];
        uint64_t n = rp_rule_sum(u, where, sizeof(where));
        fprintf(fp, "%-16s %10llu %10llu %10llu %10llu %10llu %14llu  %s\n", u->name,
                (unsigned long long)n, (unsigned long long)u->decisions[NF_ROUTE_PMPI],
                (unsigned long long)u->decisions[NF_ROUTE_FP32],
                (unsigned long long)u->decisions[NF_ROUTE_BINARY],
                (unsigned long long)u->decisions[NF_ROUTE_TERNARY], (unsigned long long)u->bytes,
                where);
    }
}

static void rp_json_str(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(fp, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(fp, "\\u%04x", ch);
        else
            fputc(ch, fp);
    }
    fputc('"', fp);
}

static void rp_json_rule(FILE *fp, const rp_rule_t *u)
{
    char where[4200];
    uint64_t n = rp_rule_sum(u, where, sizeof(where));
    fprintf(fp, "    ");
    rp_json_str(fp, u->name);
    fprintf(fp, ": {\"where\": ");
    rp_json_str(fp, where);
    fprintf(fp, ", \"decisions\": %llu, \"bytes\": %llu, \"routes\": {", (unsigned long long)n,
            (unsigned long long)u->bytes);
    for (int r = 0; r < NF_ROUTE_COUNT; r++)
        fprintf(fp, "%s\"%s\": %llu", r ? ", " : "", nf_route_name((nf_route_t)r),
                (unsigned long long)u->decisions[r]);
    fprintf(fp, "}}");
}

/* "routes" as nf_stats_json (lib/core/stats.c) writes it. */
static void rp_json(FILE *fp, const replay_t *rp, const rp_opts_t *o)
{
    fprintf(fp, "{\n  \"ranks\": %zu,\n  \"traces\": %d,\n  \"calls\": %llu,\n  \"records\": %llu,"
            "\n  \"policy\": ", rp->nrank, o->ntraces, (unsigned long long)rp->calls,
            (unsigned long long)rp->records);
    rp_json_str(fp, o->policy);
    fprintf(fp, ",\n  \"profile\": ");
    if (o->profile != NULL)
        rp_json_str(fp, o->profile);
    else
        fprintf(fp, "null");
    fprintf(fp, ",\n  \"routes\": {");
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const rp_route_t *t = &rp->route[r];
        fprintf(fp, "%s\n    \"%s\": {\"calls\": %llu, \"bytes\": %llu, \"upstream_bytes\": %llu, "
                "\"total_bytes\": %llu, \"fp32_ring_bytes\": %llu}", r ? "," : "",
                nf_route_name((nf_route_t)r), (unsigned long long)t->calls,
                (unsigned long long)t->bytes, (unsigned long long)t->upstream,
                (unsigned long long)t->total, (unsigned long long)t->ring);
    }
    fprintf(fp, "\n  },\n  \"rules\": {");
    for (size_t i = 0; i < rp->nrule; i++) {
        fprintf(fp, "%s\n", i ? "," : "");
        rp_json_rule(fp, &rp->rule[i]);
    }
    fprintf(fp, "%s}\n}\n", rp->nrule ? "\n  " : "");
}

/* ---- main ---- */

/* Parser diagnostics as nfcoll_policy prints them. */
static void rp_diag(const nf_policy_diag_t *d, void *arg)
{
    (void)arg;
    const char *sev = d->severity == NF_POLICY_ERROR ? "error" : "warning";
    if (d->line > 0)
        fprintf(stderr, "%s:%d: %s: %s\n", d->file, d->line, sev, d->message);
    else
        fprintf(stderr, "%s: %s: %s\n", d->file, sev, d->message);
}

static int rp_parse_opts(int argc, char **argv, rp_opts_t *o)
{
    static const struct option opts[] = {{"policy", required_argument, NULL, 'p'},
                                         {"profile", required_argument, NULL, 'P'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "p:P:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'p': o->policy = optarg; break;
        case 'P': o->profile = optarg; break;
        case 'j': o->json = 1; break;
        case 'h': usage(stdout); exit(EXIT_OK);
        default: usage(stderr); return -1;
        }
    }
    if (o->policy == NULL || optind >= argc) {
        fprintf(stderr, "nfcoll_replay: %s\n", o->policy == NULL ? "--policy FILE is required"
                                                                  : "no trace to replay");
        usage(stderr);
        return -1;
    }
    o->ntraces = argc - optind;
    return 0;
}

/* The profile route = auto reads: --profile (an error when it does not
 * load), else the policy's `profile` (libnfcoll then takes fp32 for every
 * auto segment, and so does the replay). 0, or -1 (said why). */
static int rp_load_profile(rp_opts_t *o, const nf_policy_t *pol, nf_profile_t **prof)
{
    const char *path = o->profile != NULL ? o->profile : nf_policy_profile(pol);
    *prof = NULL;
    if (path == NULL || nf_profile_load(path, rp_diag, NULL, prof) == NF_OK) {
        o->profile = path;
        return 0;
    }
    if (o->profile != NULL) {
        fprintf(stderr, "nfcoll_replay: profile %s does not load (see above): nothing "
                "replayed\n", path);
        return -1;
    }
    fprintf(stderr, "nfcoll_replay: warning: the policy's profile %s does not load (see "
            "above): route = auto takes fp32, as libnfcoll would\n", path);
    return 0;
}

/* nf_admit_init (lib/admit/admission.c): a layout that does not load
 * cuts nothing. */
static nf_layout_t *rp_load_layout(const nf_policy_t *pol)
{
    const char *path = nf_policy_regions(pol);
    nf_layout_t *l = NULL;
    if (path != NULL && nf_layout_load(path, rp_diag, NULL, &l) != NF_OK)
        fprintf(stderr, "nfcoll_replay: warning: the policy's region layout %s does not load "
                "(see above): no call is cut by it, as in libnfcoll\n", path);
    return l;
}

int main(int argc, char **argv)
{
    rp_opts_t o = {NULL, NULL, 0, 0};
    nf_policy_t *pol = NULL;
    nf_profile_t *prof = NULL;
    static replay_t rp;
    int rc = EXIT_OK;
    if (rp_parse_opts(argc, argv, &o) != 0)
        return EXIT_USAGE;
    if (nf_policy_load(o.policy, rp_diag, NULL, &pol) != NF_OK) {
        fprintf(stderr, "nfcoll_replay: %s does not load (see above): nothing replayed\n",
                o.policy);
        return EXIT_PROBLEM;
    }
    if (rp_load_profile(&o, pol, &prof) != 0) {
        nf_policy_free(pol);
        return EXIT_PROBLEM;
    }
    const nf_settings_t *set = nf_settings_load();
    nf_layout_t *lay = rp_load_layout(pol);
    rp.pol = pol, rp.prof = prof, rp.layout = lay;
    rp.calibrate = set->calibrate != NULL || nf_policy_calibrate(pol) != NULL;
    rp.count_bits = set->count_bits;
    for (int i = 0; i < o.ntraces; i++)
        if (rp_read(&rp, argv + optind, i) != 0)
            rc = EXIT_PROBLEM;
    if (rc == EXIT_OK) {
        if (rp.nrule > 0)
            qsort(rp.rule, rp.nrule, sizeof(*rp.rule), rp_rule_order);
        (o.json ? rp_json : rp_text)(stdout, &rp, &o);
    } else {
        fprintf(stderr, "nfcoll_replay: a trace could not be read: nothing reported\n");
    }
    rp_free(&rp);
    nf_layout_free(lay);
    nf_profile_free(prof);
    nf_policy_free(pol);
    return rc;
}
