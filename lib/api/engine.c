/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The progress engine (nf_engine.h): the MPI side of the scheduler
 * (nf_sched.h). Per communicator, a queue whose setup step sets the
 * communicator's state up (nf_comm_complete) in the communicator's order of
 * calls; its jobs run the calls on a duplicate of the private communicator
 * and complete the generalized requests the program holds.
 * docs/design.md, "The progress engine" and "Communicator setup".
 *
 * No collective here ever runs on a communicator the program owns: every
 * step is on the private duplicate (or the queue's duplicate of it), which
 * only this communicator's jobs and blocking calls use, in one order.
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

#include "nf_agree.h"
#include "nf_api.h" /* nf_init_at_finalize only: the engine never calls an entry point */
#include "nf_ctx.h"
#include "nf_engine.h"
#include "nf_flags.h"
#include "nf_log.h"
#include "nf_stats.h"

struct nf_eng_queue {
    nf_sched_queue_t s;     /* the scheduler's part; s.owner is this */
    nf_comm_t *c;
    MPI_Comm comm;          /* duplicate of c->priv for the jobs' PMPI calls
                               (MPI_COMM_NULL until the first job made it) */
    int own;                /* comm is the queue's own duplicate */
};

static struct {
    int slot;   /* the queue's slot in nf_comm_t */
    int agreed; /* 1: every rank runs workers, 0: not every one, -1: not agreed */
} nf_eng = {-1, -1};

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
static int nf_job_exec(nf_comm_t *c, nf_job_t *j, MPI_Comm agree)
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

/* The queue's first job makes the duplicate its PMPI calls use, collective
 * on the private duplicate, which only this queue's jobs use until it is
 * empty. Without one (broken, or the duplicate failed somewhere), the
 * private one. */
static void nf_eng_dup(nf_eng_queue_t *q)
{
    nf_comm_t *c = q->c;
    if (c->priv != MPI_COMM_NULL && c->use != NF_COMM_BROKEN) {
        nf_status_t dup = nf_mpi_status(PMPI_Comm_dup(c->priv, &q->comm));
        if (dup != NF_OK)
            q->comm = MPI_COMM_NULL;
        if (nf_agree_status(c->priv, dup) != NF_OK && q->comm != MPI_COMM_NULL)
            PMPI_Comm_free(&q->comm);
    }
    if (q->comm == MPI_COMM_NULL) {
        q->comm = c->priv;
        q->own = 0;
    }
}

/* The scheduler's run: on a worker, or in the caller (nf_engine_run_here),
 * after the queue's setup step. */
static void nf_eng_job_run(nf_sched_job_t *s)
{
    nf_job_t *j = (nf_job_t *)s;
    nf_eng_queue_t *q = j->q;
    if (q->comm == MPI_COMM_NULL)
        nf_eng_dup(q);
    j->a.comm = q->comm;
    j->rc = nf_job_exec(q->c, j, q->comm);
}

/* The job's work is finished and it has left its queue: its request. */
static void nf_eng_job_done(nf_sched_job_t *s)
{
    nf_job_t *j = (nf_job_t *)s;
    PMPI_Grequest_complete(j->req);
    nf_job_put(j); /* the engine's hold (free_fn may have let go already) */
}

/* --------------------------------------------------- the setup step */

/* The setup step: collective on the private duplicate, in the
 * communicator's order (the state's split and agreement: NEW to BUILT). */
static void nf_eng_setup(nf_sched_queue_t *s)
{
    nf_comm_complete(((nf_eng_queue_t *)s->owner)->c);
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

static void nf_eng_first_worker(void)
{
    nf_init_at_finalize(nf_engine_finalize); /* also without the shim's MPI_Finalize */
}

/* Let MPI progress the caller's other requests (an Isend whose peer needs
 * it before it reaches its own call on c). Iprobe never receives. */
static void nf_eng_poke(void)
{
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

/* The ranks of c that have not reached the node barrier c's running job
 * waits in (node-local flags; other nodes' ranks are not visible here),
 * as text into buf. */
static void nf_eng_late(nf_comm_t *c, char *buf, size_t len)
{
    int lr[64], n = 0, r[64];
    size_t off = 0;
    buf[0] = '\0';
    if (atomic_load(&c->setup) != NF_COMM_BUILT || c->node == MPI_COMM_NULL)
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

/* A running job past NFCOLL_STALL_WARN says so, once (the scheduler's
 * lock held: the communicator cannot be released meanwhile). */
static void nf_eng_stall(nf_sched_queue_t *s, nf_sched_job_t *j, double waited)
{
    nf_comm_t *c = ((nf_eng_queue_t *)s->owner)->c;
    char late[256], who[MPI_MAX_OBJECT_NAME + 48];
    nf_eng_late(c, late, sizeof(late));
    if (c->name[0] != '\0')
        snprintf(who, sizeof(who), "communicator '%s'", c->name);
    else
        snprintf(who, sizeof(who), "an unnamed communicator of %d ranks", c->size);
    nf_log_warn("nonblocking call %llu on %s has waited %.0f s for its peers "
                "(NFCOLL_STALL_WARN=%g); %s%s", (unsigned long long)j->index, who, waited,
                nf_ctx.cfg.settings->stall_warn,
                late[0] != '\0' ? "not at this node's barrier yet: ranks " :
                                  "the late ranks are on other nodes (not known here)",
                late);
}

/* ------------------------------------------------------------ queues */

static void nf_eng_quiesce(nf_comm_t *c, void *state)
{
    if (state != NULL)
        nf_sched_wait(&((nf_eng_queue_t *)state)->s); /* no setup: nothing else runs */
    (void)c;
}

static void nf_eng_release(nf_comm_t *c, void *state)
{
    nf_eng_queue_t *q = state;
    (void)c;
    if (q == NULL)
        return;
    nf_sched_queue_remove(&q->s);
    if (q->own && q->comm != MPI_COMM_NULL)
        PMPI_Comm_free(&q->comm);
    free(q);
}

static const nf_comm_slot_ops_t nf_eng_slot_ops = {"engine", nf_eng_quiesce, nf_eng_release,
                                                   NULL, NULL};
static pthread_once_t nf_eng_once = PTHREAD_ONCE_INIT;

static void nf_eng_init_once(void)
{
    const nf_settings_t *s = nf_ctx.cfg.settings;
    nf_sched_config_t cfg = {
        .idle_ns = 1000000000L, /* a spare worker leaves after a second idle */
        .worker_start = nf_eng_pin,
        .first_worker = nf_eng_first_worker,
        .poke = nf_eng_poke,
        .stall_limit = s != NULL ? s->stall_warn : 0.0,
        .stall = nf_eng_stall,
    };
    nf_sched_configure(&cfg);
    if (nf_comm_slot_register(&nf_eng_slot_ops, &nf_eng.slot) != NF_OK)
        nf_eng.slot = -1;
}

nf_status_t nf_engine_queue(nf_comm_t *c, nf_eng_queue_t **out)
{
    pthread_once(&nf_eng_once, nf_eng_init_once);
    if (nf_eng.slot < 0)
        return NF_ERR_NO_MEMORY;
    nf_eng_queue_t *q = atomic_load(&c->slot[nf_eng.slot]);
    if (q == NULL) {
        /* Made by one thread at a time: the communicator's calls come in
         * its order, and its release waits for them. */
        if ((q = calloc(1, sizeof(*q))) == NULL)
            return NF_ERR_NO_MEMORY; /* no collective step yet: a rank can fail alone */
        q->c = c;
        q->comm = MPI_COMM_NULL;
        q->own = 1;
        q->s.owner = q;
        q->s.setup = nf_eng_setup;
        atomic_init(&q->s.state,
                    atomic_load(&c->setup) == NF_COMM_BUILT ? NF_SCHED_DONE : NF_SCHED_NEW);
        nf_sched_queue_add(&q->s);
        atomic_store(&c->slot[nf_eng.slot], q);
    }
    *out = q;
    return NF_OK;
}

nf_eng_mode_t nf_engine_mode(nf_eng_queue_t *q)
{
    /* agreed on c itself when it was made: also right for a communicator
     * that spans worlds (MPI_Intercomm_merge), whose MPI_Init agreements differ */
    return q->c->threads_all ? NF_ENG_THREAD : NF_ENG_NONE;
}

int nf_engine_local(void) { return nf_ctx.cfg.threads; }

int nf_engine_agreement(void) { return nf_eng.agreed; }

void nf_engine_agreed(int all)
{
    nf_eng.agreed = all;
    if (all == 0 && nf_log_rank() <= 0)
        nf_log_info(1, "nonblocking calls go to PMPI_Iallreduce (a forced route runs at "
                       "issue): no progress thread on some rank (NFCOLL_PROGRESS, "
                       "MPI_THREAD_MULTIPLE)");
}

static void nf_eng_job_init(nf_eng_queue_t *q, nf_job_t *j)
{
    j->q = q;
    j->s.run = nf_eng_job_run;
    j->s.done = nf_eng_job_done;
}

nf_status_t nf_engine_submit(nf_eng_queue_t *q, nf_job_t *j)
{
    nf_eng_job_init(q, j);
    return nf_sched_submit(&q->s, &j->s);
}

int nf_engine_run_here(nf_eng_queue_t *q, nf_job_t *j)
{
    nf_eng_job_init(q, j);
    nf_sched_run_here(&q->s, &j->s);
    return j->rc;
}

/* ------------------------------------------------------------- waits */

static int nf_eng_match_req(const nf_sched_job_t *s, const void *arg)
{
    const nf_job_t *j = (const nf_job_t *)s;
    const MPI_Request *reqs = ((const struct { const MPI_Request *r; int n; } *)arg)->r;
    int n = ((const struct { const MPI_Request *r; int n; } *)arg)->n;
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL && reqs[i] == j->req)
            return 1;
    return 0;
}

int nf_engine_holds(const MPI_Request *reqs, int n)
{
    struct { const MPI_Request *r; int n; } arg = {reqs, n};
    if (reqs == NULL || nf_sched_pending() == 0)
        return 0;
    return nf_sched_find(nf_eng_match_req, &arg);
}

void nf_engine_pause(unsigned *polls) { nf_sched_pause(polls); }

void nf_engine_drain(nf_comm_t *c)
{
    nf_eng_queue_t *q = NULL;
    if (nf_engine_queue(c, &q) == NF_OK) {
        nf_sched_drain(&q->s);
        return;
    }
    /* No queue (no memory for one): no job was ever queued on c here, and
     * the setup step still runs, as on the other ranks. */
    nf_comm_complete(c);
}

void nf_engine_finalize(void) { nf_sched_finalize(); }
