/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs that end badly on purpose, for the tests/mpi_faults_*.sh scripts.
 * Relinked with libnfcoll (MPI_Init and MPI_Allreduce through the shim).
 *
 *   test_faults calls N          N MPI_Allreduce float sums of 1 Ki floats
 *   test_faults abort-idle K J   K calls, 1.5 s without one, 1 call, J more;
 *                                then rank 0 calls MPI_Abort while the others
 *                                wait in a barrier and are killed
 *   test_faults abort-volume N   N calls, then the same abort
 *   test_faults kill-fill R M F  a first binary call of M floats in place;
 *                                once local rank 0's shared memory grows by
 *                                16 MiB (the segment's fill), rank R writes
 *                                the /dev/shm objects rank 0 has mapped to
 *                                file F and kills itself with SIGKILL
 *   test_faults fp32 N M         N fp32 calls of M floats (NF_Allreduce_route),
 *                                checked against PMPI_Allreduce
 *   test_faults cxl-full N M P   N steps of two binary calls: 1 Ki floats,
 *                                whose residual fits a full CXL node, and M
 *                                floats, whose residual does not: the small
 *                                calls succeed, the big ones return
 *                                MPI_ERR_NO_MEM (they run without error
 *                                feedback); one line per rank with the
 *                                counts; then NF_Residuals_save to prefix P
 */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfcoll.h>

static int rank;

static void calls(long n)
{
    static float x[1024], r[1024];
    for (int j = 0; j < 1024; j++)
        x[j] = (float)(j % 7) - 3.0f + (float)rank;
    for (long i = 0; i < n; i++)
        MPI_Allreduce(x, r, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

/* Rank 0 aborts; the others are killed while they wait. */
static void abort_now(void)
{
    fflush(stdout);
    if (rank == 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Barrier(MPI_COMM_WORLD);
    sleep(60); /* not reached: the barrier waits for rank 0 */
}

/* ---- kill-fill ---- */

static pid_t filler;      /* local rank 0 (on one node: world rank 0) */
static const char *names; /* where the victim writes what it saw mapped */

static long shmem_kib(pid_t pid)
{
    char path[64], line[256];
    long kib = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "RssShmem: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* The /dev/shm/nfcoll.* objects the filler maps, one per line. */
static void save_names(long grown_kib)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)filler);
    FILE *in = fopen(path, "r"), *out = fopen(names, "w");
    if (in == NULL || out == NULL)
        _exit(99);
    fprintf(out, "# killed when rank 0's shared memory had grown by %ld KiB\n", grown_kib);
    while (fgets(line, sizeof(line), in) != NULL) {
        char *p = strstr(line, "/dev/shm/nfcoll.");
        if (p != NULL)
            fputs(p, out);
    }
    fclose(in);
    fflush(out);
    fsync(fileno(out));
    fclose(out);
}

static void *watch(void *arg)
{
    long base = shmem_kib(filler), now;
    (void)arg;
    for (;;) {
        now = shmem_kib(filler);
        if (now < 0 || now - base >= 16 * 1024)
            break;
        usleep(500);
    }
    save_names(now - base);
    raise(SIGKILL);
    return NULL;
}

static int kill_fill(int victim, long m)
{
    float *x = malloc((size_t)m * sizeof(float));
    int pid = (int)getpid();
    pthread_t t;
    if (x == NULL)
        return 99;
    for (long j = 0; j < m; j++)
        x[j] = (float)((j * 7919 + rank) % 2003 - 1001);
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    filler = (pid_t)pid;
    if (rank == victim && pthread_create(&t, NULL, watch, NULL) != 0)
        return 99;
    NF_Allreduce_route(MPI_IN_PLACE, x, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_BINARY);
    /* Reached only when the kill came too late; the script says so. */
    printf("rank %d: the call completed: no kill during the fill\n", rank);
    fflush(stdout);
    if (rank == victim)
        pause();
    MPI_Barrier(MPI_COMM_WORLD);
    return 1;
}

static int fp32(long n, long m)
{
    float *x = malloc((size_t)m * sizeof(float)), *r = malloc((size_t)m * sizeof(float));
    float *w = malloc((size_t)m * sizeof(float));
    int bad = 0;
    if (x == NULL || r == NULL || w == NULL)
        return 99;
    for (long j = 0; j < m; j++)
        x[j] = (float)((j * 31 + rank * 17) % 1000 - 500) / 8.0f;
    PMPI_Allreduce(x, w, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (long i = 0; i < n; i++) {
        NF_Allreduce_route(x, r, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32);
        bad |= memcmp(r, w, (size_t)m * sizeof(float)) != 0;
    }
    if (bad)
        printf("FAIL rank %d: fp32 differs from PMPI_Allreduce\n", rank);
    free(x), free(r), free(w);
    return bad;
}

static int cxl_full(long n, long m, const char *prefix)
{
    float *small = calloc(1024, sizeof(float)), *big = calloc((size_t)m, sizeof(float));
    long ok = 0, refused = 0, other = 0;
    if (small == NULL || big == NULL)
        return 99;
    for (long i = 0; i < n; i++) {
        for (long j = 0; j < 1024; j++)
            small[j] = (float)((j * 13 + i * 7 + rank) % 17) - 8.0f;
        for (long j = 0; j < m; j++)
            big[j] = (float)((j * 31 + i * 5 + rank) % 23) - 11.0f;
        int a = NF_Allreduce_route(MPI_IN_PLACE, small, 1024, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD, NF_ROUTE_BINARY);
        int b = NF_Allreduce_route(MPI_IN_PLACE, big, (int)m, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD, NF_ROUTE_BINARY);
        int cls = MPI_SUCCESS;
        if (b != MPI_SUCCESS)
            MPI_Error_class(b, &cls);
        ok += a == MPI_SUCCESS;
        refused += cls == MPI_ERR_NO_MEM;
        other += b == MPI_SUCCESS || cls != MPI_ERR_NO_MEM;
    }
    int saved = NF_Residuals_save(MPI_COMM_WORLD, prefix);
    printf("cxl-full rank %d: small ok %ld/%ld, big refused %ld/%ld, big other %ld, save %d\n",
           rank, ok, n, refused, n, other, saved);
    free(small), free(big);
    return ok != n || saved != MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argc > 1 ? argv[1] : "";
    long a = argc > 2 ? atol(argv[2]) : 0, b = argc > 3 ? atol(argv[3]) : 0;
    if (strcmp(mode, "calls") == 0) {
        calls(a);
    } else if (strcmp(mode, "abort-idle") == 0) {
        calls(a);
        usleep(1500 * 1000);
        calls(1 + b);
        abort_now();
    } else if (strcmp(mode, "abort-volume") == 0) {
        calls(a);
        abort_now();
    } else if (strcmp(mode, "kill-fill") == 0 && argc > 4) {
        names = argv[4];
        rc = kill_fill((int)a, b);
    } else if (strcmp(mode, "fp32") == 0) {
        rc = fp32(a, b);
    } else if (strcmp(mode, "cxl-full") == 0 && argc > 4) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        rc = cxl_full(a, b, argv[4]);
    } else {
        fprintf(stderr, "usage: see tests/mpi/test_faults.c\n");
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}
