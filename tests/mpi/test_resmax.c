/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The residual bound (NFCOLL_RESIDUAL_MAX, set by tests/mpi_resmax.sh):
 *
 *   test_resmax fresh STATS.json [STEPS]   a new 1 MiB buffer every step
 *       for STEPS steps (default 5000; binary, error feedback): the
 *       residuals stay within the bound (this process's resident memory
 *       too), the least recently used are dropped; after MPI_Finalize rank 0
 *       reads the stats JSON: peak residual bytes within the bound, all but
 *       the last few dropped.
 *   test_resmax call      a fused call of three binary regions of which only
 *       two residuals fit: the call keeps the residuals it uses, so the
 *       first two regions run with error feedback and the third without,
 *       call after call, exactly as nf_ref.h says.
 *   test_resmax threads   MPI_THREAD_MULTIPLE: two threads on two
 *       communicators reduce fresh buffers at once, so each drops the
 *       other's residuals while the other runs calls (for the sanitizers).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

static int rank, n, steps = 5000;

static long rss_bytes(void)
{
    long pages = 0, res = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (fp == NULL)
        return 0;
    if (fscanf(fp, "%ld %ld", &pages, &res) != 2)
        res = 0;
    fclose(fp);
    return res * sysconf(_SC_PAGESIZE);
}

static unsigned long long budget(void)
{
    const char *v = getenv("NFCOLL_RESIDUAL_MAX");
    return v != NULL ? strtoull(v, NULL, 10) << 20 : 0; /* set in MiB: "16M" */
}

enum { M = 262144, SHIFT = 16 };

static void fill(float *x, int k)
{
    for (size_t j = 0; j < M; j++)
        x[j] = (float)((j * 2654435761u + (unsigned)k + (unsigned)rank * 7u) % 2001u) - 1000.0f;
}

static int fresh(void)
{
    /* Buffer k starts 64 bytes after buffer k-1: a new address every step
     * without a new gigabyte every thousand steps. */
    float *arena = nft_keep(malloc(((size_t)M + (size_t)steps * SHIFT) * sizeof(float)));
    unsigned long long max = budget();
    long rss0 = 0, worst = 0;
    int f = 0;
    for (int k = 0; k < steps && f == 0; k++) {
        float *x = arena + (size_t)k * SHIFT;
        fill(x, k);
        int rc = NF_Allreduce_route(MPI_IN_PLACE, x, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                    NF_ROUTE_BINARY);
        f += nft_check(rc == MPI_SUCCESS, "fresh buffer", "step %d: %d", k, rc);
        long rss = rss_bytes();
        if (k == 20)
            rss0 = rss; /* the bound is reached by then */
        if (k > 20 && rss - rss0 > worst)
            worst = rss - rss0;
        /* Growth beyond the bound fails early, before the machine runs out.
         * The bound counts the placed buffers; the block scales (1/256 of
         * them, mapped apart: docs/design.md, "Error feedback") come on top:
         * 1/128 more; under ASan its shadow of mappings at moving addresses
         * too: 1/8 more. */
#ifdef __SANITIZE_ADDRESS__
        const unsigned long long slack = max / 8;
#else
        const unsigned long long slack = max / 128;
#endif
        f += nft_check(k <= 20 || rss - rss0 < (long)(max + slack), "resident memory",
                       "grew by %ld bytes over 20 steps..%d (bound %llu)", rss - rss0, k, max);
    }
    if (rank == 0)
        printf("fresh buffers: resident memory grew by at most %ld bytes after step 20\n", worst);
    return f;
}

/* After MPI_Finalize: rank 0's stats JSON. */
static int check_stats(const char *path)
{
    char buf[1 << 16];
    FILE *fp = fopen(path, "r");
    size_t k = fp != NULL ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;
    if (fp != NULL)
        fclose(fp);
    buf[k] = '\0';
    const char *p = strstr(buf, "\"residual_peak_bytes\": ");
    const char *d = strstr(buf, "\"residuals_dropped\": ");
    unsigned long long peak = p ? strtoull(p + 23, NULL, 10) : 0;
    unsigned long long drops = d ? strtoull(d + 21, NULL, 10) : 0;
    int f = 0;
    if (p == NULL || d == NULL) {
        printf("FAIL: %s has no residual_peak_bytes or residuals_dropped\n", path);
        return 1;
    }
    printf("stats: residual_peak_bytes %llu (bound %llu), residuals_dropped %llu\n", peak,
           budget(), drops);
    if (peak == 0 || peak > budget())
        printf("FAIL: peak residual bytes %llu not within (0, %llu]\n", peak, budget()), f++;
    if (drops < (unsigned long long)(steps - 100) * (unsigned long long)n)
        printf("FAIL: only %llu residuals dropped\n", drops), f++;
    return f;
}

static int call_keeps(void)
{
    enum { R = 1 << 20, CALLS = 3 }; /* 4 MiB: 8 MiB of residual each, bound 20M */
    static const char *const names[3] = {"wb1", "wb2", "wb3"};
    float *buf = nft_keep(malloc(3 * (size_t)R * sizeof(float)));
    float *xs = nft_keep(malloc((size_t)n * R * sizeof(float)));
    float *ref = nft_keep(malloc((size_t)R * sizeof(float)));
    float *es[3];
    int f = 0;
    for (int p = 0; p < 3; p++) {
        f += nft_check(NF_Region_bind(buf + (size_t)p * R, R, MPI_FLOAT, names[p]) == MPI_SUCCESS,
                       names[p], "bind failed");
        es[p] = p < 2 ? nft_keep(calloc((size_t)n * R, sizeof(float))) : NULL;
    }
    for (int c = 0; c < CALLS; c++) {
        for (int p = 0; p < 3; p++)
            ref_input(buf + (size_t)p * R, R, rank, c, (unsigned)p + 1);
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, 3 * R, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        f += nft_check(rc == MPI_SUCCESS, "fused call", "call %d: %d", c, rc);
        for (int p = 0; p < 3; p++) {
            for (int i = 0; i < n; i++)
                ref_input(xs + (size_t)i * R, R, i, c, (unsigned)p + 1);
            ref_binary(ref, xs, es[p], n, R);
            char what[64];
            snprintf(what, sizeof(what), "call %d, %s (%s)", c, names[p],
                     es[p] ? "error feedback" : "without error feedback");
            f += nft_same_floats(buf + (size_t)p * R, ref, R, what);
        }
    }
    return f;
}

typedef struct worker {
    MPI_Comm comm;
    int fails;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    float *arena = malloc(((size_t)M + 200 * SHIFT) * sizeof(float));
    for (int k = 0; k < 200 && arena != NULL; k++) {
        float *x = arena + (size_t)k * SHIFT;
        fill(x, k);
        int rc = NF_Allreduce_route(MPI_IN_PLACE, x, M, MPI_FLOAT, MPI_SUM, w->comm,
                                    NF_ROUTE_BINARY);
        uint64_t h = nft_hash(x, M * sizeof(float)), lo, hi;
        MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, w->comm);
        MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, w->comm);
        w->fails += rc != MPI_SUCCESS || lo != hi;
    }
    free(arena);
    return NULL;
}

static int threads(void)
{
    worker_t w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
        w[i].fails = 0;
    }
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        MPI_Comm_free(&w[i].comm);
    return nft_check(w[0].fails + w[1].fails == 0, "threads", "%d calls failed or differed",
                     w[0].fails + w[1].fails);
}

int main(int argc, char **argv)
{
    const char *mode = argc >= 2 ? argv[1] : "fresh";
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    if (argc >= 4)
        steps = atoi(argv[3]);
    if (strcmp(mode, "threads") == 0 && provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("SKIP: no MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 77;
    }
    int f = strcmp(mode, "call") == 0      ? call_keeps()
            : strcmp(mode, "threads") == 0 ? threads()
                                           : fresh();
    int total = 0;
    MPI_Allreduce(&f, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char name[64];
    snprintf(name, sizeof(name), "test_resmax %s", mode);
    f = nft_finish(f, name);
    if (rank == 0 && argc >= 3 && total == 0)
        f += check_stats(argv[2]);
    return f ? 1 : 0;
}
