/*
 * The progress engine (nf_engine.h): a queue of nonblocking calls per
 * communicator, worker threads that take a ready queue each, one
 * completion record per job and the one wait every caller uses.
 * docs/design.md, "The progress engine".
 *
 * Invariant: workers >= busy queues (a busy queue has jobs, or a worker
 * still holds it). A queue that becomes busy starts a worker when that
 * would break it, and a worker leaves only when it holds. So a queue never
 * waits for a worker that is stuck on another communicator's job.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_setaffinity_np, CPU_SET */
#endif
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nf_agree.h"
#include "nf_api.h" /* nf_init_at_finalize only: the engine never calls an entry point */
#include "nf_ctx.h"
#include "nf_engine.h"
#include "nf_flags.h"
#include "nf_log.h"
#include "nf_stats.h"

enum { NF_ENG_SOME_THREAD = 1, NF_ENG_SOME_UNSET = 2 };

struct nf_eng_queue {
    nf_comm_t *c;
    MPI_Comm comm;          /* duplicate of c->priv for the jobs' PMPI calls
                               (MPI_COMM_NULL until the first job made it) */
    int own;                /* comm is the queue's own duplicate */
    nf_eng_mode_t mode;
    atomic_int who;         /* not agreed at MPI_Init: -1 until the first job
                               agreed (nf_eng_agree), then which ranks run
                               workers: NF_ENG_SOME_THREAD | NF_ENG_SOME_UNSET */
    atomic_uint calls;      /* nonblocking calls issued on it (nf_engine_settle) */
    nf_job_t *head, *tail;  /* the head runs while it is queued */
    uint64_t issued;        /* jobs queued on it so far */
    int busy;               /* has jobs or a worker holds it (counted in nbusy) */
    atomic_int quiet;       /* !busy, for nf_engine_drain's fast path */
    nf_eng_queue_t *rnext;  /* ready list: busy, no worker yet */
    nf_eng_queue_t *next, *prev; /* every queue: request lookups, stall reports */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work; /* workers: a ready queue, or stop */
    pthread_cond_t done; /* waiters: some job finished */
    pthread_cond_t gone; /* nf_engine_finalize: the last worker left */
    nf_eng_queue_t *ready, *ready_tail, *all;
    unsigned workers, nbusy;
    int stop;
    int slot;            /* the queue's slot in nf_comm_t */
    int agreed;          /* 1: every rank runs workers, 0: none does, -1: not agreed */
    atomic_int pending;  /* jobs queued and not finished, on every queue */
} nf_eng = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
            PTHREAD_COND_INITIALIZER, NULL, NULL, NULL, 0, 0, 0, -1, -1, 0};

/* A worker with nothing to do leaves after this long (one always stays). */
#define NF_ENG_IDLE_NS 1000000000L
/* Waits: yields first, then sleeps from 10 us doubling up to this bound
 * between polls (docs/design.md, "The progress engine": what it costs). */
#define NF_ENG_YIELDS 2u
#define NF_ENG_SLEEP_MAX_US 1000L

/* ------------------------------------------------------------- jobs */

void nf_job_put(nf_job_t *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1)
        free(j);
}

/* A call's MPI code; workers run no error handler (their communicators
 * return errors): the completion call raises it. A call that failed on
 * some rank fails on every rank: one small agreement after it, on the
 * queue's communicator; a rank that failed keeps its own code, the others
 * take the largest, and every rank forgets the verdicts' history, which
 * the failed exchange may have left apart (nf_coll_forget). */
static int nf_job_run(nf_comm_t *c, nf_job_t *j, MPI_Comm agree)
{
    nf_status_t st = j->exec(c, &j->a, j->route);
    int rc = st == NF_OK ? MPI_SUCCESS : nf_status_to_mpi(st), all = MPI_SUCCESS;
    if (agree == MPI_COMM_NULL || c->use == NF_COMM_BROKEN)
        return rc; /* broken state: nothing to agree on */
    if (nf_agree_code(agree, rc, &all) != NF_OK)
        return rc;
    if (all != MPI_SUCCESS) /* on every rank alike */
        nf_coll_forget(c);
    return rc == MPI_SUCCESS ? all : rc;
}

static void nf_eng_first(nf_eng_queue_t *q);

int nf_engine_run_here(nf_eng_queue_t *q, nf_job_t *j, nf_eng_mode_t mode)
{
    nf_engine_drain(q->c);
    if (mode == NF_ENG_NONE)
        return nf_job_run(q->c, j, q->c->priv);
    if (q->comm == MPI_COMM_NULL)
        nf_eng_first(q); /* the queue is quiet: nobody else sets it up */
    j->a.comm = q->comm; /* where the other ranks' workers run it */
    return nf_job_run(q->c, j, q->comm);
}

/* The job's work is finished and it has left its queue: its request. */
static void nf_job_complete(nf_job_t *j)
{
    MPI_Request req = j->req;
    PMPI_Grequest_complete(req);
    nf_job_put(j); /* the engine's hold (free_fn may have let go already) */
    pthread_mutex_lock(&nf_eng.lock);
    atomic_fetch_sub(&nf_eng.pending, 1);
    pthread_cond_broadcast(&nf_eng.done);
    pthread_mutex_unlock(&nf_eng.lock);
}

/* ---------------------------------------------------------- workers */

static void nf_eng_pin(void)
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
        nf_log_warn_once("NFCOLL_PROGRESS_CPU=%d: cannot pin the progress threads there (%m); "
                         "they run on the CPUs they inherited", cpu);
    }
}

static nf_eng_queue_t *nf_eng_ready_pop(void)
{
    nf_eng_queue_t *q = nf_eng.ready;
    if (q != NULL) {
        nf_eng.ready = q->rnext;
        if (nf_eng.ready == NULL)
            nf_eng.ready_tail = NULL;
        q->rnext = NULL;
    }
    return q;
}

/* Not agreed at MPI_Init: which ranks run workers, one BOR allreduce on
 * the private duplicate in every rank's first job on it (on a worker, or
 * at issue where this rank has none): q->who (nf_engine_settle). */

static void nf_eng_agree(nf_eng_queue_t *q)
{
    nf_comm_t *c = q->c;
    unsigned mine = q->mode == NF_ENG_THREAD ? NF_ENG_SOME_THREAD : NF_ENG_SOME_UNSET, any = 0;
    if (nf_agree_any(c->priv, mine, &any) != NF_OK)
        any = NF_ENG_SOME_THREAD; /* its jobs then fail with MPI's error */
    atomic_store_explicit(&q->who, (int)any, memory_order_release);
    if (c->rank == 0 && (any & NF_ENG_SOME_UNSET))
        nf_log_info(1, "nonblocking calls on communicator '%s' go to PMPI_Iallreduce%s (a "
                       "forced route runs at issue): no progress thread on %s rank "
                       "(NFCOLL_PROGRESS, MPI_THREAD_MULTIPLE)", c->name,
                    (any & NF_ENG_SOME_THREAD) ? " after the first" : "",
                    (any & NF_ENG_SOME_THREAD) ? "some" : "any");
}

/* The queue's first job: the communicator's state set up behind it
 * (nf_comm_complete), where MPI_Init did not agree which ranks run
 * workers that (nf_eng_agree), then the duplicate its jobs' PMPI calls
 * use, all collective on the private duplicate, which only this queue's
 * jobs use until it is empty. Without a duplicate, the private one. */
static void nf_eng_first(nf_eng_queue_t *q)
{
    nf_comm_t *c = q->c;
    nf_comm_complete(c);
    if (c->priv == MPI_COMM_NULL) { /* broken alone: its jobs fail with MPI's error */
        atomic_store(&q->who, NF_ENG_SOME_THREAD);
        return;
    }
    if (nf_eng.agreed < 0)
        nf_eng_agree(q);
    nf_status_t dup = nf_mpi_status(PMPI_Comm_dup(c->priv, &q->comm));
    if (nf_agree_status(c->priv, dup) != NF_OK && q->comm != MPI_COMM_NULL)
        PMPI_Comm_free(&q->comm);
    if (q->comm == MPI_COMM_NULL) {
        q->comm = c->priv;
        q->own = 0;
    }
}

/* Run q's jobs until it is empty (lock held on entry and exit). */
static void nf_eng_hold(nf_eng_queue_t *q)
{
    nf_job_t *j;
    while ((j = q->head) != NULL) {
        j->started = PMPI_Wtime();
        pthread_mutex_unlock(&nf_eng.lock);
        if (q->comm == MPI_COMM_NULL)
            nf_eng_first(q);
        j->a.comm = q->comm;
        j->rc = nf_job_run(q->c, j, q->comm);
        pthread_mutex_lock(&nf_eng.lock);
        q->head = j->next;
        if (q->head == NULL)
            q->tail = NULL;
        pthread_mutex_unlock(&nf_eng.lock);
        nf_job_complete(j);
        pthread_mutex_lock(&nf_eng.lock);
    }
    q->busy = 0;
    nf_eng.nbusy--;
    atomic_store_explicit(&q->quiet, 1, memory_order_release);
    pthread_cond_broadcast(&nf_eng.done); /* nf_engine_drain's waiters */
}

static void nf_eng_deadline(struct timespec *t, long ns)
{
    clock_gettime(CLOCK_REALTIME, t);
    t->tv_nsec += ns;
    t->tv_sec += t->tv_nsec / 1000000000L;
    t->tv_nsec %= 1000000000L;
}

static void *nf_eng_worker(void *arg)
{
    (void)arg;
    nf_eng_pin();
    pthread_mutex_lock(&nf_eng.lock);
    for (;;) {
        nf_eng_queue_t *q = nf_eng_ready_pop();
        if (q != NULL) {
            nf_eng_hold(q);
            continue;
        }
        if (nf_eng.stop)
            break;
        struct timespec t;
        nf_eng_deadline(&t, NF_ENG_IDLE_NS);
        int e = pthread_cond_timedwait(&nf_eng.work, &nf_eng.lock, &t);
        if (e == ETIMEDOUT && nf_eng.ready == NULL && nf_eng.workers > nf_eng.nbusy &&
            nf_eng.workers > 1)
            break; /* idle: one of the spare workers leaves */
    }
    nf_eng.workers--;
    pthread_cond_broadcast(&nf_eng.gone);
    pthread_mutex_unlock(&nf_eng.lock);
    return NULL;
}

/* Start one worker (lock held). NF_OK, or NF_ERR_IO when the thread cannot
 * be made (warned once). */
static nf_status_t nf_eng_spawn(void)
{
    pthread_attr_t attr;
    pthread_t t;
    int e = pthread_attr_init(&attr);
    if (e == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        e = pthread_create(&t, &attr, nf_eng_worker, NULL);
        pthread_attr_destroy(&attr);
    }
    if (e == 0) {
        if (nf_eng.workers++ == 0)
            nf_init_at_finalize(nf_engine_finalize); /* also without the shim's MPI_Finalize */
        return NF_OK;
    }
    errno = e;
    nf_log_warn_once("cannot start a progress thread (%m): nonblocking calls on some "
                     "communicators wait for another's to finish");
    return NF_ERR_IO;
}

/* ------------------------------------------------------------ queues */

static void nf_eng_quiesce(nf_comm_t *c, void *state)
{
    if (state != NULL)
        nf_engine_drain(c);
}

static void nf_eng_release(nf_comm_t *c, void *state)
{
    nf_eng_queue_t *q = state;
    (void)c;
    if (q == NULL)
        return;
    pthread_mutex_lock(&nf_eng.lock);
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        nf_eng.all = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    pthread_mutex_unlock(&nf_eng.lock);
    if (q->own && q->comm != MPI_COMM_NULL)
        PMPI_Comm_free(&q->comm);
    free(q);
}

static const nf_comm_slot_ops_t nf_eng_slot_ops = {"engine", nf_eng_quiesce, nf_eng_release,
                                                   NULL, NULL};
static pthread_once_t nf_eng_once = PTHREAD_ONCE_INIT;

static void nf_eng_slot_init(void)
{
    if (nf_comm_slot_register(&nf_eng_slot_ops, &nf_eng.slot) != NF_OK)
        nf_eng.slot = -1;
}

/* Whether this rank can run workers: nf_engine_local, and a first worker. */
static int nf_eng_can_thread(void)
{
    int up;
    if (!nf_engine_local())
        return 0;
    pthread_mutex_lock(&nf_eng.lock);
    up = nf_eng.workers > 0 || nf_eng_spawn() == NF_OK;
    pthread_mutex_unlock(&nf_eng.lock);
    return up;
}

nf_status_t nf_engine_queue(nf_comm_t *c, nf_eng_queue_t **out)
{
    pthread_once(&nf_eng_once, nf_eng_slot_init);
    if (nf_eng.slot < 0)
        return NF_ERR_NO_MEMORY;
    nf_eng_queue_t *q = atomic_load(&c->slot[nf_eng.slot]);
    if (q != NULL) {
        *out = q;
        return NF_OK;
    }
    q = calloc(1, sizeof(*q));
    if (q == NULL)
        return NF_ERR_NO_MEMORY; /* before any collective step: every rank can fail alone */
    q->c = c;
    q->comm = MPI_COMM_NULL;
    q->own = 1;
    if (nf_eng.agreed >= 0)
        q->mode = nf_eng.agreed == 1 ? NF_ENG_THREAD : NF_ENG_NONE;
    else /* the ranks agree in the queue's first job (nf_eng_agree) */
        q->mode = nf_eng_can_thread() ? NF_ENG_THREAD : NF_ENG_UNSET;
    atomic_init(&q->who, -1);
    atomic_init(&q->calls, 0u);
    atomic_init(&q->quiet, 1);
    pthread_mutex_lock(&nf_eng.lock);
    q->next = nf_eng.all;
    if (nf_eng.all != NULL)
        nf_eng.all->prev = q;
    nf_eng.all = q;
    pthread_mutex_unlock(&nf_eng.lock);
    atomic_store(&c->slot[nf_eng.slot], q);
    *out = q;
    return NF_OK;
}

static void nf_eng_poke(void);

nf_eng_mode_t nf_engine_settle(nf_eng_queue_t *q)
{
    if (nf_eng.agreed >= 0)
        return q->mode;
    if (q->mode == NF_ENG_UNSET) { /* no worker here: the first call agrees here */
        nf_eng_first(q);
        q->mode = NF_ENG_NONE;
        /* some rank has workers (or this one could not agree: it fails
         * there): this call is a job, as theirs */
        return (atomic_load(&q->who) & NF_ENG_SOME_THREAD) ? NF_ENG_HERE : NF_ENG_NONE;
    }
    if (q->mode != NF_ENG_THREAD)
        return q->mode;
    if (atomic_fetch_add(&q->calls, 1u) == 0)
        return NF_ENG_THREAD; /* the first call: its job agrees */
    /* A later call, before the first job agreed: what it agrees decides
     * this call's route on every rank. The wait ends when every rank has
     * issued its first call. */
    unsigned polls = 0;
    while (atomic_load_explicit(&q->who, memory_order_acquire) < 0) {
        nf_eng_poke();
        nf_engine_pause(&polls);
    }
    if (atomic_load(&q->who) & NF_ENG_SOME_UNSET)
        q->mode = NF_ENG_NONE;
    return q->mode;
}

int nf_engine_local(void)
{
    int level = MPI_THREAD_SINGLE;
    return nf_ctx.cfg.settings->progress == NF_PROGRESS_THREAD &&
           PMPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
}

int nf_engine_agreement(void) { return nf_eng.agreed; }

void nf_engine_agreed(int all)
{
    nf_eng.agreed = all;
    if (all == 0 && nf_log_rank() <= 0)
        nf_log_info(1, "nonblocking calls go to PMPI_Iallreduce (a forced route runs at "
                       "issue): no progress thread on some rank (NFCOLL_PROGRESS, "
                       "MPI_THREAD_MULTIPLE)");
}

nf_status_t nf_engine_submit(nf_eng_queue_t *q, nf_job_t *j)
{
    nf_status_t st;
    j->next = NULL;
    pthread_mutex_lock(&nf_eng.lock);
    if (nf_eng.workers == 0 && (st = nf_eng_spawn()) != NF_OK) {
        pthread_mutex_unlock(&nf_eng.lock);
        return st; /* no worker at all: the caller runs it */
    }
    j->index = ++q->issued;
    if (q->tail != NULL)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    atomic_fetch_add(&nf_eng.pending, 1);
    if (!q->busy) {
        q->busy = 1;
        atomic_store(&q->quiet, 0);
        nf_eng.nbusy++;
        if (nf_eng.ready_tail != NULL)
            nf_eng.ready_tail->rnext = q;
        else
            nf_eng.ready = q;
        nf_eng.ready_tail = q;
        if (nf_eng.workers < nf_eng.nbusy)
            nf_eng_spawn(); /* failing, the queue waits for a worker to come free */
        pthread_cond_signal(&nf_eng.work);
    }
    pthread_mutex_unlock(&nf_eng.lock);
    return NF_OK;
}

/* ------------------------------------------------------------- waits */

int nf_engine_holds(const MPI_Request *reqs, int n)
{
    int found = 0;
    if (atomic_load_explicit(&nf_eng.pending, memory_order_acquire) == 0 || reqs == NULL)
        return 0;
    pthread_mutex_lock(&nf_eng.lock);
    for (const nf_eng_queue_t *q = nf_eng.all; q != NULL && !found; q = q->next)
        for (const nf_job_t *j = q->head; j != NULL && !found; j = j->next)
            for (int i = 0; i < n && !found; i++)
                found = reqs[i] != MPI_REQUEST_NULL && reqs[i] == j->req;
    pthread_mutex_unlock(&nf_eng.lock);
    return found;
}

/* The ranks of c that have not reached the node barrier c's running job
 * waits in (node-local flags; other nodes' ranks are not visible here),
 * as text into buf. */
static void nf_eng_late(nf_comm_t *c, char *buf, size_t len)
{
    int lr[64], n = 0, r[64];
    size_t off = 0;
    buf[0] = '\0';
    if (atomic_load(&c->pending) || c->node == MPI_COMM_NULL)
        return; /* still being set up: no flags yet */
    n = nf_node_late(c, lr, 64);
    MPI_Group gn, gp;
    if (n <= 0 || PMPI_Comm_group(c->node, &gn) != MPI_SUCCESS)
        return;
    if (PMPI_Comm_group(c->priv, &gp) == MPI_SUCCESS) {
        if (PMPI_Group_translate_ranks(gn, n, lr, gp, r) == MPI_SUCCESS)
            for (int i = 0; i < n && off + 16 < len; i++)
                off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "", r[i]);
        PMPI_Group_free(&gp);
    }
    PMPI_Group_free(&gn);
}

/* A running job past NFCOLL_STALL_WARN says so, once. Under the engine's
 * lock, which keeps the job's communicator from being released (a few
 * local MPI group calls, once per stalled job). */
static void nf_eng_stalls(void)
{
    double limit = nf_ctx.cfg.settings != NULL ? nf_ctx.cfg.settings->stall_warn : 0.0;
    if (!(limit > 0.0))
        return;
    double now = PMPI_Wtime();
    pthread_mutex_lock(&nf_eng.lock);
    for (nf_eng_queue_t *q = nf_eng.all; q != NULL; q = q->next) {
        nf_job_t *j = q->head;
        if (j == NULL || j->warned || j->started <= 0.0 || now - j->started < limit)
            continue;
        j->warned = 1;
        char late[256];
        nf_eng_late(q->c, late, sizeof(late));
        char who[MPI_MAX_OBJECT_NAME + 48];
        if (q->c->name[0] != '\0')
            snprintf(who, sizeof(who), "communicator '%s'", q->c->name);
        else
            snprintf(who, sizeof(who), "an unnamed communicator of %d ranks", q->c->size);
        nf_log_warn("nonblocking call %llu on %s has waited %.0f s for its peers "
                    "(NFCOLL_STALL_WARN=%g); %s%s", (unsigned long long)j->index, who,
                    now - j->started, limit,
                    late[0] != '\0' ? "not at this node's barrier yet: ranks " :
                                      "the late ranks are on other nodes (not known here)",
                    late);
    }
    pthread_mutex_unlock(&nf_eng.lock);
}

void nf_engine_pause(unsigned *polls)
{
    unsigned k = (*polls)++;
    if (k < NF_ENG_YIELDS) {
        sched_yield();
        return;
    }
    long us = 10L << (k - NF_ENG_YIELDS < 7 ? k - NF_ENG_YIELDS : 7);
    struct timespec t;
    nf_eng_deadline(&t, (us < NF_ENG_SLEEP_MAX_US ? us : NF_ENG_SLEEP_MAX_US) * 1000L);
    pthread_mutex_lock(&nf_eng.lock);
    pthread_cond_timedwait(&nf_eng.done, &nf_eng.lock, &t);
    pthread_mutex_unlock(&nf_eng.lock);
    if ((k & 255u) == 255u) /* about every quarter second */
        nf_eng_stalls();
}

/* Let MPI progress the caller's other requests (an Isend whose peer needs
 * it before it reaches its own call on c). Iprobe never receives. */
static void nf_eng_poke(void)
{
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

void nf_engine_drain(nf_comm_t *c)
{
    nf_eng_queue_t *q = nf_eng.slot >= 0 ? atomic_load(&c->slot[nf_eng.slot]) : NULL;
    unsigned polls = 0;
    while (q != NULL && !atomic_load_explicit(&q->quiet, memory_order_acquire)) {
        nf_eng_poke();
        nf_engine_pause(&polls);
    }
    /* A state set up behind a call whose job never started (its queue
     * could not be made on this rank): the blocking path finishes it,
     * where every rank comes alike. */
    if (atomic_load_explicit(&c->pending, memory_order_acquire))
        nf_comm_complete(c);
}

void nf_engine_finalize(void)
{
    pthread_mutex_lock(&nf_eng.lock);
    nf_eng.stop = 1;
    pthread_cond_broadcast(&nf_eng.work);
    while (nf_eng.workers > 0) /* after they ran everything queued */
        pthread_cond_wait(&nf_eng.gone, &nf_eng.lock);
    nf_eng.stop = 0;
    pthread_mutex_unlock(&nf_eng.lock);
}
