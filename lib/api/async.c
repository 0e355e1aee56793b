/*
 * Nonblocking calls (NF_Iallreduce, MPI_Iallreduce): each is a generalized
 * request (MPI_Grequest_start) that a library progress thread completes
 * (MPI_Grequest_complete) after running the call exactly as the blocking
 * path would, so that communication and codec work advance while the
 * application computes. docs/design.md, "Nonblocking calls".
 *
 * One FIFO in issue order, one thread: the library never reorders calls.
 * The thread's PMPI calls on the user's behalf (the pmpi route) go to a
 * duplicate of the communicator, so they never meet the caller's own
 * collectives on it; libnfcoll's private communicators are shared with
 * the blocking path, which waits for the communicator's queued calls first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_setaffinity_np, CPU_SET */
#endif
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "nf_agree.h"
#include "nf_api.h"
#include "nf_async.h"
#include "nf_ctx.h"
#include "nf_export.h"
#include "nf_log.h"
#include "nf_stats.h"

typedef struct nf_job {
    nf_run_args_t a; /* a.comm: the communicator the call's PMPI calls use */
    nf_comm_t *c;
    int route;
    int rc;          /* the call's MPI code, for its status */
    MPI_Request req;
    uint64_t seq;    /* its place in the queue's order, from 1 */
    struct nf_job *next;
    atomic_int refs; /* the request's free_fn and the thread's run: the last frees */
} nf_job_t;

static pthread_mutex_t nf_q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nf_q_work = PTHREAD_COND_INITIALIZER; /* the thread: a job, or stop */
static nf_job_t *nf_q_head, *nf_q_tail; /* the head stays queued while it runs */
static pthread_cond_t nf_q_done = PTHREAD_COND_INITIALIZER; /* nf_async_wait's waiters */
static uint64_t nf_q_issued, nf_q_completed; /* seq of the last job queued, completed */
static unsigned nf_q_waiters;
static atomic_int nf_q_pending; /* jobs queued and not completed: MPI_Wait's fast path */
static int nf_q_stop;
static int nf_q_state; /* 0: no thread, 1: running, -1: could not start */
static pthread_t nf_q_thread;

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

/* One of the job's two holders lets go; the last frees it. MPI may call
 * free_fn before the thread has finished with the job: MPICH 4.0's
 * MPI_Waitall (with a status array) did, and the thread then read a freed
 * job's arguments. */
static void nf_job_put(nf_job_t *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1)
        free(j);
}

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

/* ---- the progress thread ---- */

static void nf_async_pin(void)
{
    int cpu = nf_ctx.cfg.settings->progress_cpu;
    cpu_set_t set;
    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    if (cpu < CPU_SETSIZE)
        CPU_SET(cpu, &set);
    int e = cpu < CPU_SETSIZE ? pthread_setaffinity_np(pthread_self(), sizeof(set), &set)
                              : EINVAL;
    if (e != 0) {
        errno = e;
        nf_log_warn_once("NFCOLL_PROGRESS_CPU=%d: cannot pin the progress thread there (%m); "
                         "it runs on the CPUs it inherited", cpu);
    }
}

/* A call's MPI code; the thread runs no error handler (its communicators
 * return errors): the completion call raises it. A call that failed on
 * some rank fails on every rank: after the call, one small agreement on a
 * communicator of libnfcoll's (in the background on the thread); a rank
 * that failed keeps its own code, the others take the largest. */
static int nf_job_run(nf_comm_t *c, const nf_run_args_t *a, int route)
{
    nf_status_t st = nf_api_exec(c, a, route);
    int rc = st == NF_OK ? MPI_SUCCESS : nf_status_to_mpi(st), all = MPI_SUCCESS;
    MPI_Comm agree = c->async_mode == NF_ASYNC_THREAD ? c->async : c->priv;
    if (agree == MPI_COMM_NULL || c->is_inter || c->use == NF_COMM_BROKEN)
        return rc; /* broken or intercommunicator state: nothing to agree on */
    if (nf_agree_code(agree, rc, &all) == NF_OK && rc == MPI_SUCCESS)
        rc = all;
    return rc;
}

static void *nf_async_main(void *arg)
{
    (void)arg;
    nf_async_pin();
    pthread_mutex_lock(&nf_q_lock);
    for (;;) {
        while (nf_q_head == NULL && !nf_q_stop) /* sleeps: an idle thread costs no CPU */
            pthread_cond_wait(&nf_q_work, &nf_q_lock);
        nf_job_t *j = nf_q_head;
        if (j == NULL)
            break; /* stopped with nothing queued */
        pthread_mutex_unlock(&nf_q_lock);
        nf_comm_t *c = j->c;
        j->rc = nf_job_run(c, &j->a, j->route);
        MPI_Request req = j->req;
        pthread_mutex_lock(&nf_q_lock);
        nf_q_head = j->next;
        if (nf_q_head == NULL)
            nf_q_tail = NULL;
        pthread_mutex_unlock(&nf_q_lock);
        uint64_t seq = j->seq;
        nf_comm_async_done(c); /* c may be freed from here on */
        PMPI_Grequest_complete(req);
        nf_job_put(j); /* last: the thread's hold (free_fn may have let go already) */
        pthread_mutex_lock(&nf_q_lock);
        nf_q_completed = seq;
        atomic_fetch_sub(&nf_q_pending, 1);
        if (nf_q_waiters > 0)
            pthread_cond_broadcast(&nf_q_done);
    }
    pthread_mutex_unlock(&nf_q_lock);
    return NULL;
}

static int nf_async_thread_started(void)
{
    pthread_mutex_lock(&nf_q_lock);
    if (nf_q_state == 0) {
        int e = pthread_create(&nf_q_thread, NULL, nf_async_main, NULL);
        nf_q_state = e == 0 ? 1 : -1;
        if (e == 0) {
            nf_init_at_finalize(nf_async_finalize); /* also without the shim's MPI_Finalize */
        } else {
            errno = e;
            nf_log_warn_once("cannot start the progress thread (%m): nonblocking calls run "
                             "when they are issued");
        }
    }
    int up = nf_q_state == 1;
    pthread_mutex_unlock(&nf_q_lock);
    return up;
}

void nf_async_finalize(void)
{
    pthread_mutex_lock(&nf_q_lock);
    int up = nf_q_state == 1;
    nf_q_stop = 1;
    pthread_cond_signal(&nf_q_work);
    pthread_mutex_unlock(&nf_q_lock);
    if (up)
        pthread_join(nf_q_thread, NULL); /* after it ran everything queued */
    pthread_mutex_lock(&nf_q_lock);
    nf_q_state = 0;
    nf_q_stop = 0;
    pthread_mutex_unlock(&nf_q_lock);
}

/* ---- the program's wait ---- */

void nf_async_wait(const MPI_Request *reqs, int n)
{
    if (atomic_load(&nf_q_pending) == 0 || reqs == NULL)
        return;
    pthread_mutex_lock(&nf_q_lock);
    uint64_t last = 0; /* the latest of the queued jobs among reqs */
    for (const nf_job_t *j = nf_q_head; j != NULL; j = j->next)
        for (int i = 0; i < n; i++)
            if (reqs[i] != MPI_REQUEST_NULL && reqs[i] == j->req && j->seq > last)
                last = j->seq;
    nf_q_waiters++;
    while (nf_q_completed < last) /* jobs complete in queue order */
        pthread_cond_wait(&nf_q_done, &nf_q_lock);
    nf_q_waiters--;
    pthread_mutex_unlock(&nf_q_lock);
}

/* ---- issue ---- */

/* Whether this rank can hand calls to the thread. */
static int nf_async_can_thread(void)
{
    int level = MPI_THREAD_SINGLE;
    if (nf_ctx.cfg.settings->progress != NF_PROGRESS_THREAD)
        return 0;
    if (PMPI_Query_thread(&level) != MPI_SUCCESS || level != MPI_THREAD_MULTIPLE)
        return 0;
    return nf_async_thread_started();
}

/* The first nonblocking call on c, collective on it: every rank runs c's
 * calls the same way, on the thread (with a duplicate for its PMPI calls)
 * or at issue. An intercommunicator or broken state is the same on every
 * rank: at issue, without asking. */
static nf_status_t nf_async_setup(nf_comm_t *c)
{
    unsigned no = 1;
    if (c->is_inter || c->use == NF_COMM_BROKEN) {
        c->async_mode = NF_ASYNC_EAGER;
        return NF_OK;
    }
    nf_status_t st = nf_agree_any(c->priv, !nf_async_can_thread(), &no);
    if (st == NF_OK && !no) {
        nf_status_t dup = nf_mpi_status(PMPI_Comm_dup(c->priv, &c->async));
        st = nf_agree_status(c->priv, dup);
        if (st != NF_OK && c->async != MPI_COMM_NULL)
            PMPI_Comm_free(&c->async);
    }
    if (st != NF_OK)
        return st;
    c->async_mode = c->async != MPI_COMM_NULL ? NF_ASYNC_THREAD : NF_ASYNC_EAGER;
    if (c->async_mode == NF_ASYNC_EAGER && c->rank == 0)
        nf_log_info(1, "nonblocking calls on communicator '%s' run when "
                         "they are issued: no progress thread on some rank (NFCOLL_PROGRESS, "
                    "MPI_THREAD_MULTIPLE)", c->name);
    return NF_OK;
}

/* Run a call in the caller, on the communicator c's calls use, after the
 * calls queued before it. */
static int nf_async_inline(nf_comm_t *c, const nf_run_args_t *a, int route)
{
    nf_run_args_t b = *a;
    if (c->async_mode == NF_ASYNC_THREAD) {
        nf_comm_async_wait(c);
        b.comm = c->async;
    }
    return nf_job_run(c, &b, route);
}

static void nf_async_enqueue(nf_job_t *j)
{
    pthread_mutex_lock(&nf_q_lock);
    if (nf_q_tail != NULL)
        nf_q_tail->next = j;
    else
        nf_q_head = j;
    nf_q_tail = j;
    j->seq = ++nf_q_issued;
    atomic_fetch_add(&nf_q_pending, 1);
    atomic_fetch_add(&j->c->async_issued, 1);
    pthread_cond_signal(&nf_q_work);
    pthread_mutex_unlock(&nf_q_lock);
}

/* The job did not start (no memory, no request): the call still runs here,
 * since the other ranks run theirs; the error is this one's. */
static int nf_async_failed(nf_comm_t *c, const nf_run_args_t *a, int route, int rc,
                           MPI_Request *request)
{
    nf_log_error("cannot start a nonblocking call (%s): it ran at its issue",
                 rc == MPI_ERR_NO_MEM ? "no memory" : "MPI_Grequest_start failed");
    nf_async_inline(c, a, route);
    *request = MPI_REQUEST_NULL;
    return nf_api_raise(a->comm, rc);
}

int nf_async_iallreduce(const nf_run_args_t *a, int route, MPI_Request *request)
{
    nf_comm_t *c = NULL;
    nf_status_t st = nf_api_resolve(a, route, &c);
    if (st == NF_OK && c == NULL) { /* libnfcoll not engaged: MPI's own */
        nf_run_pmpi_count(a, nf_run_size(a->comm));
        return PMPI_Iallreduce(a->sendbuf, a->recvbuf, a->count, a->datatype, a->op, a->comm,
                               request);
    }
    if (st == NF_OK && c->async_mode == 0)
        st = nf_async_setup(c);
    if (st != NF_OK) {
        int rc = nf_status_to_mpi(st);
        return nf_status_raised(st) ? rc : nf_api_raise(a->comm, rc);
    }
    nf_job_t *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return nf_async_failed(c, a, route, MPI_ERR_NO_MEM, request);
    int rc = PMPI_Grequest_start(nf_job_query, nf_job_free, nf_job_cancel, j, &j->req);
    if (rc != MPI_SUCCESS) {
        free(j);
        return nf_async_failed(c, a, route, rc, request);
    }
    *request = j->req;
    j->a = *a, j->c = c, j->route = route;
    atomic_init(&j->refs, c->async_mode == NF_ASYNC_EAGER ? 1 : 2);
    if (c->async_mode == NF_ASYNC_EAGER) {
        j->rc = nf_async_inline(c, a, route);
        nf_stats_fallback(NF_FALLBACK_PROGRESS);
        PMPI_Grequest_complete(*request);
        return MPI_SUCCESS;
    }
    j->a.comm = c->async;
    nf_async_enqueue(j);
    return MPI_SUCCESS;
}

NF_EXPORT int NF_Iallreduce_route(const void *sendbuf, void *recvbuf, int count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, int route,
                                  MPI_Request *request)
{
    nf_run_args_t a = {sendbuf, recvbuf, count, datatype, op, comm, -1, 0, NAN, NULL, NULL};
    if ((unsigned)route >= NF_ROUTE_COUNT)
        return nf_api_raise(comm, MPI_ERR_ARG);
    if (request == NULL)
        return nf_api_raise(comm, MPI_ERR_REQUEST);
    int rc = nf_api_check(&a);
    return rc != MPI_SUCCESS ? nf_api_raise(comm, rc) : nf_async_iallreduce(&a, route, request);
}

NF_EXPORT int NF_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                            MPI_Request *request)
{
    nf_run_args_t a = {sendbuf, recvbuf, count, datatype, op, comm, -1, 0, NAN, NULL, NULL};
    if (request == NULL)
        return nf_api_raise(comm, MPI_ERR_REQUEST);
    int rc = nf_api_check(&a);
    return rc != MPI_SUCCESS ? nf_api_raise(comm, rc) : nf_async_iallreduce(&a, -1, request);
}
