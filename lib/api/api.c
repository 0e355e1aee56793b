/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Public entry points: argument checks, then down the layers (admission
 * decides, the runner runs). Errors inside are nf_status_t; they become MPI
 * error codes here, once, and go through the communicator's error handler
 * as MPI's own bindings do.
 */
#include "config.h"

#include <math.h>

#include <stdatomic.h>

#include "nf_admit.h"
#include "nf_calib.h"
#include "nf_health.h"
#include "nf_api.h"
#include "nf_checkpoint.h"
#include "nf_ctx.h"
#include "nf_engine.h"
#include "nf_export.h"
#include "nf_placement.h"
#include "nf_region.h"
#include "nf_residual.h"
#include "nf_stats.h"

int nf_api_check(const nf_run_args_t *a)
{
    if (a->count < 0)
        return MPI_ERR_COUNT;
    if (a->comm == MPI_COMM_NULL)
        return MPI_ERR_COMM;
    /* NULL is MPI_BOTTOM, legal with absolute-address derived datatypes. */
    if (a->count > 0 && (a->recvbuf == NULL || a->sendbuf == NULL) && nf_run_float(a->datatype))
        return MPI_ERR_BUFFER;
    if (a->count > 0 && a->sendbuf == a->recvbuf)
        return MPI_ERR_BUFFER; /* aliasing without MPI_IN_PLACE is erroneous in MPI */
    return MPI_SUCCESS;
}

/* The single exit for errors: MPI_ERRORS_RETURN programs get the code,
 * others whatever their handler does (MPI_ERRORS_ARE_FATAL aborts). */
__attribute__((noinline)) int nf_api_raise(MPI_Comm comm, int code)
{
    PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code);
    return code;
}

/* A status as the entry point's MPI code, raised on comm's handler unless
 * it was already. */
static int nf_api_code(MPI_Comm comm, nf_status_t st)
{
    if (st == NF_OK)
        return MPI_SUCCESS;
    return nf_status_raised(st) ? nf_status_to_mpi(st) : nf_api_raise(comm, nf_status_to_mpi(st));
}

/* The last communicator this thread used: an attribute lookup costs more
 * than the rest of an engaged small call (docs/design.md, "Admission"). */
static __thread struct {
    MPI_Comm comm;
    nf_comm_t *c;
    unsigned gen;
} nf_api_last;

static nf_status_t nf_api_comm(MPI_Comm comm, nf_comm_t **c, int lookup)
{
    unsigned gen = atomic_load_explicit(&nf_comm_generation, memory_order_acquire);
    if (nf_api_last.c != NULL && nf_api_last.comm == comm && nf_api_last.gen == gen) {
        *c = nf_api_last.c;
        return NF_OK;
    }
    nf_status_t st = lookup ? nf_comm_lookup(comm, c) : nf_comm_get(comm, c);
    if (st == NF_OK && *c != NULL)
        nf_api_last.comm = comm, nf_api_last.c = *c, nf_api_last.gen = gen;
    return st;
}

/* Not engaged by agreement at MPI_Init: pmpi. Not agreed (MPI_Init did
 * not come through the shim): admission decides per communicator, whose
 * setup compares the ranks' policies. */
int nf_api_engaged(void)
{
    return nf_init() == NF_OK && nf_ctx_ready() && nf_ctx.engaged != 0;
}

/* Whether libnfcoll takes a call on `route` at all. */
static int nf_api_wanted(int route)
{
    return nf_init() == NF_OK && nf_ctx_ready() && (route >= 0 || nf_ctx.engaged != 0);
}

nf_status_t nf_api_resolve(const nf_run_args_t *a, int route, nf_comm_t **c)
{
    *c = NULL;
    return nf_api_wanted(route) ? nf_api_comm(a->comm, c, 0) : NF_OK;
}

nf_status_t nf_api_lookup(const nf_run_args_t *a, int route, int *wanted, nf_comm_t **c)
{
    *c = NULL;
    *wanted = nf_api_wanted(route);
    return *wanted ? nf_api_comm(a->comm, c, 1) : NF_OK;
}

nf_status_t nf_api_exec(nf_comm_t *c, const nf_run_args_t *a, int route)
{
    if (c == NULL)
        return nf_run(NULL, a, NF_ROUTE_PMPI, -1, -1.0);
    if (route >= 0)
        return nf_run(c, a, (nf_route_t)route, -1, -1.0);
    nf_decision_t d;
    nf_admit_decide(c, a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf, a->count,
                    a->datatype, a->op, &d);
    nf_run_args_t b = *a;
    nf_status_t after = NF_OK;
    b.bytes = (int64_t)d.bytes;
    b.health = d.health, b.loss = d.loss, b.loss_mean = &d.loss_mean, b.after = &after;
    d.loss_mean = NAN;
    nf_status_t st = d.calibrate ? nf_calib_run(c, &b, d.seg, d.nseg)
                                 : nf_run_plan(c, &b, d.seg, d.nseg);
    nf_admit_after(c, &d, st); /* health and the trace see the call every rank saw */
    return st != NF_OK ? st : after;
}

static nf_status_t nf_api_run(const nf_run_args_t *a, int route)
{
    nf_comm_t *c = NULL;
    nf_status_t st = nf_api_resolve(a, route, &c);
    if (st != NF_OK)
        return st;
    if (c != NULL)
        nf_engine_drain(c); /* the nonblocking calls issued before this one, then
                               the state's setup where it is new */
    return nf_api_exec(c, a, route);
}

int nf_api_allreduce(const nf_run_args_t *a, int route)
{
    return nf_api_code(a->comm, nf_api_run(a, route));
}

NF_EXPORT int NF_Allreduce_route(const void *sendbuf, void *recvbuf, int count,
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                 nf_route_t route)
{
    nf_run_args_t a = NF_RUN_ARGS(sendbuf, recvbuf, count, datatype, op, comm);
    if ((unsigned)route >= NF_ROUTE_COUNT)
        return nf_api_raise(comm, MPI_ERR_ARG);
    int rc = nf_api_check(&a);
    return rc != MPI_SUCCESS ? nf_api_raise(comm, rc) : nf_api_allreduce(&a, (int)route);
}

NF_EXPORT int NF_Allreduce(const void *sendbuf, void *recvbuf, int count,
                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    nf_run_args_t a = NF_RUN_ARGS(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = nf_api_check(&a);
    return rc != MPI_SUCCESS ? nf_api_raise(comm, rc) : nf_api_allreduce(&a, -1);
}

NF_EXPORT int NF_Region_bind(const void *base, int count, MPI_Datatype datatype,
                             const char *name)
{
    if (datatype != MPI_FLOAT)
        return MPI_ERR_TYPE;
    if (count <= 0)
        return MPI_ERR_COUNT;
    nf_status_t st = nf_region_bind(base, (size_t)count, name);
    if (st == NF_OK) /* new contents: no residual of a buffer freed there carries over */
        nf_residual_forget(base, (size_t)count * sizeof(float));
    return st == NF_OK ? MPI_SUCCESS : st == NF_ERR_INVALID ? MPI_ERR_ARG : MPI_ERR_NO_MEM;
}

NF_EXPORT int NF_Region_unbind(const void *base)
{
    return nf_region_unbind(base) == NF_OK ? MPI_SUCCESS : MPI_ERR_ARG;
}

NF_EXPORT int NF_Health_report(double loss)
{
    if (!isfinite(loss))
        return MPI_ERR_ARG;
    nf_health_report(loss);
    return MPI_SUCCESS;
}

NF_EXPORT nf_status_t nf_placement_query(MPI_Comm comm, nf_placement_info_t *info)
{
    nf_comm_t *c = NULL;
    if (info == NULL || comm == MPI_COMM_NULL || nf_init() != NF_OK || !nf_ctx_ready())
        return NF_ERR_INVALID;
    nf_status_t st = nf_comm_get(comm, &c);
    if (st != NF_OK)
        return st;
    nf_engine_drain(c); /* the calls before it, and the state's setup */
    if (c->is_inter || nf_comm_ready(c) != NF_OK)
        return NF_ERR_UNSUPPORTED;
    info->node = nf_place_node();
    /* Without a node, the detail says why (e.g. "one NUMA node only"). */
    const char *detail = nf_place_detail();
    info->reason = info->node < 0 && detail != NULL && detail[0] != '\0' ? detail
                                                                           : nf_place_reason();
    info->bytes = c->shm.bytes;
    info->resident_frac = c->shm.resident_frac;
    return NF_OK;
}

NF_EXPORT nf_status_t nf_stats_get(nf_route_t route, nf_route_stats_t *s)
{
    if ((unsigned)route >= NF_ROUTE_COUNT || s == NULL)
        return NF_ERR_INVALID;
    nf_stats_read(route, s);
    return NF_OK;
}

NF_EXPORT uint64_t nf_stats_fallbacks(nf_fallback_t reason)
{
    return (unsigned)reason < NF_FALLBACK_COUNT ? nf_stats_read_fallbacks(reason) : 0;
}

NF_EXPORT void nf_stats_reset(void) { nf_stats_zero(); }

/* A collective entry point's guard: MPI_SUCCESS, or its code when MPI is
 * not running (not raised: there is no handler to call before MPI_Init or
 * after MPI_Finalize) or comm is MPI_COMM_NULL (raised). */
static int nf_api_collective(MPI_Comm comm)
{
    int up = 0, down = 0;
    PMPI_Initialized(&up);
    PMPI_Finalized(&down);
    if (!up || down)
        return MPI_ERR_OTHER;
    return comm == MPI_COMM_NULL ? nf_api_raise(comm, MPI_ERR_COMM) : MPI_SUCCESS;
}

NF_EXPORT int NF_Comm_prepare(MPI_Comm comm)
{
    nf_comm_t *c = NULL;
    int rc = nf_api_collective(comm);
    if (rc != MPI_SUCCESS)
        return rc;
    if (nf_init() != NF_OK || !nf_ctx_ready())
        return MPI_SUCCESS; /* libnfcoll is off: nothing to prepare, every call is MPI's */
    nf_status_t st = nf_api_comm(comm, &c, 0);
    if (st == NF_OK)
        nf_engine_drain(c); /* the calls issued before it, then the setup */
    return nf_api_code(comm, st);
}

/* Residual checkpoints: collective on comm like a call, errors through its
 * handler. */
static int nf_api_residuals(MPI_Comm comm, const char *prefix, int load)
{
    nf_comm_t *c = NULL;
    int rc = nf_api_collective(comm);
    if (rc != MPI_SUCCESS)
        return rc;
    nf_status_t st = nf_init() == NF_OK && nf_ctx_ready() ? NF_OK : NF_ERR_UNSUPPORTED;
    if (st == NF_OK)
        st = nf_api_comm(comm, &c, 0);
    if (st == NF_OK) {
        /* the nonblocking calls issued before it (as nf_api_run): the thread's
         * call would meet the checkpoint's collectives on c->priv, and a
         * load replaces the residuals that call holds */
        nf_engine_drain(c);
        st = load ? nf_ckpt_load(c, prefix) : nf_ckpt_save(c, prefix);
    }
    return nf_api_code(comm, st);
}

NF_EXPORT int NF_Residuals_save(MPI_Comm comm, const char *prefix)
{
    return nf_api_residuals(comm, prefix, 0);
}

NF_EXPORT int NF_Residuals_load(MPI_Comm comm, const char *prefix)
{
    return nf_api_residuals(comm, prefix, 1);
}
