/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Legal MPI programs that mix MPI_Iallreduce with other requests,
 * communicators and threads (docs/design.md, "The progress engine"). A
 * plain MPI program: run without libnfcoll it shows the program itself
 * finishes; preloaded or relinked under tests/policy_shim/engine.policy
 * every float sum is binary, and each nonblocking result must be bit for
 * bit the blocking call's on a twin communicator (its own residuals, the
 * same inputs in the same order).
 *
 *   test_engine mixed [BYTES]    MPI_Iallreduce with large MPI_Isend/Irecv
 *                                in both directions, completed together by
 *                                Waitall, Waitany, Waitsome, Testall or
 *                                Wait, while the peer receives first
 *   test_engine orders N         N communicators, issued in another order
 *                                on every rank
 *   test_engine threads T R      T threads (MPI_THREAD_MULTIPLE), each R
 *                                times MPI_Iallreduce + MPI_Wait on its own
 *                                communicator
 *   test_engine inter            MPI_Iallreduce on an intercommunicator
 *                                does not block: the peer waits for a
 *                                message sent after it
 *                                (NF_TEST_LATE=S: rank 1 issues its second
 *                                step S seconds late)
 *   test_engine query LEVEL      MPI_Init_thread(LEVEL): MPI_Query_thread
 *                                and MPI_Is_thread_main say what it said
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#define COUNT 70001 /* floats per call: 280 KB, several scale blocks */

static int rank, nranks;

static int fail(const char *what, const char *fmt, long a, long b)
{
    printf("FAIL rank %d: %s: ", rank, what);
    printf(fmt, a, b);
    printf("\n");
    fflush(stdout);
    return 1;
}

/* Inputs that differ per rank, call and element, exactly representable. */
static void fill(float *x, int n, int call, int salt)
{
    for (int i = 0; i < n; i++) {
        uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(call * 40503u + salt * 977u) ^
                     (uint32_t)(rank * 2246822519u);
        h ^= h >> 15;
        x[i] = (float)((int)(h % 2001u) - 1000) / 64.0f;
    }
}

static int same(const float *a, const float *b, int n, const char *what, int call)
{
    if (memcmp(a, b, (size_t)n * sizeof(float)) == 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
            return fail(what, "call %ld: nonblocking differs from blocking at %ld", call, i);
    return 1;
}

/* Complete reqs[0..n) the way method m says. */
static int complete(MPI_Request *reqs, int n, int m)
{
    MPI_Status st[8];
    int rc = MPI_SUCCESS, left = n, idx, outs[8], k, flag = 0;
    switch (m % 5) {
    case 0:
        rc = MPI_Waitall(n, reqs, st);
        break;
    case 1:
        while (left-- > 0 && rc == MPI_SUCCESS)
            rc = MPI_Waitany(n, reqs, &idx, &st[0]);
        break;
    case 2:
        while (left > 0 && rc == MPI_SUCCESS) {
            rc = MPI_Waitsome(n, reqs, &k, outs, st);
            left -= k == MPI_UNDEFINED ? left : k;
        }
        break;
    case 3:
        while (!flag && rc == MPI_SUCCESS)
            rc = MPI_Testall(n, reqs, &flag, st);
        break;
    default:
        for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
            rc = MPI_Wait(&reqs[i], &st[0]);
    }
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL)
            return fail("completion", "method %ld: request %ld still active", m, i);
    return rc == MPI_SUCCESS ? 0 : fail("completion", "method %ld: rc %ld", m, rc);
}

/* ------------------------------------------------------------ mixed */

static int mixed(long bytes)
{
    MPI_Comm X, Y;
    int n = (int)(bytes / (long)sizeof(float)), bad = 0;
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    float *out = malloc((size_t)n * sizeof(float)), *in = malloc((size_t)n * sizeof(float));
    float *x = malloc(COUNT * sizeof(float)), *ref = malloc(COUNT * sizeof(float));
    float *y = malloc(COUNT * sizeof(float));
    MPI_Comm_dup(MPI_COMM_WORLD, &X);
    MPI_Comm_dup(MPI_COMM_WORLD, &Y);
    for (int s = 0; s < 10; s++) {
        fill(x, COUNT, s, 1);
        MPI_Allreduce(MPI_IN_PLACE, x, COUNT, MPI_FLOAT, MPI_SUM, X);
        memcpy(ref, x, COUNT * sizeof(float));
        fill(y, COUNT, s, 1);
        for (int i = 0; i < n; i++)
            out[i] = (float)(rank * 7 + s + i % 1000);
        MPI_Request r[3];
        if (rank % 2 == s % 2) { /* early: the allreduce first, then the messages, one wait */
            MPI_Iallreduce(MPI_IN_PLACE, y, COUNT, MPI_FLOAT, MPI_SUM, Y, &r[0]);
            MPI_Isend(out, n, MPI_FLOAT, next, s, MPI_COMM_WORLD, &r[1]);
            MPI_Irecv(in, n, MPI_FLOAT, prev, s, MPI_COMM_WORLD, &r[2]);
            bad |= complete(r, 3, s);
        } else { /* late: the messages first, then the allreduce */
            MPI_Irecv(in, n, MPI_FLOAT, prev, s, MPI_COMM_WORLD, &r[1]);
            MPI_Isend(out, n, MPI_FLOAT, next, s, MPI_COMM_WORLD, &r[2]);
            MPI_Status st2[2]; /* not MPI_STATUSES_IGNORE: gcc sizes MPICH's at 0 */
            MPI_Waitall(2, &r[1], st2);
            MPI_Iallreduce(MPI_IN_PLACE, y, COUNT, MPI_FLOAT, MPI_SUM, Y, &r[0]);
            bad |= complete(r, 1, s);
        }
        bad |= same(y, ref, COUNT, "mixed", s);
        for (int i = 0; i < n && !bad; i++)
            if (in[i] != (float)(prev * 7 + s + i % 1000))
                bad |= fail("message", "step %ld: element %ld wrong", s, i);
    }
    MPI_Comm_free(&X);
    MPI_Comm_free(&Y);
    free(out), free(in), free(x), free(ref), free(y);
    if (!bad)
        printf("ok rank %d: mixed, 10 steps, %ld-byte messages both ways\n", rank, bytes);
    return bad;
}

/* ----------------------------------------------------------- orders */

static int orders(int ncomm)
{
    MPI_Comm *X = malloc((size_t)ncomm * sizeof(MPI_Comm));
    MPI_Comm *Y = malloc((size_t)ncomm * sizeof(MPI_Comm));
    float *x = malloc((size_t)ncomm * COUNT * sizeof(float));
    float *y = malloc((size_t)ncomm * COUNT * sizeof(float));
    MPI_Request *r = malloc((size_t)ncomm * sizeof(MPI_Request));
    int bad = 0;
    for (int i = 0; i < ncomm; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &X[i]);
        MPI_Comm_dup(MPI_COMM_WORLD, &Y[i]);
    }
    for (int s = 0; s < 6; s++) {
        for (int i = 0; i < ncomm; i++) {
            fill(x + (size_t)i * COUNT, COUNT, s, i);
            MPI_Allreduce(MPI_IN_PLACE, x + (size_t)i * COUNT, COUNT, MPI_FLOAT, MPI_SUM, X[i]);
            fill(y + (size_t)i * COUNT, COUNT, s, i);
        }
        if (s == 1 && rank == 1 && getenv("NF_TEST_LATE") != NULL)
            sleep((unsigned)atoi(getenv("NF_TEST_LATE"))); /* a late peer: NFCOLL_STALL_WARN */
        /* rank r issues from communicator (r + s) % N on, odd ranks backwards */
        for (int k = 0; k < ncomm; k++) {
            int i = (rank + s + (rank % 2 ? ncomm - k : k)) % ncomm;
            MPI_Iallreduce(MPI_IN_PLACE, y + (size_t)i * COUNT, COUNT, MPI_FLOAT, MPI_SUM, Y[i],
                           &r[i]);
        }
        bad |= complete(r, ncomm < 8 ? ncomm : 8, s);
        for (int i = 8; i < ncomm; i++)
            bad |= complete(&r[i], 1, s);
        for (int i = 0; i < ncomm; i++)
            bad |= same(y + (size_t)i * COUNT, x + (size_t)i * COUNT, COUNT, "orders", s);
    }
    for (int i = 0; i < ncomm; i++) {
        MPI_Comm_free(&X[i]);
        MPI_Comm_free(&Y[i]);
    }
    free(X), free(Y), free(x), free(y), free(r);
    if (!bad)
        printf("ok rank %d: %d communicators in another order per rank, 6 steps\n", rank, ncomm);
    return bad;
}

/* ---------------------------------------------------------- threads */

typedef struct {
    MPI_Comm X, Y;
    int id, reps, bad;
} nt_arg_t;

static void *nt_main(void *p)
{
    nt_arg_t *t = p;
    enum { N = 4099 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (int s = 0; s < t->reps && !t->bad; s++) {
        MPI_Request r;
        fill(x, N, s, t->id);
        fill(y, N, s, t->id);
        MPI_Allreduce(MPI_IN_PLACE, x, N, MPI_FLOAT, MPI_SUM, t->X);
        MPI_Iallreduce(MPI_IN_PLACE, y, N, MPI_FLOAT, MPI_SUM, t->Y, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        t->bad |= same(y, x, N, "threads", s);
    }
    free(x), free(y);
    return NULL;
}

static int threads(int nt, int reps)
{
    nt_arg_t *t = calloc((size_t)nt, sizeof(*t));
    pthread_t *th = calloc((size_t)nt, sizeof(*th));
    int bad = 0;
    for (int i = 0; i < nt; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &t[i].X);
        MPI_Comm_dup(MPI_COMM_WORLD, &t[i].Y);
        t[i].id = i, t[i].reps = reps;
    }
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, nt_main, &t[i]);
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        bad |= t[i].bad;
        MPI_Comm_free(&t[i].X);
        MPI_Comm_free(&t[i].Y);
    }
    free(t), free(th);
    if (!bad)
        printf("ok rank %d: %d threads x %d calls, each on its own communicator\n", rank, nt,
               reps);
    return bad;
}

/* ------------------------------------------------------------ inter */

static int inter(void)
{
    MPI_Comm half, ic;
    int side = rank % 2, bad = 0, lrank;
    float v[64], w[64];
    if (nranks < 2)
        return fail("inter", "needs 2 ranks, has %ld%ld", nranks, 0);
    MPI_Comm_split(MPI_COMM_WORLD, side, rank, &half);
    MPI_Comm_rank(half, &lrank);
    /* the other side's leader is world rank 1 - side */
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - side, 99, &ic);
    for (int i = 0; i < 64; i++)
        v[i] = (float)(side + 1); /* side 0 sends 1s, side 1 sends 2s */
    MPI_Request r;
    int token = 0, rsize = 0;
    MPI_Comm_remote_size(ic, &rsize);
    if (side == 0) { /* issue, then send what the peer waits for before it issues */
        MPI_Iallreduce(v, w, 64, MPI_FLOAT, MPI_SUM, ic, &r);
        if (lrank == 0)
            MPI_Send(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
        if (lrank == 0)
            MPI_Recv(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Barrier(half);
        MPI_Iallreduce(v, w, 64, MPI_FLOAT, MPI_SUM, ic, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    /* an intercommunicator allreduce gives each side the other side's sum */
    float want = (float)((2 - side) * rsize);
    for (int i = 0; i < 64; i++)
        if (w[i] != want)
            bad |= fail("inter", "element %ld wrong (want %ld)", i, (long)want);
    MPI_Comm_free(&ic);
    MPI_Comm_free(&half);
    if (!bad)
        printf("ok rank %d: MPI_Iallreduce on an intercommunicator did not block\n", rank);
    return bad;
}

/* ------------------------------------------------------------ query */

static int level_of(const char *s)
{
    return !strcmp(s, "single")       ? MPI_THREAD_SINGLE
           : !strcmp(s, "funneled")   ? MPI_THREAD_FUNNELED
           : !strcmp(s, "serialized") ? MPI_THREAD_SERIALIZED
                                      : MPI_THREAD_MULTIPLE;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int want = MPI_THREAD_MULTIPLE, provided = -1, bad = 0;
    if (!strcmp(mode, "query") && argc > 2)
        want = level_of(argv[2]);
    MPI_Init_thread(&argc, &argv, want, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!strcmp(mode, "mixed")) {
        bad = mixed(argc > 2 ? atol(argv[2]) : 8L << 20);
    } else if (!strcmp(mode, "orders")) {
        bad = orders(argc > 2 ? atoi(argv[2]) : 2);
    } else if (!strcmp(mode, "threads")) {
        if (provided < MPI_THREAD_MULTIPLE) {
            if (rank == 0)
                printf("SKIP: MPI gives no MPI_THREAD_MULTIPLE (%d)\n", provided);
            MPI_Finalize();
            return 77;
        }
        bad = threads(argc > 2 ? atoi(argv[2]) : 4, argc > 3 ? atoi(argv[3]) : 20);
    } else if (!strcmp(mode, "inter")) {
        bad = inter();
    } else if (!strcmp(mode, "query")) {
        int q = -1, main_ = 0;
        MPI_Query_thread(&q);
        MPI_Is_thread_main(&main_);
        if (q != provided || !main_ || provided > want)
            bad = fail("query", "MPI_Query_thread %ld, MPI_Init_thread said %ld", q, provided);
        else
            printf("ok rank %d: asked %d, told %d, MPI_Query_thread %d, main thread\n", rank,
                   want, provided, q);
    } else {
        fprintf(stderr, "usage: test_engine mixed|orders|threads|inter|query ...\n");
        bad = 1;
    }
    MPI_Finalize();
    return bad;
}
