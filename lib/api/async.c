/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Nonblocking calls (NF_Iallreduce, MPI_Iallreduce): each is a generalized
 * request (MPI_Grequest_start) that the progress engine (nf_engine.h)
 * completes after running the call exactly as the blocking path would, so
 * that communication and codec work advance while the application
 * computes. docs/design.md, "The progress engine".
 *
 * A call libnfcoll does not route (an intercommunicator, a broken
 * communicator, a datatype or op no route takes, one process, no progress
 * thread, a communicator not set up yet) is MPI's own PMPI_Iallreduce,
 * nonblocking. The engine's PMPI
 * calls on the user's behalf (the pmpi route) go to a duplicate of the
 * communicator, so they never meet the caller's own collectives on it.
 */
#include "config.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "nf_api.h"
#include "nf_async.h"
#include "nf_ctx.h"
#include "nf_engine.h"
#include "nf_export.h"
#include "nf_log.h"
#include "nf_stats.h"

/* ---- the request's callbacks (called by MPI, in the thread that
 * completes or frees the request) ---- */

static int nf_job_query(void *extra, MPI_Status *status)
{
    const nf_job_t *j = extra;
    int rc = j != NULL ? j->rc : MPI_SUCCESS;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = rc;
    return rc;
}

/* MPI may call free_fn before the engine has finished with the job: MPICH
 * 4.0's MPI_Waitall (with a status array) did. The last holder frees. */
static int nf_job_free(void *extra)
{
    if (extra != NULL)
        nf_job_put(extra);
    return MPI_SUCCESS;
}

/* A call that has started on some rank cannot be taken back: it completes
 * as if not cancelled, as MPI allows. */
static int nf_job_cancel(void *extra, int complete)
{
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

/* ---- issue ---- */

/* Whether some route of libnfcoll's could take the call, from its arguments
 * and communicator alone (local calls; no state is made for a call that
 * is not): admission sends everything else to pmpi, which here is
 * PMPI_Iallreduce itself. */
static int nf_async_routable(const nf_run_args_t *a, int route)
{
    int inter = 1, size = 0;
    if (PMPI_Comm_test_inter(a->comm, &inter) != MPI_SUCCESS || inter)
        return 0;
    return route >= 0 || (a->op == MPI_SUM && nf_run_float(a->datatype) &&
                          PMPI_Comm_size(a->comm, &size) == MPI_SUCCESS && size > 1);
}

static int nf_async_pmpi(const nf_run_args_t *a, MPI_Request *request)
{
    nf_run_pmpi_count(a, nf_run_size(a->comm));
    return PMPI_Iallreduce(a->sendbuf, a->recvbuf, a->count, a->datatype, a->op, a->comm,
                           request);
}

/* The job did not start (no memory, no request): the call still runs here,
 * since the other ranks run theirs; the error is this one's. */
static int nf_async_failed(nf_eng_queue_t *q, const nf_run_args_t *a, int route, int rc,
                           MPI_Request *request)
{
    nf_job_t j = {.a = *a, .route = route, .exec = nf_api_exec};
    nf_log_error("cannot start a nonblocking call (%s): it ran at its issue",
                 rc == MPI_ERR_NO_MEM ? "no memory" : "MPI_Grequest_start failed");
    nf_engine_run_here(q, &j);
    *request = MPI_REQUEST_NULL;
    return nf_api_raise(a->comm, rc);
}

/* A communicator libnfcoll has not set up (made by MPI_Comm_idup, or where
 * libnfcoll did not see it made): its nonblocking calls are MPI's own until
 * its first blocking collective through libnfcoll, which sets it up there
 * (docs/design.md, "Communicator setup"). Counted; said once. */
static int nf_async_unset(const nf_run_args_t *a, MPI_Request *request)
{
    static atomic_int told;
    nf_stats_fallback(NF_FALLBACK_SETUP);
    if (atomic_exchange(&told, 1) == 0) {
        char name[MPI_MAX_OBJECT_NAME] = "";
        int len = 0;
        PMPI_Comm_get_name(a->comm, name, &len);
        nf_log_info(1, "nonblocking calls on communicator '%s' are MPI's own PMPI_Iallreduce "
                       "until its first blocking allreduce or NF_Comm_prepare (libnfcoll did "
                       "not see it made: MPI_Comm_idup, or MPI started without libnfcoll); "
                       "fallback 'setup'",
                    name);
    }
    return nf_async_pmpi(a, request);
}

int nf_async_iallreduce(const nf_run_args_t *a, int route, MPI_Request *request)
{
    nf_comm_t *c = NULL;
    nf_eng_queue_t *q = NULL;
    if (!nf_async_routable(a, route))
        return nf_async_pmpi(a, request);
    if (nf_engine_agreement() == 0 && route < 0) { /* MPI_Init agreed: no worker on some rank */
        if (nf_api_engaged())
            nf_stats_fallback(NF_FALLBACK_PROGRESS);
        return nf_async_pmpi(a, request);
    }
    /* The state as it is: a nonblocking call never starts a collective on
     * the program's communicator (nf_comm_lookup). Not engaged: pmpi. */
    int wanted = 0;
    nf_status_t st = nf_api_lookup(a, route, &wanted, &c);
    if (st == NF_OK && c == NULL)
        return wanted ? nf_async_unset(a, request) : nf_async_pmpi(a, request);
    if (st == NF_OK && c->priv == MPI_COMM_NULL) /* broken when made, on every rank */
        return nf_async_pmpi(a, request);
    if (st == NF_OK)
        st = nf_engine_queue(c, &q);
    if (st != NF_OK) {
        int rc = nf_status_to_mpi(st);
        return nf_status_raised(st) ? rc : nf_api_raise(a->comm, rc);
    }
    nf_eng_mode_t mode = nf_engine_mode(q);
    if (mode == NF_ENG_NONE && route < 0) {
        nf_stats_fallback(NF_FALLBACK_PROGRESS);
        return nf_async_pmpi(a, request);
    }
    nf_job_t *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return nf_async_failed(q, a, route, MPI_ERR_NO_MEM, request);
    int rc = PMPI_Grequest_start(nf_job_query, nf_job_free, nf_job_cancel, j, &j->req);
    if (rc != MPI_SUCCESS) {
        free(j);
        return nf_async_failed(q, a, route, rc, request);
    }
    *request = j->req;
    j->a = *a, j->route = route, j->exec = nf_api_exec;
    atomic_init(&j->refs, 2); /* the request's and the engine's */
    if (mode == NF_ENG_THREAD && nf_engine_submit(q, j) == NF_OK)
        return MPI_SUCCESS;
    /* no thread on some rank (a forced route), or none could start: at issue */
    j->rc = nf_engine_run_here(q, j);
    nf_stats_fallback(NF_FALLBACK_PROGRESS);
    PMPI_Grequest_complete(*request);
    nf_job_put(j);
    return MPI_SUCCESS;
}

NF_EXPORT int NF_Iallreduce_route(const void *sendbuf, void *recvbuf, int count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                  nf_route_t route, MPI_Request *request)
{
    nf_run_args_t a = NF_RUN_ARGS(sendbuf, recvbuf, count, datatype, op, comm);
    if ((unsigned)route >= NF_ROUTE_COUNT)
        return nf_api_raise(comm, MPI_ERR_ARG);
    if (request == NULL)
        return nf_api_raise(comm, MPI_ERR_REQUEST);
    int rc = nf_api_check(&a);
    return rc != MPI_SUCCESS ? nf_api_raise(comm, rc)
                             : nf_async_iallreduce(&a, (int)route, request);
}

NF_EXPORT int NF_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                            MPI_Request *request)
{
    nf_run_args_t a = NF_RUN_ARGS(sendbuf, recvbuf, count, datatype, op, comm);
    if (request == NULL)
        return nf_api_raise(comm, MPI_ERR_REQUEST);
    int rc = nf_api_check(&a);
    return rc != MPI_SUCCESS ? nf_api_raise(comm, rc) : nf_async_iallreduce(&a, -1, request);
}
