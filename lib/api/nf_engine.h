/*
 * The progress engine (engine.c): runs nonblocking calls in the background,
 * one queue per communicator. docs/design.md, "The progress engine".
 *
 * Jobs on one communicator run in issue order, which is the only order MPI
 * gives collectives; jobs on different communicators are never ordered
 * against each other: a communicator with queued jobs is handed to a worker
 * thread of its own for as long as its queue is not empty, so a job waiting
 * for a late peer holds no other communicator's jobs. Workers are started
 * when a communicator's queue becomes ready and no worker is idle, and
 * leave after a while idle (one stays): at most as many as communicators
 * with queued jobs.
 *
 * Each job is its own completion record: it leaves its queue (under the
 * engine's lock) when its work is finished, and its MPI request (a
 * generalized request) is completed right after. Every wait of the library pauses with nf_engine_pause: the
 * shim's MPI_Wait family (Python's Request.wait is MPI_Wait), and
 * nf_engine_drain (a blocking call queued behind nonblocking ones, a
 * checkpoint, a communicator's release). Waits keep MPI progressing for
 * the caller's other requests.
 */
#ifndef NF_ENGINE_H
#define NF_ENGINE_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "nf_comm.h"
#include "nf_run.h"

typedef struct nf_eng_queue nf_eng_queue_t;

typedef struct nf_job {
    nf_run_args_t a;   /* a.comm: the queue's duplicate, for the pmpi route's calls */
    int route;         /* -1: admission decides */
    /* Runs the call (the API's nf_api_exec: the engine is below the entry
     * points and never calls them). */
    nf_status_t (*exec)(nf_comm_t *c, const nf_run_args_t *a, int route);
    int rc;            /* the call's MPI code, for its status */
    MPI_Request req;   /* the generalized request the program holds */
    uint64_t index;    /* the call's place among its communicator's jobs, from 1 */
    double started;    /* when a worker took it (MPI_Wtime), 0 while queued */
    int warned;        /* its stall was reported */
    atomic_int refs;   /* the request's free_fn and the engine: the last frees */
    struct nf_job *next;
} nf_job_t;

/* How a communicator's nonblocking calls run on this rank. */
typedef enum nf_eng_mode {
    NF_ENG_THREAD = 1, /* queued, run by the engine's workers */
    NF_ENG_NONE,       /* no worker on some rank: PMPI_Iallreduce (admission's
                          calls) or at issue (a forced route) */
    NF_ENG_HERE,       /* one call: the first where this rank has no worker,
                          some other ranks have, and MPI_Init did not agree:
                          at issue on the queue's duplicate, as their jobs */
    NF_ENG_UNSET       /* no worker here, not agreed yet: nf_engine_settle */
} nf_eng_mode_t;

/* Whether this rank can run progress threads (NFCOLL_PROGRESS, and MPI
 * gave MPI_THREAD_MULTIPLE), and what the ranks agreed at MPI_Init (the
 * shim: 1 every rank can, 0 some cannot). Without that agreement (MPI_Init
 * did not come through the shim: mpi4py) the ranks agree in each
 * communicator's first nonblocking call (nf_engine_settle). */
int nf_engine_local(void);
void nf_engine_agreed(int all);
int nf_engine_agreement(void); /* 1, 0, or -1: not agreed */

/* c's queue, made on c's first nonblocking call, without a collective step
 * (the queue's first job makes the duplicate its PMPI calls use). NF_OK
 * with *q set. */
nf_status_t nf_engine_queue(nf_comm_t *c, nf_eng_queue_t **q);
/* How this call on q runs, at its issue. Agreed at MPI_Init: the queue's
 * mode. Not agreed: a rank with workers queues its first call, whose job
 * agrees which ranks have workers; a later call issued before that waits
 * for it (every rank has issued its first call). A rank without runs the
 * agreement in its first call, here. When some rank has no worker, every
 * call after the first is NF_ENG_NONE on every rank; the first is a job
 * (NF_ENG_HERE where there is no worker) unless no rank has workers. */
nf_eng_mode_t nf_engine_settle(nf_eng_queue_t *q);

/* Queue j (j->a, j->route, j->req set; refs counted by the caller) on q
 * in issue order and wake or start a worker: NF_OK. NF_ERR_IO when no
 * worker could be started at all: the caller runs it (nf_engine_run_here). */
nf_status_t nf_engine_submit(nf_eng_queue_t *q, nf_job_t *j);
/* Run a job in the caller (no worker, or none could take it), after the
 * queue's earlier jobs, as the other ranks run theirs (mode: this call's,
 * nf_engine_settle; NF_ENG_NONE on the private communicator, else on the
 * queue's duplicate); its MPI code. */
int nf_engine_run_here(nf_eng_queue_t *q, nf_job_t *j, nf_eng_mode_t mode);
/* One of a job's holders lets go; the last frees it. */
void nf_job_put(nf_job_t *j);

/* Wait until every job queued on c so far has finished (a blocking call
 * on c, a checkpoint, c's release). Keeps MPI progressing. */
void nf_engine_drain(nf_comm_t *c);

/* The shim's waits over reqs[0..n): whether any of them is a job not
 * finished yet (then the shim polls with nf_engine_pause between its PMPI
 * tests instead of PMPI's blocking wait). One atomic load when no job is
 * queued anywhere. */
int nf_engine_holds(const MPI_Request *reqs, int n);
/* Between two polls of a wait: yield, then sleep (woken early by any job's
 * completion) for at most a bound that grows with *polls (start at 0), and
 * report a stalled job once. */
void nf_engine_pause(unsigned *polls);

/* Finish every queued job and stop the workers (before PMPI_Finalize). */
void nf_engine_finalize(void);

#endif
