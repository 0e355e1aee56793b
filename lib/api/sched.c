/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The progress engine's scheduler (nf_sched.h): queues, workers, the ready
 * list, each queue's setup step and the one wait. No MPI call: the engine
 * gives the callbacks. docs/design.md, "The progress engine".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "nf_log.h"
#include "nf_sched.h"

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work; /* workers: a ready queue, or stop */
    pthread_cond_t done; /* waiters: some job finished, some queue quiet */
    pthread_cond_t gone; /* nf_sched_finalize: the last worker left */
    nf_sched_queue_t *ready, *ready_tail, *all;
    unsigned workers, nbusy;
    int stop;
    atomic_int pending;  /* jobs submitted and not finished, on every queue */
    nf_sched_config_t cfg;
} nf_sched = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
              PTHREAD_COND_INITIALIZER, NULL, NULL, NULL, 0, 0, 0, 0,
              {1000000000L, NULL, NULL, NULL, 0.0, NULL}};

/* Waits: yields first, then sleeps from 10 us doubling up to this bound
 * between polls (docs/design.md, "The progress engine": what it costs). */
#define NF_SCHED_YIELDS 2u
#define NF_SCHED_SLEEP_MAX_US 1000L

void nf_sched_configure(const nf_sched_config_t *cfg)
{
    pthread_mutex_lock(&nf_sched.lock);
    nf_sched.cfg = *cfg;
    if (nf_sched.cfg.idle_ns <= 0)
        nf_sched.cfg.idle_ns = 1000000000L;
    pthread_mutex_unlock(&nf_sched.lock);
}

double nf_sched_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nf_sched_deadline(struct timespec *t, long ns)
{
    clock_gettime(CLOCK_REALTIME, t);
    t->tv_nsec += ns;
    t->tv_sec += t->tv_nsec / 1000000000L;
    t->tv_nsec %= 1000000000L;
}

/* ------------------------------------------------------------ queues */

void nf_sched_queue_add(nf_sched_queue_t *q)
{
    atomic_init(&q->quiet, 1);
    pthread_mutex_lock(&nf_sched.lock);
    q->prev = NULL;
    q->next = nf_sched.all;
    if (nf_sched.all != NULL)
        nf_sched.all->prev = q;
    nf_sched.all = q;
    q->linked = 1;
    pthread_mutex_unlock(&nf_sched.lock);
}

void nf_sched_queue_remove(nf_sched_queue_t *q)
{
    pthread_mutex_lock(&nf_sched.lock);
    if (q->linked) {
        if (q->prev != NULL)
            q->prev->next = q->next;
        else
            nf_sched.all = q->next;
        if (q->next != NULL)
            q->next->prev = q->prev;
        q->linked = 0;
    }
    pthread_mutex_unlock(&nf_sched.lock);
}

/* The setup step, once: by the one thread that holds q (a worker, or a
 * drainer that found it quiet, which no worker takes before it submits). */
static void nf_sched_setup(nf_sched_queue_t *q)
{
    if (atomic_load_explicit(&q->state, memory_order_acquire) == NF_SCHED_DONE)
        return;
    if (q->setup != NULL)
        q->setup(q);
    atomic_store_explicit(&q->state, NF_SCHED_DONE, memory_order_release);
}

/* ---------------------------------------------------------- workers */

static nf_sched_queue_t *nf_sched_ready_pop(void)
{
    nf_sched_queue_t *q = nf_sched.ready;
    if (q != NULL) {
        nf_sched.ready = q->rnext;
        if (nf_sched.ready == NULL)
            nf_sched.ready_tail = NULL;
        q->rnext = NULL;
    }
    return q;
}

/* Run q's jobs until it is empty (lock held on entry and exit). */
static void nf_sched_hold(nf_sched_queue_t *q)
{
    nf_sched_job_t *j;
    while ((j = q->head) != NULL) {
        j->started = nf_sched_now();
        j->running = 1;
        pthread_mutex_unlock(&nf_sched.lock);
        nf_sched_setup(q);
        j->run(j);
        pthread_mutex_lock(&nf_sched.lock);
        q->head = j->next;
        if (q->head == NULL)
            q->tail = NULL;
        pthread_mutex_unlock(&nf_sched.lock);
        if (j->done != NULL)
            j->done(j); /* may free j */
        pthread_mutex_lock(&nf_sched.lock);
        atomic_fetch_sub(&nf_sched.pending, 1);
        pthread_cond_broadcast(&nf_sched.done);
    }
    q->busy = 0;
    nf_sched.nbusy--;
    atomic_store_explicit(&q->quiet, 1, memory_order_release);
    pthread_cond_broadcast(&nf_sched.done); /* nf_sched_drain's waiters */
}

static void *nf_sched_worker(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "nfcoll-worker"); /* top -H, gdb, ps -L */
    if (nf_sched.cfg.worker_start != NULL)
        nf_sched.cfg.worker_start();
    pthread_mutex_lock(&nf_sched.lock);
    for (;;) {
        nf_sched_queue_t *q = nf_sched_ready_pop();
        if (q != NULL) {
            nf_sched_hold(q);
            continue;
        }
        if (nf_sched.stop)
            break;
        struct timespec t;
        nf_sched_deadline(&t, nf_sched.cfg.idle_ns);
        int e = pthread_cond_timedwait(&nf_sched.work, &nf_sched.lock, &t);
        if (e == ETIMEDOUT && nf_sched.ready == NULL && nf_sched.workers > nf_sched.nbusy &&
            nf_sched.workers > 1)
            break; /* idle: one of the spare workers leaves */
    }
    nf_sched.workers--;
    pthread_cond_broadcast(&nf_sched.gone);
    pthread_mutex_unlock(&nf_sched.lock);
    return NULL;
}

static const int nf_sched_sync_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP,
                                            SIGSYS};

/* Start one worker (lock held). NF_OK, or NF_ERR_IO when the thread cannot
 * be made (warned once). */
static nf_status_t nf_sched_spawn(void)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    /* A worker starts with the asynchronous signals blocked (it inherits the
     * mask), so the program's handlers run on the program's own threads. */
    sigfillset(&all);
    /* but not the synchronous ones: a fault on a worker must still reach the
     * handlers that report it (ASan, MPI's backtrace, Python's faulthandler) */
    for (size_t i = 0; i < sizeof(nf_sched_sync_signals) / sizeof(int); i++)
        sigdelset(&all, nf_sched_sync_signals[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_attr_init(&attr);
    if (e == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        e = pthread_create(&t, &attr, nf_sched_worker, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e == 0) {
        if (nf_sched.workers++ == 0 && nf_sched.cfg.first_worker != NULL)
            nf_sched.cfg.first_worker();
        return NF_OK;
    }
    errno = e;
    nf_log_warn_once("cannot start a progress thread (%m): nonblocking calls on some "
                     "communicators wait for another's to finish");
    return NF_ERR_IO;
}

nf_status_t nf_sched_submit(nf_sched_queue_t *q, nf_sched_job_t *j)
{
    nf_status_t st;
    j->next = NULL;
    j->running = j->warned = 0;
    pthread_mutex_lock(&nf_sched.lock);
    if (nf_sched.workers == 0 && (st = nf_sched_spawn()) != NF_OK) {
        pthread_mutex_unlock(&nf_sched.lock);
        return st; /* no worker at all: the caller runs it */
    }
    j->index = ++q->issued;
    if (q->tail != NULL)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    atomic_fetch_add(&nf_sched.pending, 1);
    if (!q->busy) {
        q->busy = 1;
        atomic_store(&q->quiet, 0);
        nf_sched.nbusy++;
        if (nf_sched.ready_tail != NULL)
            nf_sched.ready_tail->rnext = q;
        else
            nf_sched.ready = q;
        nf_sched.ready_tail = q;
        if (nf_sched.workers < nf_sched.nbusy)
            nf_sched_spawn(); /* failing, the queue waits for a worker to come free */
        pthread_cond_signal(&nf_sched.work);
    }
    pthread_mutex_unlock(&nf_sched.lock);
    return NF_OK;
}

void nf_sched_run_here(nf_sched_queue_t *q, nf_sched_job_t *j)
{
    nf_sched_drain(q); /* the earlier jobs, then the setup */
    pthread_mutex_lock(&nf_sched.lock);
    j->index = ++q->issued;
    pthread_mutex_unlock(&nf_sched.lock);
    j->run(j);
}

/* ------------------------------------------------------------- waits */

int nf_sched_pending(void) { return atomic_load_explicit(&nf_sched.pending, memory_order_acquire); }

void nf_sched_counts(unsigned *workers, unsigned *busy)
{
    pthread_mutex_lock(&nf_sched.lock);
    *workers = nf_sched.workers;
    *busy = nf_sched.nbusy;
    pthread_mutex_unlock(&nf_sched.lock);
}

int nf_sched_find(int (*match)(const nf_sched_job_t *j, const void *arg), const void *arg)
{
    int found = 0;
    if (nf_sched_pending() == 0)
        return 0;
    pthread_mutex_lock(&nf_sched.lock);
    for (const nf_sched_queue_t *q = nf_sched.all; q != NULL && !found; q = q->next)
        for (const nf_sched_job_t *j = q->head; j != NULL && !found; j = j->next)
            found = match(j, arg);
    pthread_mutex_unlock(&nf_sched.lock);
    return found;
}

void nf_sched_stalls(void)
{
    pthread_mutex_lock(&nf_sched.lock);
    double limit = nf_sched.cfg.stall_limit;
    if (limit > 0.0 && nf_sched.cfg.stall != NULL) {
        double now = nf_sched_now();
        for (nf_sched_queue_t *q = nf_sched.all; q != NULL; q = q->next) {
            nf_sched_job_t *j = q->head;
            if (j == NULL || !j->running || j->warned || now - j->started < limit)
                continue;
            j->warned = 1;
            nf_sched.cfg.stall(q, j, now - j->started);
        }
    }
    pthread_mutex_unlock(&nf_sched.lock);
}

void nf_sched_pause(unsigned *polls)
{
    unsigned k = (*polls)++;
    if (k < NF_SCHED_YIELDS) {
        sched_yield();
        return;
    }
    long us = 10L << (k - NF_SCHED_YIELDS < 7 ? k - NF_SCHED_YIELDS : 7);
    struct timespec t;
    nf_sched_deadline(&t, (us < NF_SCHED_SLEEP_MAX_US ? us : NF_SCHED_SLEEP_MAX_US) * 1000L);
    pthread_mutex_lock(&nf_sched.lock);
    pthread_cond_timedwait(&nf_sched.done, &nf_sched.lock, &t);
    pthread_mutex_unlock(&nf_sched.lock);
    if ((k & 255u) == 255u) /* about every quarter second */
        nf_sched_stalls();
}

void nf_sched_wait(nf_sched_queue_t *q)
{
    unsigned polls = 0;
    while (!atomic_load_explicit(&q->quiet, memory_order_acquire)) {
        if (nf_sched.cfg.poke != NULL)
            nf_sched.cfg.poke();
        nf_sched_pause(&polls);
    }
}

void nf_sched_drain(nf_sched_queue_t *q)
{
    nf_sched_wait(q);
    /* Quiet: no worker holds q, and only the caller submits to it (the
     * queue's calls come in the communicator's order, from one thread at a
     * time), so nobody else runs the setup now. */
    nf_sched_setup(q);
}

void nf_sched_finalize(void)
{
    pthread_mutex_lock(&nf_sched.lock);
    nf_sched.stop = 1;
    pthread_cond_broadcast(&nf_sched.work);
    while (nf_sched.workers > 0) /* after they ran everything queued */
        pthread_cond_wait(&nf_sched.gone, &nf_sched.lock);
    nf_sched.stop = 0;
    pthread_mutex_unlock(&nf_sched.lock);
}
