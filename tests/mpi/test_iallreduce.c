/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NF_Iallreduce against the blocking NF_Allreduce (tests/mpi_iallreduce.sh).
 * Relinked with libnfcoll.
 *
 *   test_iallreduce same ROUTE    ROUTE binary, ternary, int4, fp32 (forced) or
 *                                 policy (admission, with bound regions:
 *                                 run under tests/policy_shim/regions.policy)
 *     The same steps on two duplicates of MPI_COMM_WORLD: on X every call
 *     blocking, on Y the same calls nonblocking, completed by MPI_Waitall,
 *     MPI_Test polling, MPI_Waitany, MPI_Waitsome, MPI_Testall, or mixed
 *     with blocking calls in between, or dropped with MPI_Request_free (a
 *     later blocking call on Y runs after them; not where the calls are
 *     MPI's own, policy on one process); every result on Y must be
 *     bit for bit X's (the residuals of X and Y evolve alike). Prints
 *     "nonblocking calls: N" (per rank) for the script's stats check.
 *   test_iallreduce lifetime      MPI_Comm_free of a communicator with a
 *     request outstanding (the request completes with the right result),
 *     then MPI_Finalize with a request outstanding: the buffer holds the
 *     result after it.
 *   test_iallreduce sleepwait     MPI_Wait and MPI_Waitall on calls the
 *     thread runs sleep: waiting 300 ms for a late rank, the caller's
 *     thread uses under a tenth of that in CPU time.
 *   test_iallreduce error         PMPI_Allgather, PMPI_Sendrecv and
 *     PMPI_Allreduce stand-ins (as in test_errcode) fail on every rank: an
 *     fp32 call (2 pretend nodes: its first exchange is the verdict, a
 *     PMPI_Sendrecv) and a pmpi call complete with the stand-in's code in
 *     MPI_Waitall's statuses (and MPI_Wait's return). Then rank 0's last
 *     exchange of an fp32 call fails there only, after taking place: every
 *     rank's request fails with it, for a call of two exchanges (the
 *     verdict, then the data: a PMPI_Waitall between two one-rank nodes;
 *     40000 floats, past the 128 KiB that ride with the verdict) and for one
 *     that rides whole with the verdict (64 floats). On three one-rank
 *     nodes or more the verdict is the PMPI_Allgather, and only the 64
 *     floats' late failure is tried.
 */
#define _GNU_SOURCE
#include <math.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nfcoll.h"
#include "nf_ref.h"
#include "nf_standin.h"
#include "nf_testutil.h"

enum { NBUF = 4, STEPS = 8 };
static const int counts[NBUF] = {7, 513, 4099, 70001};
static int rank, nranks, route = -1;
static long nonblocking;

/* ---- stand-ins for the error case ---- */
#define CODE_PRIVATE 0x7f000001
#define CODE_USER 0x7ffffffe
static atomic_int armed_allgather, armed_allreduce, late_exchange;

NFT_EXPORT int PMPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                   MPI_Comm comm)
{
    if (atomic_exchange(&armed_allgather, 0))
        return CODE_PRIVATE;
    int code = NFT_NEXT(PMPI_Allgather)(sb, sc, st, rb, rc, rt, comm);
    /* armed late: the n-th exchange from now took place, and fails here only */
    int n = atomic_load(&late_exchange);
    if (n > 0 && atomic_fetch_sub(&late_exchange, 1) == 1)
        return CODE_PRIVATE;
    return code;
}

/* Two one-rank nodes' verdict is a PMPI_Sendrecv (lib/core/xnode.c): the
 * same stand-in as the allgather's. */
NFT_EXPORT int PMPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dest, int stag, void *rb,
                             int rc, MPI_Datatype rt, int src, int rtag, MPI_Comm comm,
                             MPI_Status *status)
{
    if (atomic_exchange(&armed_allgather, 0))
        return CODE_PRIVATE;
    int code = NFT_NEXT(PMPI_Sendrecv)(sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, status);
    int n = atomic_load(&late_exchange);
    if (n > 0 && atomic_fetch_sub(&late_exchange, 1) == 1)
        return CODE_PRIVATE;
    return code;
}

/* Two one-rank nodes' fp32 data cross point-to-point (lib/core/xnode.c):
 * its waits count as exchanges for the late failure too. */
NFT_EXPORT int PMPI_Waitall(int n, MPI_Request *reqs, MPI_Status *sts)
{
    int code = NFT_NEXT(PMPI_Waitall)(n, reqs, sts);
    int left = atomic_load(&late_exchange);
    if (left > 0 && atomic_fetch_sub(&late_exchange, 1) == 1)
        return CODE_PRIVATE;
    return code;
}

NFT_EXPORT int PMPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op,
                              MPI_Comm comm)
{
    if (atomic_exchange(&armed_allreduce, 0))
        return CODE_USER;
    return NFT_NEXT(PMPI_Allreduce)(sb, rb, n, t, op, comm);
}

/* ---- calls ---- */

static void fill(float *x, int i, int step)
{
    ref_input(x, (size_t)counts[i], rank, step * NBUF + i, 60);
}

static int blocking(float *x, int i, MPI_Comm comm)
{
    return route < 0 ? NF_Allreduce(MPI_IN_PLACE, x, counts[i], MPI_FLOAT, MPI_SUM, comm)
                     : NF_Allreduce_route(MPI_IN_PLACE, x, counts[i], MPI_FLOAT, MPI_SUM, comm,
                                          (nf_route_t)route);
}

static int start(float *x, int i, MPI_Comm comm, MPI_Request *req)
{
    nonblocking++;
    return route < 0
               ? NF_Iallreduce(MPI_IN_PLACE, x, counts[i], MPI_FLOAT, MPI_SUM, comm, req)
               : NF_Iallreduce_route(MPI_IN_PLACE, x, counts[i], MPI_FLOAT, MPI_SUM, comm,
                                     route, req);
}

/* Complete the requests the way step s says; 1 on a failure. */
static int complete(MPI_Request *req, int n, int s)
{
    int rc = MPI_SUCCESS, done = 0, idx, outs[NBUF], flag = 0;
    /* real statuses, not MPI_STATUSES_IGNORE: MPICH's mpi.h declares how
     * many the array holds, and gcc 12 takes its (MPI_Status *)1 for an
     * empty one (-Werror=stringop-overflow) */
    MPI_Status st[NBUF];
    switch (s % 5) {
    case 0:
        rc = MPI_Waitall(n, req, st);
        break;
    case 1: /* Test polling, one by one */
        for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
            for (flag = 0; !flag && rc == MPI_SUCCESS;)
                rc = MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
        break;
    case 2:
        for (; done < n && rc == MPI_SUCCESS; done++)
            rc = MPI_Waitany(n, req, &idx, MPI_STATUS_IGNORE);
        break;
    case 3:
        while (done < n && rc == MPI_SUCCESS) {
            int k = 0;
            rc = MPI_Waitsome(n, req, &k, outs, st);
            done += k == MPI_UNDEFINED ? n : k;
        }
        break;
    default:
        for (flag = 0; !flag && rc == MPI_SUCCESS;)
            rc = MPI_Testall(n, req, &flag, st);
        break;
    }
    for (int i = 0; i < n; i++)
        if (req[i] != MPI_REQUEST_NULL)
            return nft_check(0, "completion", "step %d: request %d not freed", s, i);
    return nft_check(rc == MPI_SUCCESS, "completion", "step %d: rc %d", s, rc);
}

/* Bind regions in the largest buffer, as tests/policy_shim/regions.policy
 * routes them: head.w fp32, mid ternary, body binary, the gaps binary. */
static void bind_regions(float *big)
{
    if (NF_Region_bind(big, 1000, MPI_FLOAT, "head.w") != MPI_SUCCESS ||
        NF_Region_bind(big + 2000, 20000, MPI_FLOAT, "mid") != MPI_SUCCESS ||
        NF_Region_bind(big + 30000, 30000, MPI_FLOAT, "body") != MPI_SUCCESS) {
        printf("FAIL rank %d: NF_Region_bind\n", rank);
        exit(1);
    }
}

static int same(MPI_Comm X, MPI_Comm Y)
{
    float *buf[NBUF], *res[NBUF], fence = 1.0f;
    MPI_Request req[NBUF];
    int bad = 0;
    for (int i = 0; i < NBUF; i++) {
        buf[i] = malloc((size_t)counts[i] * sizeof(float));
        res[i] = malloc((size_t)counts[i] * sizeof(float));
    }
    if (route < 0)
        bind_regions(buf[NBUF - 1]);
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < NBUF; i++) {
            fill(buf[i], i, s);
            bad |= nft_check(blocking(buf[i], i, X) == MPI_SUCCESS, "blocking", "step %d", s);
            memcpy(res[i], buf[i], (size_t)counts[i] * sizeof(float));
        }
        NF_Allreduce_route(MPI_IN_PLACE, &fence, 1, MPI_FLOAT, MPI_SUM, X, NF_ROUTE_FP32);
        int n = 0;
        for (int i = 0; i < NBUF; i++) {
            fill(buf[i], i, s);
            if (s == 5 && i % 2 == 1) /* interleaved: blocking between nonblocking */
                bad |= nft_check(blocking(buf[i], i, Y) == MPI_SUCCESS, "mixed", "step %d", s);
            else
                bad |= nft_check(start(buf[i], i, Y, &req[n++]) == MPI_SUCCESS, "start",
                                 "step %d buffer %d", s, i);
        }
        /* dropped: the fence on Y, blocking, runs after them. Only
         * libnfcoll's requests: under a policy one process's calls are MPI's
         * own PMPI_Iallreduce, and MPI makes freeing a nonblocking
         * collective's request erroneous (MPICH refuses it). */
        if (s == 6 && !(route < 0 && nranks == 1)) {
            for (int i = 0; i < n; i++)
                bad |= nft_check(MPI_Request_free(&req[i]) == MPI_SUCCESS &&
                                     req[i] == MPI_REQUEST_NULL,
                                 "MPI_Request_free", "step %d", s);
        } else {
            bad |= complete(req, n, s);
        }
        NF_Allreduce_route(MPI_IN_PLACE, &fence, 1, MPI_FLOAT, MPI_SUM, Y, NF_ROUTE_FP32);
        for (int i = 0; i < NBUF; i++)
            bad |= nft_check(memcmp(buf[i], res[i], (size_t)counts[i] * sizeof(float)) == 0,
                             "bit-identical", "step %d, %d floats: nonblocking result differs "
                             "from the blocking one", s, counts[i]);
    }
    if (route < 0)
        for (int off = 0; off <= 30000; off += off == 0 ? 2000 : 28000)
            NF_Region_unbind(buf[NBUF - 1] + off);
    for (int i = 0; i < NBUF; i++)
        free(buf[i]), free(res[i]);
    printf("nonblocking calls: %ld\n", nonblocking);
    return bad;
}

/* What a call of float sums of ref_input gives on the fp32 route. */
static void expect_fp32(float *r, int m, int call)
{
    float *x = malloc((size_t)m * sizeof(float));
    memset(r, 0, (size_t)m * sizeof(float));
    for (int q = 0; q < nranks; q++) {
        ref_input(x, (size_t)m, q, call, 61);
        for (int j = 0; j < m; j++)
            r[j] += x[j];
    }
    free(x);
}

static int lifetime(void)
{
    enum { M = 4099 };
    static float x[M], want[M], y[M], wy[M];
    MPI_Comm Z;
    MPI_Request req;
    int bad = 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &Z);
    ref_input(x, M, rank, 1, 61);
    expect_fp32(want, M, 1);
    bad |= nft_check(NF_Iallreduce_route(MPI_IN_PLACE, x, M, MPI_FLOAT, MPI_SUM, Z,
                                         NF_ROUTE_FP32, &req) == MPI_SUCCESS, "start", "comm");
    MPI_Comm_free(&Z);
    bad |= nft_check(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "MPI_Comm_free",
                     "the outstanding request failed");
    for (int j = 0; j < M; j++)
        bad |= nft_check(fabsf(x[j] - want[j]) <= 1e-4f * (1.0f + fabsf(want[j])),
                         "MPI_Comm_free", "element %d: %g, want %g", j, x[j], want[j]) ;
    ref_input(y, M, rank, 2, 61);
    expect_fp32(wy, M, 2);
    bad |= nft_check(NF_Iallreduce_route(MPI_IN_PLACE, y, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                         NF_ROUTE_FP32, &req) == MPI_SUCCESS, "start", "world");
    MPI_Finalize(); /* with req outstanding */
    int off = 0;
    for (int j = 0; j < M; j++)
        off += fabsf(y[j] - wy[j]) > 1e-4f * (1.0f + fabsf(wy[j]));
    if (off)
        printf("FAIL rank %d: MPI_Finalize: %d elements not reduced\n", rank, off);
    if (!bad && !off)
        printf("ok rank %d: MPI_Comm_free and MPI_Finalize with requests outstanding\n", rank);
    return bad || off;
}

/* The calling thread's CPU seconds. */
static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* MPI_Wait and MPI_Waitall on a call the thread runs sleep (nf_async_wait)
 * rather than poll: the last rank issues its call 300 ms late, so the others'
 * waits last that long; their calling threads may use a tenth of it. */
static int sleepwait(void)
{
    enum { M = 4099 };
    static float x[M], y[M], want[M];
    MPI_Request req[2];
    MPI_Status st[2];
    int bad = 0;
    /* the first call on the communicator agrees on the thread at its issue */
    NF_Iallreduce_route(MPI_IN_PLACE, y, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32,
                        &req[0]);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    for (int k = 0; k < 2; k++) {
        ref_input(x, M, rank, 3, 61);
        expect_fp32(want, M, 3);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == nranks - 1)
            nanosleep(&(struct timespec){0, 300000000L}, NULL);
        NF_Iallreduce_route(MPI_IN_PLACE, x, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                            NF_ROUTE_FP32, &req[0]);
        NF_Iallreduce_route(MPI_IN_PLACE, y, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                            NF_ROUTE_FP32, &req[1]);
        double w0 = MPI_Wtime(), c0 = thread_cpu();
        int rc = k == 0 ? MPI_Wait(&req[0], MPI_STATUS_IGNORE) | MPI_Wait(&req[1], MPI_STATUS_IGNORE)
                        : MPI_Waitall(2, req, st); /* not MPI_STATUSES_IGNORE: gcc
                                                       sizes MPICH's (MPI_Status *)1 */
        double wall = MPI_Wtime() - w0, cpu = thread_cpu() - c0;
        const char *how = k == 0 ? "MPI_Wait" : "MPI_Waitall";
        int off = 0;
        for (int j = 0; j < M; j++)
            off += fabsf(x[j] - want[j]) > 1e-4f * (1.0f + fabsf(want[j]));
        bad |= nft_check(rc == MPI_SUCCESS && off == 0, how, "failed, or %d elements wrong", off);
        if (rank != nranks - 1) {
            printf("rank %d: %s waited %.0f ms, its thread used %.1f ms of CPU\n", rank, how,
                   1e3 * wall, 1e3 * cpu);
            bad |= nft_check(wall > 0.2 && cpu < 0.1 * wall, how,
                             "waited %.0f ms using %.0f ms of CPU: it polled", 1e3 * wall,
                             1e3 * cpu);
        }
    }
    if (!bad)
        printf("ok rank %d: waits on the thread's calls sleep\n", rank);
    return bad;
}

/* Whether a status in MPI_Waitall's array carries want. MPICH 4.0 puts an
 * error code of its own there (0x3c03f80f for 0x7f000001: it wraps what
 * the request's query_fn returned), while MPI_Wait returns the code as is;
 * under MPICH, any error then. */
static int status_is(int code, int want)
{
#ifdef MPICH_VERSION
    return code == want || code != MPI_SUCCESS;
#else
    return code == want;
#endif
}

static int error_case(void)
{
    enum { BIG = 40000 };
    static float x[BIG], r[BIG];
    MPI_Request req[2];
    MPI_Status st[2];
    int bad = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    for (int i = 0; i < BIG; i++)
        x[i] = (float)(i % 256);
    /* Warm up: state, the duplicate and the agreements, nothing armed. */
    for (int k = 0; k < 2; k++) {
        NF_Iallreduce_route(x, r, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                            k ? NF_ROUTE_PMPI : NF_ROUTE_FP32, &req[0]);
        bad |= nft_check(MPI_Wait(&req[0], MPI_STATUS_IGNORE) == MPI_SUCCESS, "warm-up",
                         "call %d failed", k);
    }
    atomic_store(&armed_allgather, 1);
    NF_Iallreduce_route(x, r, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32, &req[0]);
    int rc = MPI_Waitall(1, req, st);
    bad |= nft_check(atomic_load(&armed_allgather) == 0, "fp32", "no verdict exchange ran");
    bad |= nft_check(rc == MPI_ERR_IN_STATUS && status_is(st[0].MPI_ERROR, CODE_PRIVATE), "fp32",
                     "MPI_Waitall %d, status %#x, want MPI_ERR_IN_STATUS and %#x", rc,
                     (unsigned)st[0].MPI_ERROR, CODE_PRIVATE);
    atomic_store(&armed_allreduce, 1);
    NF_Iallreduce_route(x, r, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_PMPI, &req[1]);
    rc = MPI_Waitall(1, &req[1], &st[1]);
    bad |= nft_check(rc == MPI_ERR_IN_STATUS && status_is(st[1].MPI_ERROR, CODE_USER), "pmpi",
                     "MPI_Waitall %d, status %#x, want MPI_ERR_IN_STATUS and %#x", rc,
                     (unsigned)st[1].MPI_ERROR, CODE_USER);
    atomic_store(&armed_allgather, 1);
    NF_Iallreduce_route(x, r, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32, &req[0]);
    rc = MPI_Wait(&req[0], &st[0]);
    bad |= nft_check(rc == CODE_PRIVATE, "fp32", "MPI_Wait returned %#x, want %#x",
                     (unsigned)rc, CODE_PRIVATE);
    /* Rank 0 alone: its last exchange of an fp32 call (BIG floats: the
     * header verdict, then the data; 64: the verdict with the data;
     * 16384 and 32768: the verdict with the data but its one and two
     * tails, which rank 0 receives only in its next verdict) took place and failed
     * there: every rank's request fails. Three nodes or more: 64 floats
     * only (BIG's data go by exchanges these stand-ins do not count, the
     * larger calls do not ride with the verdict; the verdict is the
     * PMPI_Allgather). */
    static const int late_n[4] = {BIG, 64, 16384, 32768}, late_at[4] = {2, 1, 1, 1};
    static float y[BIG]; /* other data than the calls' after: a tail left over shows */
    for (int i = 0; i < BIG; i++)
        y[i] = (float)(i % 256 + 512);
    for (int k = nranks > 2; k < (nranks > 2 ? 2 : 4); k++) {
        if (rank == 0)
            atomic_store(&late_exchange, late_at[k]);
        NF_Iallreduce_route(k >= 2 ? y : x, r, late_n[k], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                            NF_ROUTE_FP32, &req[0]);
        rc = MPI_Waitall(1, &req[0], &st[0]);
        bad |= nft_check(atomic_load(&late_exchange) == 0, "one rank",
                         "the exchange did not fail (%d floats)", late_n[k]);
        bad |= nft_check(rc == MPI_ERR_IN_STATUS && status_is(st[0].MPI_ERROR, CODE_PRIVATE),
                         "one rank",
                         "MPI_Waitall %d, status %#x, want MPI_ERR_IN_STATUS and %#x (rank 0 "
                         "failed, %d floats)", rc, (unsigned)st[0].MPI_ERROR, CODE_PRIVATE,
                         late_n[k]);
        atomic_store(&late_exchange, 0);
    }
    /* and the next calls work: more than the 8 calls whose needs size the
     * verdict's area across three or more one-rank nodes (rank 0's failed
     * exchanges must not leave its history apart from the others'; two
     * nodes keep none: each sends its own area), then a larger one, then
     * one of 16340 floats, one of 16384 and two of 32768 (two nodes: the
     * failed calls' tails, still queued on rank 0, one of them longer than
     * the 16384's, must not stand in for theirs) */
    for (int k = 0; k < 17 && !bad; k++) {
        int n = k < 12 ? 64 : k < 13 ? 256 : k < 14 ? 16340 : k < 15 ? 16384 : 32768;
        NF_Iallreduce_route(x, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32, &req[0]);
        bad |= nft_check(MPI_Wait(&req[0], MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                             r[5] == 5.0f * nranks && r[n - 1] == (float)((n - 1) % 256) * nranks,
                         "after the errors", "call %d failed or was wrong (%g)", k, r[5]);
    }
    /* Two nodes: rank 0's verdicts of two 32768-float calls in a row fail
     * there, so rank 1's tails of both are still in flight (over shared
     * memory MPI sends them only once rank 0 receives them). The next call
     * has no slot for its tails on rank 1 unless they went: it fails on
     * both ranks or runs, but returns; rank 0 receives the old tails in
     * it, and the calls after it are right. */
    for (int k = 0; nranks == 2 && k < 2 && !bad; k++) {
        if (rank == 0)
            atomic_store(&late_exchange, 1);
        NF_Iallreduce_route(y, r, 32768, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32,
                            &req[0]);
        rc = MPI_Wait(&req[0], MPI_STATUS_IGNORE);
        bad |= nft_check(rc != MPI_SUCCESS && atomic_load(&late_exchange) == 0, "two in a row",
                         "call %d: rc %d, the exchange %s", k, rc,
                         atomic_load(&late_exchange) ? "did not fail" : "failed");
        atomic_store(&late_exchange, 0);
    }
    for (int k = 0; nranks == 2 && k < 4 && !bad; k++) {
        NF_Iallreduce_route(x, r, 32768, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32,
                            &req[0]);
        rc = MPI_Wait(&req[0], MPI_STATUS_IGNORE);
        bad |= nft_check(k == 0 || (rc == MPI_SUCCESS && r[5] == 10.0f &&
                                    r[32767] == (float)(32767 % 256) * 2),
                         "after two in a row", "call %d: rc %d, r[5] %g", k, rc, (double)r[5]);
    }
    if (!bad)
        printf("ok rank %d: errors completed the requests with the stand-ins' codes\n", rank);
    return bad;
}

/* NF_Residuals_save while a nonblocking binary call is queued or running:
 * the save waits for it (the thread's collectives would meet the save's on
 * the private communicator, and the save would read a residual being
 * rewritten). What was saved is the residual after the call: loaded and
 * reused, the next call's result equals that of the same calls made
 * blocking, saved and loaded, bit for bit. */
static int ckpt_case(const char *prefix)
{
    enum { CM = 1 << 20 };
    float *a = malloc(CM * sizeof(float)), *b = malloc(CM * sizeof(float));
    char pa[256], pb[256];
    MPI_Request req;
    int bad = 0;
    snprintf(pa, sizeof(pa), "%s.nb", prefix);
    snprintf(pb, sizeof(pb), "%s.bl", prefix);
    for (int k = 0; k < 2; k++) { /* k 0: blocking reference; 1: nonblocking */
        float *x = k ? a : b;
        for (int s = 0; s < 3; s++) {
            ref_input(x, CM, rank, s, 61);
            if (k == 0) {
                NF_Allreduce_route(MPI_IN_PLACE, x, CM, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                   NF_ROUTE_BINARY);
            } else {
                NF_Iallreduce_route(MPI_IN_PLACE, x, CM, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                    NF_ROUTE_BINARY, &req);
                if (s == 2) /* right away, the call still queued or running */
                    bad |= nft_check(NF_Residuals_save(MPI_COMM_WORLD, pa) == MPI_SUCCESS,
                                     "ckpt", "save with a call in flight failed");
                bad |= nft_check(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "ckpt",
                                 "wait failed");
            }
        }
        if (k == 0)
            bad |= nft_check(NF_Residuals_save(MPI_COMM_WORLD, pb) == MPI_SUCCESS, "ckpt",
                             "blocking save failed");
    }
    /* each: load its checkpoint, one more call from the same input */
    for (int k = 0; k < 2; k++) {
        float *x = k ? a : b;
        bad |= nft_check(NF_Residuals_load(MPI_COMM_WORLD, k ? pa : pb) == MPI_SUCCESS, "ckpt",
                         "load %d failed", k);
        ref_input(x, CM, rank, 3, 61);
        NF_Allreduce_route(MPI_IN_PLACE, x, CM, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           NF_ROUTE_BINARY);
    }
    bad |= nft_check(memcmp(a, b, CM * sizeof(float)) == 0, "ckpt",
                     "the residual saved beside a nonblocking call is not the one after it");
    if (!bad)
        printf("ok rank %d: a save with a call in flight saved the residual after it\n", rank);
    free(a), free(b);
    return bad;
}

int main(int argc, char **argv)
{
    int provided = 0, bad = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *mode = argc > 1 ? argv[1] : "";
    if (provided != MPI_THREAD_SERIALIZED)
        printf("FAIL rank %d: asked for MPI_THREAD_SERIALIZED, told %d\n", rank, provided),
            bad = 1;
    if (strcmp(mode, "same") == 0 && argc > 2) {
        MPI_Comm X, Y;
        if (strcmp(argv[2], "policy") != 0 && nf_route_parse(argv[2], (nf_route_t *)&route) != NF_OK)
            return 2;
        MPI_Comm_dup(MPI_COMM_WORLD, &X);
        MPI_Comm_dup(MPI_COMM_WORLD, &Y);
        /* Without an NFCOLL_ request libnfcoll was not initialized when Y was
         * made, so it did not set Y up then: NF_Comm_prepare does, or Y's
         * first calls would be MPI's own (fallback 'setup'). */
        if (NF_Comm_prepare(Y) != MPI_SUCCESS)
            printf("FAIL rank %d: NF_Comm_prepare\n", rank), bad = 1;
        bad |= same(X, Y);
        MPI_Comm_free(&X);
        MPI_Comm_free(&Y);
    } else if (strcmp(mode, "lifetime") == 0) {
        return lifetime() || bad;
    } else if (strcmp(mode, "sleepwait") == 0) {
        bad |= sleepwait();
    } else if (strcmp(mode, "error") == 0) {
        bad |= error_case();
    } else if (strcmp(mode, "ckpt") == 0 && argc > 2) {
        bad |= ckpt_case(argv[2]);
    } else {
        fprintf(stderr, "usage: test_iallreduce same ROUTE|lifetime|sleepwait|error|ckpt PREFIX\n");
        bad = 2;
    }
    MPI_Finalize();
    return bad;
}
