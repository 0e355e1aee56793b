/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The progress engine's scheduler (lib/api/nf_sched.h) driven with fake
 * jobs, no MPI: order per queue, workers >= busy queues (a job that waits
 * for a late peer holds only its own queue), the setup step once and
 * first, drains and their wake-ups, running at issue, the stall report of
 * a first job, idle workers leaving, teardown with jobs in flight, the
 * workers' signal mask and name.
 * Check forks each test, so each starts with a fresh scheduler.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_getname_np */
#endif
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nf_sched.h"

/* A fake job: appends its tag to its log; a gated one first waits until
 * its gate opens (a late peer). */
typedef struct fake {
    nf_sched_job_t s;
    int tag;
    atomic_int *gate;    /* NULL: no wait */
    atomic_int *entered; /* set when it starts */
    struct flog *log;
    atomic_int done;
} fake_t;

typedef struct flog {
    pthread_mutex_t lock;
    int n, tags[256];
} flog_t;

static void flog_add(flog_t *l, int tag)
{
    pthread_mutex_lock(&l->lock);
    if (l->n < 256)
        l->tags[l->n++] = tag;
    pthread_mutex_unlock(&l->lock);
}

static void fake_run(nf_sched_job_t *s)
{
    fake_t *f = (fake_t *)s;
    if (f->entered != NULL)
        atomic_store(f->entered, 1);
    while (f->gate != NULL && !atomic_load(f->gate))
        usleep(200);
    flog_add(f->log, f->tag);
}

static void fake_done(nf_sched_job_t *s) { atomic_store(&((fake_t *)s)->done, 1); }

static void fake_init(fake_t *f, int tag, flog_t *log)
{
    memset(f, 0, sizeof(*f));
    f->s.run = fake_run;
    f->s.done = fake_done;
    f->tag = tag;
    f->log = log;
}

/* The setup step logs tag 0 on its queue's log. */
static void setup_log(nf_sched_queue_t *q) { flog_add(q->owner, 0); }

static void queue_init(nf_sched_queue_t *q, flog_t *log)
{
    memset(q, 0, sizeof(*q));
    q->owner = log;
    q->setup = setup_log;
    nf_sched_queue_add(q);
}

static void flog_init(flog_t *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->lock, NULL);
}

/* Poll (bounded: a failing test ends instead of hanging) until *v is set. */
static int wait_for(atomic_int *v)
{
    for (int i = 0; i < 50000 && !atomic_load(v); i++)
        usleep(200);
    return atomic_load(v);
}

static void config(double stall, void (*fn)(nf_sched_queue_t *, nf_sched_job_t *, double))
{
    nf_sched_config_t cfg = {.idle_ns = 20000000L, .stall_limit = stall, .stall = fn};
    nf_sched_configure(&cfg);
}

START_TEST(test_order)
{
    flog_t log;
    nf_sched_queue_t q;
    fake_t f[100];
    flog_init(&log);
    config(0, NULL);
    queue_init(&q, &log);
    for (int i = 0; i < 100; i++) {
        fake_init(&f[i], i + 1, &log);
        ck_assert_int_eq(nf_sched_submit(&q, &f[i].s), NF_OK);
    }
    nf_sched_drain(&q);
    ck_assert_int_eq(log.n, 101);
    ck_assert_int_eq(log.tags[0], 0); /* the setup, before the first job */
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(log.tags[i + 1], i + 1);
        ck_assert_uint_eq(f[i].s.index, (unsigned)i + 1);
        ck_assert(atomic_load(&f[i].done));
    }
    ck_assert_int_eq(nf_sched_pending(), 0);
    nf_sched_queue_remove(&q);
    nf_sched_finalize();
}
END_TEST

/* Queue A's head waits for a late peer; B's job still runs (a worker of
 * its own), A's second job waits behind its head. */
START_TEST(test_late_peer_holds_own_queue)
{
    flog_t la, lb;
    nf_sched_queue_t a, b;
    fake_t a1, a2, b1;
    atomic_int gate = 0, entered = 0;
    unsigned workers, busy;
    flog_init(&la), flog_init(&lb);
    config(0, NULL);
    queue_init(&a, &la), queue_init(&b, &lb);
    fake_init(&a1, 1, &la), fake_init(&a2, 2, &la), fake_init(&b1, 1, &lb);
    a1.gate = &gate, a1.entered = &entered;
    ck_assert_int_eq(nf_sched_submit(&a, &a1.s), NF_OK);
    ck_assert_int_eq(nf_sched_submit(&a, &a2.s), NF_OK);
    ck_assert(wait_for(&entered));
    ck_assert_int_eq(nf_sched_submit(&b, &b1.s), NF_OK);
    nf_sched_counts(&workers, &busy);
    ck_assert_uint_eq(busy, 2);
    ck_assert_uint_ge(workers, busy);
    nf_sched_drain(&b); /* returns although A's head still waits */
    ck_assert(atomic_load(&b1.done));
    ck_assert(!atomic_load(&a1.done) && !atomic_load(&a2.done));
    ck_assert_int_eq(la.n, 1); /* A's setup only */
    atomic_store(&gate, 1);
    nf_sched_drain(&a);
    ck_assert_int_eq(la.n, 3);
    ck_assert_int_eq(la.tags[1], 1);
    ck_assert_int_eq(la.tags[2], 2);
    nf_sched_queue_remove(&a), nf_sched_queue_remove(&b);
    nf_sched_finalize();
}
END_TEST

/* Eight queues each with a waiting head: eight workers, none shared. */
START_TEST(test_workers_ge_busy)
{
    enum { Q = 8 };
    flog_t l[Q];
    nf_sched_queue_t q[Q];
    fake_t f[Q];
    atomic_int gate = 0, entered[Q];
    unsigned workers, busy;
    config(0, NULL);
    for (int i = 0; i < Q; i++) {
        flog_init(&l[i]);
        queue_init(&q[i], &l[i]);
        fake_init(&f[i], 1, &l[i]);
        atomic_init(&entered[i], 0);
        f[i].gate = &gate, f[i].entered = &entered[i];
        ck_assert_int_eq(nf_sched_submit(&q[i], &f[i].s), NF_OK);
    }
    for (int i = 0; i < Q; i++) /* every head runs at once: a worker each */
        ck_assert(wait_for(&entered[i]));
    nf_sched_counts(&workers, &busy);
    ck_assert_uint_eq(busy, Q);
    ck_assert_uint_ge(workers, Q);
    atomic_store(&gate, 1);
    for (int i = 0; i < Q; i++) {
        nf_sched_drain(&q[i]);
        nf_sched_queue_remove(&q[i]);
    }
    /* idle spare workers leave after idle_ns; one stays */
    for (int i = 0; i < 5000; i++) {
        nf_sched_counts(&workers, &busy);
        if (workers == 1)
            break;
        usleep(1000);
    }
    ck_assert_uint_eq(workers, 1);
    ck_assert_uint_eq(busy, 0);
    nf_sched_finalize();
    nf_sched_counts(&workers, &busy);
    ck_assert_uint_eq(workers, 0);
}
END_TEST

/* A drain with no job runs the setup; later jobs and drains never run it
 * again; run_here runs after the earlier jobs. */
START_TEST(test_setup_once)
{
    flog_t log;
    nf_sched_queue_t q;
    fake_t f1, f2, h;
    atomic_int gate = 0;
    flog_init(&log);
    config(0, NULL);
    queue_init(&q, &log);
    ck_assert_int_eq(atomic_load(&q.state), NF_SCHED_NEW);
    nf_sched_drain(&q);
    ck_assert_int_eq(atomic_load(&q.state), NF_SCHED_DONE);
    ck_assert_int_eq(log.n, 1);
    fake_init(&f1, 1, &log), fake_init(&f2, 2, &log), fake_init(&h, 3, &log);
    f1.gate = &gate;
    ck_assert_int_eq(nf_sched_submit(&q, &f1.s), NF_OK);
    ck_assert_int_eq(nf_sched_submit(&q, &f2.s), NF_OK);
    atomic_store(&gate, 1);
    nf_sched_run_here(&q, &h.s); /* waits for 1 and 2 */
    ck_assert_int_eq(log.n, 4);
    ck_assert_int_eq(log.tags[0], 0);
    ck_assert_int_eq(log.tags[1], 1);
    ck_assert_int_eq(log.tags[2], 2);
    ck_assert_int_eq(log.tags[3], 3);
    ck_assert_uint_eq(h.s.index, 3);
    ck_assert(!atomic_load(&h.done)); /* run_here leaves completion to the caller */
    nf_sched_drain(&q);
    ck_assert_int_eq(log.n, 4);
    nf_sched_queue_remove(&q);
    nf_sched_finalize();
}
END_TEST

/* A waiter in drain is woken by the completion (no lost wake-up), from
 * another thread. */
typedef struct { nf_sched_queue_t *q; atomic_int back; } drainer_t;

static void *drainer(void *p)
{
    drainer_t *d = p;
    nf_sched_drain(d->q);
    atomic_store(&d->back, 1);
    return NULL;
}

START_TEST(test_drain_wakeup)
{
    flog_t log;
    nf_sched_queue_t q;
    fake_t f;
    atomic_int gate = 0, entered = 0;
    pthread_t t;
    drainer_t d = {&q, 0};
    flog_init(&log);
    config(0, NULL);
    queue_init(&q, &log);
    fake_init(&f, 1, &log);
    f.gate = &gate, f.entered = &entered;
    ck_assert_int_eq(nf_sched_submit(&q, &f.s), NF_OK);
    ck_assert(wait_for(&entered));
    pthread_create(&t, NULL, drainer, &d);
    usleep(20000);
    ck_assert(!atomic_load(&d.back)); /* still waiting for the job */
    atomic_store(&gate, 1);
    pthread_join(t, NULL);
    ck_assert(atomic_load(&d.back) && atomic_load(&f.done));
    nf_sched_queue_remove(&q);
    nf_sched_finalize();
}
END_TEST

/* The find callback sees queued jobs only. */
static int match_tag(const nf_sched_job_t *j, const void *arg)
{
    return ((const fake_t *)j)->tag == *(const int *)arg;
}

START_TEST(test_find)
{
    flog_t log;
    nf_sched_queue_t q;
    fake_t f;
    atomic_int gate = 0, entered = 0;
    int seven = 7, eight = 8;
    flog_init(&log);
    config(0, NULL);
    queue_init(&q, &log);
    ck_assert(!nf_sched_find(match_tag, &seven));
    fake_init(&f, 7, &log);
    f.gate = &gate, f.entered = &entered;
    ck_assert_int_eq(nf_sched_submit(&q, &f.s), NF_OK);
    ck_assert(nf_sched_find(match_tag, &seven));
    ck_assert(!nf_sched_find(match_tag, &eight));
    atomic_store(&gate, 1);
    nf_sched_drain(&q);
    ck_assert(!nf_sched_find(match_tag, &seven));
    nf_sched_queue_remove(&q);
    nf_sched_finalize();
}
END_TEST

/* A process's first job that waits past the limit is reported, once (the
 * engine once skipped it: its start read 0.0 on Open MPI's clock). */
static atomic_int stalls;
static uint64_t stalled_index;

static void on_stall(nf_sched_queue_t *q, nf_sched_job_t *j, double waited)
{
    (void)q;
    ck_assert(waited >= 0.05);
    stalled_index = j->index;
    atomic_fetch_add(&stalls, 1);
}

START_TEST(test_stall_first_job)
{
    flog_t log;
    nf_sched_queue_t q;
    fake_t f;
    atomic_int gate = 0, entered = 0;
    flog_init(&log);
    config(0.05, on_stall);
    queue_init(&q, &log);
    nf_sched_stalls();
    ck_assert_int_eq(atomic_load(&stalls), 0); /* nothing queued */
    fake_init(&f, 1, &log);
    f.gate = &gate, f.entered = &entered;
    ck_assert_int_eq(nf_sched_submit(&q, &f.s), NF_OK);
    ck_assert(wait_for(&entered));
    usleep(100000);
    nf_sched_stalls();
    nf_sched_stalls();
    ck_assert_int_eq(atomic_load(&stalls), 1);
    ck_assert_uint_eq(stalled_index, 1);
    atomic_store(&gate, 1);
    nf_sched_drain(&q);
    nf_sched_queue_remove(&q);
    nf_sched_finalize();
}
END_TEST

/* Finalize with jobs in flight on several queues: every one runs first,
 * then no worker is left; a later submission starts one again. */
START_TEST(test_teardown_in_flight)
{
    enum { Q = 3, J = 20 };
    flog_t l[Q];
    nf_sched_queue_t q[Q];
    fake_t f[Q][J], again;
    unsigned workers, busy;
    config(0, NULL);
    for (int i = 0; i < Q; i++) {
        flog_init(&l[i]);
        queue_init(&q[i], &l[i]);
        for (int k = 0; k < J; k++) {
            fake_init(&f[i][k], k + 1, &l[i]);
            ck_assert_int_eq(nf_sched_submit(&q[i], &f[i][k].s), NF_OK);
        }
    }
    nf_sched_finalize();
    nf_sched_counts(&workers, &busy);
    ck_assert_uint_eq(workers, 0);
    ck_assert_uint_eq(busy, 0);
    ck_assert_int_eq(nf_sched_pending(), 0);
    for (int i = 0; i < Q; i++) {
        ck_assert_int_eq(l[i].n, J + 1);
        for (int k = 0; k < J; k++)
            ck_assert(atomic_load(&f[i][k].done));
    }
    fake_init(&again, 99, &l[0]);
    ck_assert_int_eq(nf_sched_submit(&q[0], &again.s), NF_OK);
    nf_sched_drain(&q[0]);
    ck_assert(atomic_load(&again.done));
    for (int i = 0; i < Q; i++)
        nf_sched_queue_remove(&q[i]);
    nf_sched_finalize();
}
END_TEST

/* A worker runs with the asynchronous signals blocked (a fault still
 * reaches its handler) and under its name. */
static atomic_int sig_blocked, named;

static void probe_run(nf_sched_job_t *s)
{
    sigset_t now;
    char name[16] = "";
    (void)s;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    atomic_store(&sig_blocked, sigismember(&now, SIGALRM) && sigismember(&now, SIGINT) &&
                                   sigismember(&now, SIGUSR1) && !sigismember(&now, SIGSEGV) &&
                                   !sigismember(&now, SIGABRT));
    pthread_getname_np(pthread_self(), name, sizeof(name));
    atomic_store(&named, strcmp(name, "nfcoll-worker") == 0);
}

START_TEST(test_worker_signals)
{
    nf_sched_queue_t q;
    nf_sched_job_t j = {.run = probe_run};
    flog_t log;
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL); /* the submitter blocks nothing */
    flog_init(&log);
    config(0, NULL);
    queue_init(&q, &log);
    ck_assert_int_eq(nf_sched_submit(&q, &j), NF_OK);
    nf_sched_drain(&q);
    ck_assert(atomic_load(&sig_blocked));
    ck_assert(atomic_load(&named));
    sigset_t after;
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    ck_assert(!sigismember(&after, SIGALRM)); /* the caller's mask is back */
    nf_sched_queue_remove(&q);
    nf_sched_finalize();
}
END_TEST

static Suite *engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("sched");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_late_peer_holds_own_queue);
    tcase_add_test(tc, test_workers_ge_busy);
    tcase_add_test(tc, test_setup_once);
    tcase_add_test(tc, test_drain_wakeup);
    tcase_add_test(tc, test_find);
    tcase_add_test(tc, test_stall_first_job);
    tcase_add_test(tc, test_teardown_in_flight);
    tcase_add_test(tc, test_worker_signals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(engine_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
