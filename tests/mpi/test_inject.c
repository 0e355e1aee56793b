/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Legal programs that start another collective on a communicator right
 * after their first MPI_Iallreduce on it (issue 55; tests/mpi_inject.sh).
 * A plain MPI program, run preloaded and relinked under a policy that sends
 * float sums of 1 MiB or more binary: libnfcoll must start no collective of
 * its own on the program's communicator, or the program's collectives
 * cross-match with it (Open MPI 4.1: hangs, MPI_ERR_TRUNCATE, SIGSEGV).
 *
 *     test_inject CASE MAKE [ROUNDS]
 *
 * CASE: dup, idup, ibarrier, iint, ibcast, split, splittype, rounds, mixed,
 * threads, late, signals, stall, all (every case but stall, in turn). MAKE: how the
 * fresh communicator C each case starts on is made: dup, split, idup,
 * create_group (of MPI_COMM_WORLD), world (MPI_COMM_WORLD itself). ROUNDS:
 * repeat the case on a new C (default 1).
 *
 * The float inputs are +-1, so every route's sum is the exact one (binary:
 * each rank's scale is exactly 1, its residual 0): every result is checked
 * exactly, ints and broadcasts too. Prints "ok rank R: N checks" or FAIL
 * lines; exits nonzero on a failure.
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <unistd.h>

enum { M = 262144 }; /* floats: 1 MiB, the policy's binary threshold */

static int rank, size, bad, checks;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        checks++;                                                                         \
        if (!(cond)) {                                                                    \
            printf("FAIL rank %d: ", rank);                                               \
            printf(__VA_ARGS__);                                                          \
            printf("\n");                                                                 \
            fflush(stdout);                                                               \
            bad = 1;                                                                      \
        }                                                                                 \
    } while (0)

/* Rank r's +-1 input for element j of call k, and the exact sum. */
static float in(int r, int j, int k) { return ((j * 7 + r * 3 + k * 5) / 3) % 2 ? 1.0f : -1.0f; }

static float *fill(float *x, int k)
{
    for (int j = 0; j < M; j++)
        x[j] = in(rank, j, k);
    return x;
}

static void check_sum(const float *x, int k, const char *what)
{
    int wrong = -1;
    for (int j = 0; j < M && wrong < 0; j++) {
        float want = 0.0f;
        for (int r = 0; r < size; r++)
            want += in(r, j, k);
        if (x[j] != want)
            wrong = j;
    }
    CHECK(wrong < 0, "%s: float sum %d wrong at element %d: %g", what, k, wrong,
          wrong >= 0 ? (double)x[wrong] : 0.0);
}

static MPI_Comm make(const char *how)
{
    MPI_Comm c = MPI_COMM_NULL;
    if (strcmp(how, "dup") == 0)
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
    else if (strcmp(how, "split") == 0)
        MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c); /* reversed ranks */
    else if (strcmp(how, "idup") == 0) {
        MPI_Request r;
        MPI_Comm_idup(MPI_COMM_WORLD, &c, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else if (strcmp(how, "create_group") == 0) {
        MPI_Group g;
        MPI_Comm_group(MPI_COMM_WORLD, &g);
        MPI_Comm_create_group(MPI_COMM_WORLD, g, 7, &c);
        MPI_Group_free(&g);
    } else if (strcmp(how, "world") == 0)
        c = MPI_COMM_WORLD;
    else {
        fprintf(stderr, "test_inject: unknown MAKE '%s'\n", how);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return c;
}

static void drop(MPI_Comm *c)
{
    if (*c != MPI_COMM_WORLD)
        MPI_Comm_free(c);
}

static int crank(MPI_Comm c)
{
    int r;
    MPI_Comm_rank(c, &r);
    return r;
}

/* The first MPI_Iallreduce of floats on c, then the case's collective. */
static void case_one(const char *name, MPI_Comm c, float *x)
{
    MPI_Request rq[2];
    MPI_Status st[2];
    int r = crank(c), iv = r + 1, isum = 0, bv = 0;
    MPI_Comm d = MPI_COMM_NULL;
    MPI_Iallreduce(MPI_IN_PLACE, fill(x, 0), M, MPI_FLOAT, MPI_SUM, c, &rq[0]);
    rq[1] = MPI_REQUEST_NULL;
    if (strcmp(name, "dup") == 0)
        MPI_Comm_dup(c, &d);
    else if (strcmp(name, "idup") == 0)
        MPI_Comm_idup(c, &d, &rq[1]);
    else if (strcmp(name, "ibarrier") == 0)
        MPI_Ibarrier(c, &rq[1]);
    else if (strcmp(name, "iint") == 0)
        MPI_Iallreduce(&iv, &isum, 1, MPI_INT, MPI_SUM, c, &rq[1]);
    else if (strcmp(name, "ibcast") == 0) {
        bv = r == size - 1 ? 4242 : -1;
        MPI_Ibcast(&bv, 1, MPI_INT, size - 1, c, &rq[1]);
    } else if (strcmp(name, "split") == 0)
        MPI_Comm_split(c, r % 2, r, &d);
    else if (strcmp(name, "splittype") == 0)
        MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &d);
    CHECK(MPI_Waitall(2, rq, st) == MPI_SUCCESS, "%s: MPI_Waitall", name);
    check_sum(x, 0, name);
    if (strcmp(name, "iint") == 0)
        CHECK(isum == size * (size + 1) / 2, "iint: int sum %d", isum);
    if (strcmp(name, "ibcast") == 0)
        CHECK(bv == 4242, "ibcast: got %d", bv);
    if (d != MPI_COMM_NULL) { /* the new communicator works, blocking and not */
        int dn = 0, one = 1, got = 0;
        MPI_Comm_size(d, &dn);
        MPI_Allreduce(&one, &got, 1, MPI_INT, MPI_SUM, d);
        CHECK(got == dn, "%s: the new communicator's sum %d, want %d", name, got, dn);
        MPI_Request q;
        MPI_Iallreduce(&one, &got, 1, MPI_INT, MPI_SUM, d, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        CHECK(got == dn, "%s: the new communicator's nonblocking sum %d", name, got);
        MPI_Comm_free(&d);
    }
    /* and c goes on working: a blocking float sum, then a nonblocking one */
    MPI_Allreduce(MPI_IN_PLACE, fill(x, 1), M, MPI_FLOAT, MPI_SUM, c);
    check_sum(x, 1, name);
    MPI_Iallreduce(MPI_IN_PLACE, fill(x, 2), M, MPI_FLOAT, MPI_SUM, c, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    check_sum(x, 2, name);
}

/* 10 rounds of an Ibcast, an int Iallreduce, a point-to-point ring and two
 * float sums, completed by MPI_Waitsome. late: the last rank issues each
 * round 50 ms after the others. */
static void case_rounds(MPI_Comm c, float *x, float *y, int late)
{
    int r = crank(c), next = (r + 1) % size, prev = (r + size - 1) % size;
    for (int k = 0; k < 10; k++) {
        MPI_Request rq[6];
        int bv = r == k % size ? 100 + k : -1, iv = r * k, isum = 0, sent = r * 1000 + k, got = -1;
        if (late && r == size - 1)
            usleep(50000);
        MPI_Ibcast(&bv, 1, MPI_INT, k % size, c, &rq[0]);
        MPI_Iallreduce(&iv, &isum, 1, MPI_INT, MPI_SUM, c, &rq[1]);
        MPI_Irecv(&got, 1, MPI_INT, prev, k, c, &rq[2]);
        MPI_Isend(&sent, 1, MPI_INT, next, k, c, &rq[3]);
        MPI_Iallreduce(MPI_IN_PLACE, fill(x, 10 + 2 * k), M, MPI_FLOAT, MPI_SUM, c, &rq[4]);
        MPI_Iallreduce(MPI_IN_PLACE, fill(y, 11 + 2 * k), M, MPI_FLOAT, MPI_SUM, c, &rq[5]);
        for (int left = 6; left > 0;) {
            int n = 0, idx[6];
            MPI_Status st[6];
            if (MPI_Waitsome(6, rq, &n, idx, st) != MPI_SUCCESS || n == MPI_UNDEFINED) {
                CHECK(0, "rounds: MPI_Waitsome");
                break;
            }
            left -= n;
        }
        CHECK(bv == 100 + k, "rounds %d: bcast %d", k, bv);
        CHECK(isum == k * size * (size - 1) / 2, "rounds %d: int sum %d", k, isum);
        CHECK(got == prev * 1000 + k, "rounds %d: ring got %d", k, got);
        check_sum(x, 10 + 2 * k, "rounds");
        check_sum(y, 11 + 2 * k, "rounds");
    }
}

/* 12 calls of mixed types and ops with an Ibarrier outstanding. */
static void case_mixed(MPI_Comm c, float *x)
{
    int r = crank(c);
    MPI_Request rq[13];
    int imax = 0, isum = 0, imin = 0, iv = r + 3, ip = r + 3;
    double dsum = 0.0, dv = 0.5 * r;
    float fmax[4], fv[4] = {(float)r, 1.0f, -1.0f, 2.0f};
    float *xs[4];
    MPI_Ibarrier(c, &rq[0]);
    for (int k = 0; k < 4; k++) {
        xs[k] = malloc(M * sizeof(float));
        MPI_Iallreduce(MPI_IN_PLACE, fill(xs[k], 40 + k), M, MPI_FLOAT, MPI_SUM, c, &rq[1 + k]);
    }
    MPI_Iallreduce(&iv, &imax, 1, MPI_INT, MPI_MAX, c, &rq[5]);
    MPI_Iallreduce(&iv, &isum, 1, MPI_INT, MPI_SUM, c, &rq[6]);
    MPI_Iallreduce(&iv, &imin, 1, MPI_INT, MPI_MIN, c, &rq[7]);
    MPI_Iallreduce(&dv, &dsum, 1, MPI_DOUBLE, MPI_SUM, c, &rq[8]);
    MPI_Iallreduce(fv, fmax, 4, MPI_FLOAT, MPI_MAX, c, &rq[9]);
    MPI_Iallreduce(MPI_IN_PLACE, fill(x, 44), M, MPI_FLOAT, MPI_SUM, c, &rq[10]);
    MPI_Iallreduce(MPI_IN_PLACE, &ip, 1, MPI_INT, MPI_PROD, c, &rq[11]); /* not iv: the
                                                     calls above still read it */
    rq[12] = MPI_REQUEST_NULL;
    MPI_Status st[13]; /* not MPI_STATUSES_IGNORE: gcc 12 under MPICH's mpi.h */
    CHECK(MPI_Waitall(13, rq, st) == MPI_SUCCESS, "mixed: MPI_Waitall");
    for (int k = 0; k < 4; k++) {
        check_sum(xs[k], 40 + k, "mixed");
        free(xs[k]);
    }
    check_sum(x, 44, "mixed");
    long prod = 1;
    for (int q = 0; q < size; q++)
        prod *= q + 3;
    CHECK(imax == size + 2 && imin == 3 && isum == size * (size + 5) / 2,
          "mixed: int max %d min %d sum %d", imax, imin, isum);
    CHECK(ip == (int)prod, "mixed: int product %d, want %ld", ip, prod);
    CHECK(dsum == 0.25 * size * (size - 1), "mixed: double sum %g", dsum);
    CHECK(fmax[0] == (float)(size - 1) && fmax[1] == 1.0f && fmax[2] == -1.0f && fmax[3] == 2.0f,
          "mixed: float max %g %g %g %g", (double)fmax[0], (double)fmax[1], (double)fmax[2],
          (double)fmax[3]);
}

/* Two threads, each on a communicator of its own, each its first
 * MPI_Iallreduce then an Ibarrier and a dup, at once. */
typedef struct { MPI_Comm c; float *x; } thr_arg_t;

static void *thr(void *p)
{
    thr_arg_t *t = p;
    case_one("ibarrier", t->c, t->x);
    return NULL;
}

static void case_threads(const char *how, float *x, float *y)
{
    int level;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) {
        CHECK(0, "threads: MPI gave thread level %d", level);
        return;
    }
    thr_arg_t a = {make(how), x}, b = {make(how), y};
    pthread_t t;
    pthread_create(&t, NULL, thr, &b);
    thr(&a);
    pthread_join(t, NULL);
    drop(&a.c);
    drop(&b.c);
}

/* Rank 1 issues its first call on c 2 s after rank 0: rank 0's first job
 * waits, and NFCOLL_STALL_WARN reports it (the driver reads stderr). */
static void case_stall(MPI_Comm c, float *x)
{
    MPI_Request q;
    if (crank(c) == 1)
        sleep(2);
    MPI_Iallreduce(MPI_IN_PLACE, fill(x, 0), M, MPI_FLOAT, MPI_SUM, c, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    check_sum(x, 0, "stall");
}

/* The rounds under a 1 ms SIGALRM timer: the program's handler runs, and
 * never on one of libnfcoll's workers (named "nfcoll-worker"). */
static volatile sig_atomic_t alarms, on_worker;

static void on_alarm(int sig)
{
    char name[16] = "";
    (void)sig;
    alarms++;
    if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && strcmp(name, "nfcoll-worker") == 0)
        on_worker++;
}

static void case_signals(MPI_Comm c, float *x, float *y)
{
    struct sigaction sa;
    struct itimerval it = {{0, 1000}, {0, 1000}}, off = {{0, 0}, {0, 0}};
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    alarms = on_worker = 0;
    setitimer(ITIMER_REAL, &it, NULL);
    case_rounds(c, x, y, 0);
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(alarms > 0 && on_worker == 0, "signals: %d alarms, %d of them on a libnfcoll worker",
          (int)alarms, (int)on_worker);
}

static const char *const all_cases[] = {"dup",   "idup",  "ibarrier", "iint",    "ibcast",
                                        "split", "splittype", "rounds", "mixed", "threads",
                                        "late",  "signals", NULL};

static void run(const char *name, const char *how, float *x, float *y)
{
    if (strcmp(name, "threads") == 0) {
        case_threads(how, x, y);
        return;
    }
    MPI_Comm c = make(how);
    if (strcmp(name, "rounds") == 0 || strcmp(name, "late") == 0)
        case_rounds(c, x, y, name[0] == 'l');
    else if (strcmp(name, "signals") == 0)
        case_signals(c, x, y);
    else if (strcmp(name, "mixed") == 0)
        case_mixed(c, x);
    else if (strcmp(name, "stall") == 0)
        case_stall(c, x);
    else
        case_one(name, c, x);
    drop(&c);
}

int main(int argc, char **argv)
{
    int provided;
    if (argc < 3) {
        fprintf(stderr, "usage: test_inject CASE MAKE [ROUNDS]\n");
        return 2;
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 3 ? atoi(argv[3]) : 1;
    float *x = malloc(M * sizeof(float)), *y = malloc(M * sizeof(float));
    for (int i = 0; i < rounds; i++) {
        if (strcmp(argv[1], "all") != 0)
            run(argv[1], argv[2], x, y);
        else
            for (int k = 0; all_cases[k] != NULL; k++)
                run(all_cases[k], argv[2], x, y);
    }
    free(x);
    free(y);
    printf("%s rank %d: %d checks\n", bad ? "FAIL" : "ok", rank, checks);
    MPI_Finalize();
    return bad;
}
