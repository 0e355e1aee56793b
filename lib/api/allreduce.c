/* Public entry points: argument checks, which route a call can take, error
 * feedback lookup, and the fallbacks. The protocol is in coll.c. */
#include "config.h"

#include <string.h>

#include "nf_core.h"
#include "nf_export.h"

static int nf_check_args(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Comm comm)
{
    if (count < 0)
        return MPI_ERR_COUNT;
    if (comm == MPI_COMM_NULL)
        return MPI_ERR_COMM;
    /* NULL is MPI_BOTTOM, legal with absolute-address derived datatypes. */
    if (count > 0 && datatype == MPI_FLOAT && (recvbuf == NULL || sendbuf == NULL))
        return MPI_ERR_BUFFER;
    if (count > 0 && sendbuf == recvbuf)
        return MPI_ERR_BUFFER; /* aliasing without MPI_IN_PLACE is erroneous in MPI */
    return MPI_SUCCESS;
}

static int nf_pmpi(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm)
{
    int size = 1, tsize = 0, inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter)
        PMPI_Comm_size(comm, &size);
    PMPI_Type_size(datatype, &tsize);
    nf_stats_count(NF_ROUTE_PMPI, (uint64_t)count * (uint64_t)tsize, (unsigned)size, 0);
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

/* Why a low-bit or fp32 route cannot take this call, or -1 if it can. */
static int nf_unfit(MPI_Datatype datatype, MPI_Op op, nf_comm_t *c)
{
    if (datatype != MPI_FLOAT)
        return NF_FALLBACK_DATATYPE;
    if (op != MPI_SUM)
        return NF_FALLBACK_OP;
    if (c->is_inter)
        return NF_FALLBACK_COMM;
    if (nf_comm_ready(c) != 0)
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

static int nf_run_fp32(nf_comm_t *c, nf_call_t *call)
{
    if (nf_coll_fp32(c, call) != NF_COLL_DONE)
        return MPI_ERR_OTHER;
    nf_stats_count(NF_ROUTE_FP32, call->m * sizeof(float), (unsigned)c->size, c->k);
    return MPI_SUCCESS;
}

static int nf_run_lowbit(nf_comm_t *c, nf_call_t *call, nf_route_t route, int ef)
{
    if (!c->lowbit_ok) {
        nf_log_warn_once_root(c->rank == 0, "a communicator of %d ranks needs %u-bit sign "
                              "counts, more than NFCOLL_COUNT_BITS=%u: running fp32", c->size,
                              c->k, nf_g.settings->count_bits);
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
    nf_coll_result_t res = route == NF_ROUTE_BINARY ? nf_coll_binary(c, call)
                                                    : nf_coll_ternary(c, call);
    if (res == NF_COLL_NONFINITE) {
        nf_log_info(1, "NaN or Inf in some rank's input: this call runs fp32");
        nf_stats_fallback(NF_FALLBACK_NONFINITE);
        return nf_run_fp32(c, call);
    }
    if (res != NF_COLL_DONE)
        return MPI_ERR_OTHER;
    nf_stats_count(route, call->m * sizeof(float), (unsigned)c->size, c->k);
    return MPI_SUCCESS;
}

/* Run a call on route (already admitted); ef < 0 and gamma < 0 inherit the
 * settings. Calls that route cannot take go to PMPI and are counted. */
int nf_allreduce_on(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm, nf_route_t route, int ef, double gamma)
{
    if (route == NF_ROUTE_PMPI || nf_init() != NF_OK || nf_g.disabled)
        return nf_pmpi(sendbuf, recvbuf, count, datatype, op, comm);
    nf_comm_t *c = nf_comm_get(comm);
    int why = c == NULL ? NF_FALLBACK_RESOURCE : nf_unfit(datatype, op, c);
    if (why >= 0) {
        nf_stats_fallback((nf_fallback_t)why);
        return nf_pmpi(sendbuf, recvbuf, count, datatype, op, comm);
    }
    nf_call_t call = {
        .x = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
        .r = recvbuf,
        .m = (size_t)count,
        .gamma = gamma >= 0.0 ? gamma : nf_g.settings->gamma,
    };
    if (count == 0) {
        nf_stats_count(route, 0, (unsigned)c->size, c->k);
        return MPI_SUCCESS;
    }
    if (route == NF_ROUTE_FP32)
        return nf_run_fp32(c, &call);
    return nf_run_lowbit(c, &call, route, ef >= 0 ? ef : nf_g.settings->ef);
}

NF_EXPORT int NF_Allreduce_route(const void *sendbuf, void *recvbuf, int count,
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                 nf_route_t route)
{
    if ((unsigned)route >= NF_ROUTE_COUNT)
        return MPI_ERR_ARG;
    int rc = nf_check_args(sendbuf, recvbuf, count, datatype, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    return nf_allreduce_on(sendbuf, recvbuf, count, datatype, op, comm, route, -1, -1.0);
}

NF_EXPORT int NF_Allreduce(const void *sendbuf, void *recvbuf, int count,
                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int rc = nf_check_args(sendbuf, recvbuf, count, datatype, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    if (nf_init() != NF_OK || nf_g.disabled || !nf_admission_engaged())
        return nf_pmpi(sendbuf, recvbuf, count, datatype, op, comm);
    return nf_admit(sendbuf, recvbuf, count, datatype, op, comm);
}
