/* SPDX-License-Identifier: BSD-3-Clause */
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
 * The scheduling is nf_sched.h's, which calls no MPI; this module adds MPI:
 * each communicator's setup step, its jobs' duplicate, the requests.
 * Each job is its own completion record: it leaves its queue when its work
 * is finished, and its MPI request (a generalized request) is completed
 * right after. Every wait of the library pauses with nf_engine_pause: the
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
#include "nf_sched.h"

typedef struct nf_eng_queue nf_eng_queue_t;

typedef struct nf_job {
    nf_sched_job_t s;  /* first: the scheduler's part */
    nf_eng_queue_t *q;
    nf_run_args_t a;   /* a.comm: the queue's duplicate, for the pmpi route's calls */
    int route;         /* -1: admission decides */
    /* Runs the call (the API's nf_api_exec: the engine is below the entry
     * points and never calls them). */
    nf_status_t (*exec)(nf_comm_t *c, const nf_run_args_t *a, int route);
    int rc;            /* the call's MPI code, for its status */
    MPI_Request req;   /* the generalized request the program holds */
    atomic_int refs;   /* the request's free_fn and the engine: the last frees */
} nf_job_t;

/* How a communicator's nonblocking calls run on this rank, known at issue
 * without any collective step. */
typedef enum nf_eng_mode {
    NF_ENG_THREAD = 1, /* queued, run by the engine's workers */
    NF_ENG_NONE        /* no worker on some rank: PMPI_Iallreduce (admission's
                          calls) or at issue (a forced route) */
} nf_eng_mode_t;

/* Whether this rank can run progress threads (nf_config_t.threads), and
 * what the ranks agreed at MPI_Init (the shim: 1 every rank can, 0 some
 * cannot). Without that agreement (MPI_Init did not come through the
 * shim: mpi4py) each communicator's ranks agreed it when its state was
 * made (nf_comm_t.threads_all). */
int nf_engine_local(void);
void nf_engine_agreed(int all);
int nf_engine_agreement(void); /* 1, 0, or -1: not agreed */

/* c's queue, made on first need, without a collective step. NF_OK with *q
 * set. */
nf_status_t nf_engine_queue(nf_comm_t *c, nf_eng_queue_t **q);
/* How a call on q runs, at its issue: local, no wait. */
nf_eng_mode_t nf_engine_mode(nf_eng_queue_t *q);

/* Queue j (j->a, j->route, j->req set; refs counted by the caller) on q
 * in issue order and wake or start a worker: NF_OK. NF_ERR_IO when no
 * worker could be started at all: the caller runs it (nf_engine_run_here). */
nf_status_t nf_engine_submit(nf_eng_queue_t *q, nf_job_t *j);
/* Run a job in the caller (no worker, or none could take it), after the
 * queue's earlier jobs, as the other ranks run theirs; its MPI code. */
int nf_engine_run_here(nf_eng_queue_t *q, nf_job_t *j);
/* One of a job's holders lets go; the last frees it. */
void nf_job_put(nf_job_t *j);

/* Wait until every job queued on c so far has finished, then set c up if
 * it is not (the queue's setup step, nf_comm_complete): collective on c's
 * private duplicate, so called where every rank of c is, in the same order
 * (a blocking call on c, a checkpoint, a placement query). Keeps MPI
 * progressing. */
void nf_engine_drain(nf_comm_t *c);

/* The shim's waits over reqs[0..n): whether any of them is a job not
 * finished yet (then the shim polls with nf_engine_pause between its PMPI
 * tests instead of PMPI's blocking wait). One atomic load when no job is
 * queued anywhere. */
int nf_engine_holds(const MPI_Request *reqs, int n);
/* Between two polls of a wait (nf_sched_pause). */
void nf_engine_pause(unsigned *polls);

/* Finish every queued job and stop the workers (before PMPI_Finalize). */
void nf_engine_finalize(void);

#endif
