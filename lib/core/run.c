/* The route runner (nf_run.h). Admission has chosen the route; this file
 * checks what only the call can tell (datatype, op, communicator kind,
 * capacity), falls back with a reason, and hands the call to the protocol. */
#include "config.h"

#include "nf_coll.h"
#include "nf_ctx.h"
#include "nf_log.h"
#include "nf_run.h"
#include "nf_stats.h"

nf_status_t nf_run_pmpi(const nf_run_args_t *a, int comm_size)
{
    int tsize = 0;
    if (a->bytes >= 0)
        nf_stats_count(NF_ROUTE_PMPI, (uint64_t)a->bytes, (unsigned)comm_size, 0);
    else if (PMPI_Type_size(a->datatype, &tsize) == MPI_SUCCESS) /* else PMPI says why */
        nf_stats_count(NF_ROUTE_PMPI, (uint64_t)a->count * (uint64_t)tsize,
                       (unsigned)comm_size, 0);
    /* On the user's communicator: MPI has run its error handler already. */
    return nf_mpi_status_raised(PMPI_Allreduce(a->sendbuf, a->recvbuf, a->count, a->datatype,
                                               a->op, a->comm));
}

/* A communicator's size for the traffic model without libnfcoll state. */
static int nf_run_size(MPI_Comm comm)
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

/* Why fp32 and the low-bit routes cannot take this call, or -1 if they can. */
static int nf_unfit(const nf_run_args_t *a, nf_comm_t *c)
{
    if (!nf_run_float(a->datatype))
        return NF_FALLBACK_DATATYPE;
    if (a->op != MPI_SUM)
        return NF_FALLBACK_OP;
    if (c->is_inter)
        return NF_FALLBACK_COMM;
    if (nf_comm_ready(c) != NF_OK)
        return NF_FALLBACK_RESOURCE;
    return -1;
}

static nf_residual_t *nf_call_residual(nf_comm_t *c, const void *key, size_t m)
{
    nf_residual_t *e = nf_residual_get(&c->resid, key, m);
    if (e == NULL)
        nf_log_warn_once("no memory for error-feedback residuals; this buffer runs without "
                         "error feedback");
    return e;
}

static nf_status_t nf_run_fp32(nf_comm_t *c, nf_call_t *call)
{
    nf_status_t st = nf_coll_fp32(c, call);
    if (st == NF_OK)
        nf_stats_count(NF_ROUTE_FP32, call->m * sizeof(float), (unsigned)c->size, c->k);
    return st;
}

static nf_status_t nf_run_lowbit(nf_comm_t *c, nf_call_t *call, nf_route_t route, int ef)
{
    if (!c->lowbit_ok) {
        nf_log_warn_once_root(c->rank == 0, "a communicator of %d ranks needs %u-bit sign "
                              "counts, more than NFCOLL_COUNT_BITS=%u: running fp32", c->size,
                              c->k, nf_ctx.cfg.settings->count_bits);
        nf_stats_fallback(NF_FALLBACK_CAPACITY);
        return nf_run_fp32(c, call);
    }
    if (nf_comm_reserve(c, call->m) != NF_OK) {
        nf_log_warn_once_root(c->rank == 0, "the aggregation buffer cannot grow to %zu "
                              "elements; running fp32", call->m);
        nf_stats_fallback(NF_FALLBACK_CAPACITY);
        return nf_run_fp32(c, call);
    }
    call->res = ef ? nf_call_residual(c, call->x, call->m) : NULL;
    nf_status_t st = route == NF_ROUTE_BINARY ? nf_coll_binary(c, call)
                                              : nf_coll_ternary(c, call);
    if (st == NF_ERR_UNSUPPORTED) {
        nf_log_info(1, "NaN or Inf in some rank's input: this call runs fp32");
        nf_stats_fallback(NF_FALLBACK_NONFINITE);
        return nf_run_fp32(c, call);
    }
    if (st == NF_OK)
        nf_stats_count(route, call->m * sizeof(float), (unsigned)c->size, c->k);
    return st;
}

nf_status_t nf_run(nf_comm_t *c, const nf_run_args_t *a, nf_route_t route, int ef, double gamma)
{
    if (route == NF_ROUTE_PMPI || c == NULL || !nf_ctx_ready())
        return nf_run_pmpi(a, c != NULL ? c->size : nf_run_size(a->comm));
    int why = nf_unfit(a, c);
    if (why >= 0) {
        nf_stats_fallback((nf_fallback_t)why);
        return nf_run_pmpi(a, c->size);
    }
    const nf_settings_t *s = nf_ctx.cfg.settings;
    nf_call_t call = {
        .x = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf,
        .r = a->recvbuf,
        .m = (size_t)a->count,
        .gamma = gamma >= 0.0 ? gamma : s->gamma,
    };
    if (a->count == 0) {
        nf_stats_count(route, 0, (unsigned)c->size, c->k);
        return NF_OK;
    }
    if (route == NF_ROUTE_FP32)
        return nf_run_fp32(c, &call);
    return nf_run_lowbit(c, &call, route, ef >= 0 ? ef : s->ef);
}
