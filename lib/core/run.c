/* SPDX-License-Identifier: BSD-3-Clause */
/* The route runner (nf_run.h). Admission has chosen the route; this file
 * checks what only the call can tell (datatype, op, communicator kind,
 * capacity), falls back with a reason, and hands the call to the protocol. */
#include "config.h"

#include <math.h>

#include "nf_coll.h"
#include "nf_ctx.h"
#include "nf_log.h"
#include "nf_regstats.h"
#include "nf_run.h"
#include "nf_stats.h"

void nf_run_pmpi_count(const nf_run_args_t *a, int comm_size)
{
    int tsize = 0;
    if (a->bytes >= 0)
        nf_stats_count(NF_ROUTE_PMPI, (uint64_t)a->bytes, (unsigned)comm_size, 0);
    else if (PMPI_Type_size(a->datatype, &tsize) == MPI_SUCCESS) /* else PMPI says why */
        nf_stats_count(NF_ROUTE_PMPI, (uint64_t)a->count * (uint64_t)tsize,
                       (unsigned)comm_size, 0);
}

nf_status_t nf_run_pmpi(const nf_run_args_t *a, int comm_size)
{
    nf_run_pmpi_count(a, comm_size);
    /* On the user's communicator: MPI has run its error handler already. */
    return nf_mpi_status_raised(PMPI_Allreduce(a->sendbuf, a->recvbuf, a->count, a->datatype,
                                               a->op, a->comm));
}

int nf_run_size(MPI_Comm comm)
{
    int inter = 0, size = 1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
        PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return 1; /* the traffic model's size; PMPI_Allreduce reports a bad comm */
    return size;
}

/* nf_types.h's float and real (MPI_REAL, MPI_REAL4): handle compares; only
 * the Fortran types pay a PMPI_Type_size, since REAL is 8 bytes in an MPI
 * built with -fdefault-real-8 (and a REAL4 an MPI cannot size is no float). */
int nf_run_float(MPI_Datatype dt)
{
    int size = 0;
    if (dt == MPI_FLOAT)
        return 1;
    if (dt != MPI_REAL && dt != MPI_REAL4)
        return 0;
    return PMPI_Type_size(dt, &size) == MPI_SUCCESS && size == (int)sizeof(float);
}

/* Why route cannot take this call, or NF_FALLBACK_NONE if it can: what the
 * call tells (nf_fallback_route), then the communicator. */
static int nf_unfit(const nf_run_args_t *a, nf_comm_t *c, nf_route_t route)
{
    nf_call_facts_t f = {.float_dt = nf_run_float(a->datatype), .sum = a->op == MPI_SUM,
                         .empty = a->count == 0, .lanes_fit = c->lowbit_ok};
    int why;
    if (nf_fallback_route(route, &f, &why) == NF_ROUTE_PMPI)
        return why;
    if (c->is_inter)
        return NF_FALLBACK_COMM;
    if (nf_comm_ready(c) != NF_OK)
        return NF_FALLBACK_RESOURCE;
    return NF_FALLBACK_NONE;
}

/* Region segments keep their residual by name, through its id (a bucket
 * rebuilt at another address keeps it), unbound buffers and gaps by
 * address. */
static nf_residual_t *nf_seg_residual(nf_residual_table_t *t, const float *x,
                                      const nf_seg_t *g, nf_status_t *why)
{
    nf_res_key_t key = {.addr = x + g->off, .name = g->name, .id = g->id};
    nf_residual_t *e = nf_residual_get(t, &key, g->m, why);
    if (e == NULL && *why == NF_OK)
        nf_log_warn_once("no memory for error-feedback residuals; this buffer runs without "
                         "error feedback");
    return e;
}

/* Each segment of a call that runs in the protocol where nf_fallback_route
 * sends it: a pmpi segment of a fused call runs fp32 (exact); low-bit on a
 * communicator whose size the count lanes cannot hold runs fp32 (agreed at
 * setup: the same on every rank), said once and counted. */
static void nf_seg_fallbacks(nf_comm_t *c, nf_seg_t *seg, size_t n)
{
    nf_call_facts_t f = {.seg = 1, .lanes_fit = c->lowbit_ok};
    for (size_t s = 0; s < n; s++) {
        int why;
        seg[s].route = nf_fallback_route(seg[s].route, &f, &why);
        if (why != NF_FALLBACK_CAPACITY) /* none, or a pmpi segment's fp32 */
            continue;
        nf_log_warn_once_root(c->rank == 0, "a communicator of %d ranks needs %u-bit sign "
                              "counts, more than NFCOLL_COUNT_BITS=%u: running fp32", c->size,
                              c->k, nf_ctx.cfg.settings->count_bits);
        nf_stats_fallback((nf_fallback_t)why);
        seg[s].fallback = why;
    }
}

/* The route a segment ran on: its own, or fp32 after a fallback. */
static nf_route_t nf_seg_ran_as(const nf_call_t *call, const nf_seg_t *g)
{
    return call->mismatch || call->capacity || g->nonfinite ? NF_ROUTE_FP32 : g->route;
}

/* Why it ran so, when that is not its route (the count lanes' fp32 was
 * said before the run, in g->fallback). */
static int nf_seg_fallback(const nf_call_t *call, const nf_seg_t *g)
{
    if (g->ran == g->route && g->fallback == NF_FALLBACK_NONE)
        return NF_FALLBACK_NONE;
    return g->nonfinite       ? NF_FALLBACK_NONFINITE
           : call->mismatch   ? NF_FALLBACK_LAYOUT
           : call->capacity   ? NF_FALLBACK_CAPACITY
                              : g->fallback;
}

/* What each segment ran as, for the counters. */
static void nf_seg_stats(const nf_comm_t *c, nf_call_t *call)
{
    if (call->capacity) {
        nf_log_warn_once_root(c->rank == 0, "the aggregation buffer cannot grow to hold a "
                              "call of %zu elements; running fp32", call->m);
        nf_stats_fallback(NF_FALLBACK_CAPACITY);
    }
    if (call->fp32_stuck) {
        nf_log_warn_once_root(c->rank == 0, "the aggregation buffer cannot grow to hold "
                              "larger fp32 chunks; fp32 calls on this communicator run in "
                              "chunks of %zu floats", c->fp32_chunk);
        nf_stats_fallback(NF_FALLBACK_CAPACITY);
    }
    if (call->mismatch) {
        nf_log_warn_once_root(c->rank == 0, "ranks split a call into different segments "
                              "(bound regions differ): running fp32");
        nf_stats_fallback(NF_FALLBACK_LAYOUT);
    }
    for (size_t s = 0; s < call->nseg; s++) {
        nf_seg_t *g = &call->seg[s];
        nf_route_t ran = nf_seg_ran_as(call, g);
        g->ran = ran;
        g->fallback = nf_seg_fallback(call, g);
        if (g->nonfinite) {
            nf_log_info(1, "NaN or Inf in some rank's input: this segment runs fp32");
            nf_stats_fallback(NF_FALLBACK_NONFINITE);
        }
        uint64_t bytes = g->m * sizeof(float);
        uint64_t nsc = nf_traffic_scales(ran, bytes, (uint64_t)(nf_route_intk(ran) > 0 ? g->block
                                                                                  : g->scale_block));
        nf_stats_count_scales(ran, bytes, (unsigned)c->size, c->k, nsc);
        if (g->id != 0) {
            nf_traffic_t t;
            nf_traffic_model_scales(ran, bytes, (unsigned)c->size, c->k, nsc, &t);
            nf_regstats_add(g->id, ran, g->m, t.upstream, t.total, g->fallback);
        }
    }
}

static nf_status_t nf_run_segs(nf_comm_t *c, const nf_run_args_t *a, nf_seg_t *seg,
                               size_t nseg)
{
    nf_call_t call = {
        .x = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf,
        .r = a->recvbuf,
        .m = (size_t)a->count,
        .seg = seg,
        .nseg = nseg,
        .health = a->health,
        .loss = a->loss,
    };
    nf_status_t why = NF_OK;
    nf_seg_fallbacks(c, seg, nseg);
    for (size_t s = 0; s < nseg; s++) {
        nf_status_t w = NF_OK;
        seg[s].res = nf_route_residual(seg[s].route) && seg[s].ef
                         ? nf_seg_residual(&c->resid, call.x, &seg[s], &w)
                         : NULL;
        if (seg[s].res != NULL && seg[s].resid == NF_RESID_RESTART)
            nf_residual_zero(seg[s].res);
        if (seg[s].resid == NF_RESID_CLAIM && seg[s].ef)
            nf_residual_claim(&c->resid, &(nf_res_key_t){.addr = call.x + seg[s].off,
                                                         .name = seg[s].name, .id = seg[s].id},
                              seg[s].m);
        why = why != NF_OK ? why : w;
    }
    /* A residual that NFCOLL_CXL=require refused is this rank's error, but
     * the call is collective: it runs (without that residual) and the
     * error comes after, so no rank waits for this one. */
    nf_status_t st = nf_coll_run(c, &call);
    if (st == NF_OK)
        nf_seg_stats(c, &call);
    if (a->after != NULL)
        *a->after = why;
    else if (st == NF_OK && why != NF_OK)
        st = why;
    if (a->loss_mean != NULL)
        *a->loss_mean = st == NF_OK ? call.loss_mean : NAN;
    return st;
}

/* Settings for what a segment inherits. */
static void nf_seg_defaults(nf_seg_t *g)
{
    const nf_settings_t *s = nf_ctx.cfg.settings;
    if (g->gamma < 0.0)
        g->gamma = s->gamma;
    if (g->ef < 0)
        g->ef = s->ef;
    if (g->ef_decay < 0.0)
        g->ef_decay = s->ef_decay;
    if (g->scale_block < 0)
        g->scale_block = (long)s->scale_block;
}

static void nf_seg_ran(nf_seg_t *seg, size_t nseg, nf_route_t ran, int fallback)
{
    for (size_t s = 0; s < nseg; s++)
        seg[s].ran = ran, seg[s].fallback = fallback;
}

nf_status_t nf_run_plan(nf_comm_t *c, const nf_run_args_t *a, nf_seg_t *seg, size_t nseg)
{
    int whole = nseg == 1 && seg[0].m == (size_t)(a->count > 0 ? a->count : 0);
    nf_route_t route = whole ? seg[0].route : NF_ROUTE_FP32;
    nf_seg_ran(seg, nseg, NF_ROUTE_PMPI, NF_FALLBACK_NONE);
    if ((whole && route == NF_ROUTE_PMPI) || c == NULL || !nf_ctx_ready())
        return nf_run_pmpi(a, c != NULL ? c->size : nf_run_size(a->comm));
    int why = nf_unfit(a, c, route);
    if (why != NF_FALLBACK_NONE) {
        nf_stats_fallback((nf_fallback_t)why);
        nf_seg_ran(seg, nseg, NF_ROUTE_PMPI, why);
        return nf_run_pmpi(a, c->size);
    }
    if (a->count == 0) {
        nf_stats_count(route, 0, (unsigned)c->size, c->k);
        nf_seg_ran(seg, nseg, route, NF_FALLBACK_NONE);
        return NF_OK;
    }
    for (size_t s = 0; s < nseg; s++)
        nf_seg_defaults(&seg[s]);
    return nf_run_segs(c, a, seg, nseg);
}

nf_status_t nf_run_shadow(nf_comm_t *c, nf_residual_table_t *shadow, const float *x, float *r,
                          size_t m, nf_seg_t *seg, size_t nseg)
{
    nf_call_t call = {.x = x, .r = r, .m = m, .seg = seg, .nseg = nseg};
    for (size_t s = 0; s < nseg; s++) {
        nf_seg_defaults(&seg[s]);
        seg[s].fallback = NF_FALLBACK_NONE;
        nf_status_t why; /* a shadow residual refused: that shadow runs without EF */
        seg[s].res = seg[s].ef && c->lowbit_ok && shadow != NULL
                         ? nf_seg_residual(shadow, x, &seg[s], &why)
                         : NULL;
    }
    nf_seg_fallbacks(c, seg, nseg);
    nf_status_t st = nf_coll_run(c, &call);
    for (size_t s = 0; s < nseg; s++)
        seg[s].ran = nf_seg_ran_as(&call, &seg[s]);
    return st;
}

nf_status_t nf_run(nf_comm_t *c, const nf_run_args_t *a, nf_route_t route, int ef, double gamma)
{
    nf_seg_t seg = {.off = 0, .m = a->count > 0 ? (size_t)a->count : 0, .route = route,
                    .gamma = gamma, .ef = ef, .ef_decay = -1.0, .scale_block = -1};
    return nf_run_plan(c, a, &seg, 1);
}
