/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The progress engine's scheduler (sched.c): queues of jobs, worker
 * threads, the ready list, the setup step each queue runs once, and the one
 * wait every caller uses. No MPI here: the engine (nf_engine.h) gives each
 * job and queue its callbacks, and tests/test_engine.c drives the scheduler
 * with fake ones. docs/design.md, "The progress engine".
 *
 * Jobs on one queue run in submission order; jobs on different queues are
 * never ordered against each other: a queue with jobs is handed to a worker
 * of its own for as long as it has jobs, so a job that waits (for a late
 * peer) holds no other queue's jobs.
 *
 * Invariant: workers >= busy queues (a busy queue has jobs, or a worker
 * still holds it). A queue that becomes busy starts a worker when that
 * would break it, and a worker leaves only when it holds (one always stays
 * until nf_sched_finalize). So a queue never waits for a worker stuck on
 * another queue's job. Workers, named "nfcoll-worker", run with
 * every asynchronous signal blocked (not SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT, SIGTRAP, SIGSYS): the program's handlers run on its threads.
 *
 * Each queue has a setup step (nf_sched_queue_t.setup), run once, in the
 * queue's order: by the worker before the queue's first job, or by
 * nf_sched_drain when it comes first (the blocking path, after every job
 * submitted before it). Its states: NEW, then DONE; it never runs twice or
 * concurrently with a job of its queue.
 */
#ifndef NF_SCHED_H
#define NF_SCHED_H

#include <stdatomic.h>
#include <stdint.h>

#include "nfcoll.h"

typedef struct nf_sched_queue nf_sched_queue_t;
typedef struct nf_sched_job nf_sched_job_t;

struct nf_sched_job {
    /* The work, on a worker (or the submitter, when no worker runs). */
    void (*run)(nf_sched_job_t *j);
    /* After the job left its queue: the scheduler's last touch of it (it
     * may free the job). NULL: nothing. */
    void (*done)(nf_sched_job_t *j);
    uint64_t index;    /* its place among its queue's jobs, from 1 */
    double started;    /* when a worker took it (nf_sched_now), if running */
    int running;       /* a worker took it */
    int warned;        /* its stall was reported */
    nf_sched_job_t *next;
};

typedef enum nf_sched_setup {
    NF_SCHED_NEW = 0,  /* setup not run yet */
    NF_SCHED_DONE      /* setup ran (or there was none) */
} nf_sched_setup_t;

struct nf_sched_queue {
    /* Runs once, in the queue's order (above); NULL: none. */
    void (*setup)(nf_sched_queue_t *q);
    void *owner;                 /* the caller's, untouched */
    _Atomic nf_sched_setup_t state;
    nf_sched_job_t *head, *tail; /* the head runs while it is queued */
    uint64_t issued;             /* jobs submitted to it so far */
    int busy;                    /* has jobs or a worker holds it (counted) */
    int linked;                  /* on the scheduler's list of every queue */
    atomic_int quiet;            /* !busy, for nf_sched_drain's fast path */
    nf_sched_queue_t *rnext;     /* ready list: busy, no worker yet */
    nf_sched_queue_t *next, *prev;
};

/* What the scheduler needs from its user; every callback may be NULL. */
typedef struct nf_sched_config {
    long idle_ns;        /* a spare worker with nothing to do leaves after this */
    /* In each new worker before its first job (pinning it, say). */
    void (*worker_start)(void);
    /* When the first worker starts (the engine hooks MPI_Finalize). */
    void (*first_worker)(void);
    /* Between a drain's polls: let the caller's other work progress. */
    void (*poke)(void);
    /* A running job past stall_limit seconds, once per job, under the
     * scheduler's lock (the queue cannot be removed meanwhile). */
    double stall_limit;  /* <= 0: never */
    void (*stall)(nf_sched_queue_t *q, nf_sched_job_t *j, double waited);
} nf_sched_config_t;

/* Before any other call, and again to change the settings (no worker
 * running yet for worker_start to matter). */
void nf_sched_configure(const nf_sched_config_t *cfg);

/* A monotonic clock, seconds. */
double nf_sched_now(void);

/* Make q known to the scheduler (q zeroed by the caller, setup and owner
 * set); remove it again once drained (nf_sched_drain). */
void nf_sched_queue_add(nf_sched_queue_t *q);
void nf_sched_queue_remove(nf_sched_queue_t *q);

/* Queue j on q in submission order and wake or start a worker: NF_OK.
 * NF_ERR_IO when no worker exists and none could be started: j is not
 * queued, and the caller runs it (nf_sched_run_here). */
nf_status_t nf_sched_submit(nf_sched_queue_t *q, nf_sched_job_t *j);
/* Run j in the caller, after q's earlier jobs and q's setup, as a worker
 * would; j->done is not called. */
void nf_sched_run_here(nf_sched_queue_t *q, nf_sched_job_t *j);

/* Wait until every job submitted to q so far has finished; calls cfg.poke
 * between polls. Drain: then run q's setup if it has not run. */
void nf_sched_wait(nf_sched_queue_t *q);
void nf_sched_drain(nf_sched_queue_t *q);

/* Whether some queued, unfinished job satisfies match (under the lock;
 * one atomic load when nothing is queued anywhere). */
int nf_sched_find(int (*match)(const nf_sched_job_t *j, const void *arg), const void *arg);
/* Jobs submitted and not finished, on every queue. */
int nf_sched_pending(void);
/* Workers alive now, and queues busy now (for tests and reports). */
void nf_sched_counts(unsigned *workers, unsigned *busy);

/* Between two polls of a wait: yield, then sleep (woken early by any job's
 * completion) for at most a bound that grows with *polls (start at 0),
 * and report stalled jobs about every quarter second. */
void nf_sched_pause(unsigned *polls);
/* Report the stalled jobs now (cfg.stall), each once. */
void nf_sched_stalls(void);

/* Run every queued job and stop the workers. Later submissions start
 * workers again. */
void nf_sched_finalize(void);

#endif
