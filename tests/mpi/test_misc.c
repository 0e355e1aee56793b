/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Multi-rank checks around the routes: argument errors, calls a route
 * cannot take, NaN/Inf fallback, residual reset on a count change, the
 * capacity fallback, malformed settings, and memory over 1000 calls.
 * Usage: test_misc [--capacity | --bad-env]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

static int rank, n;

static int handler_calls, handler_code;
static void count_handler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handler_calls++;
    handler_code = *code;
}

/* Argument errors go through the communicator's error handler, as MPI's
 * own do: under MPI_ERRORS_RETURN the entry points return the code. */
static int test_errors(void)
{
    float b[4] = {1, 2, 3, 4}, r[4];
    int f = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    f += nft_check(NF_Allreduce_route(b, r, -1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                      NF_ROUTE_BINARY) == MPI_ERR_COUNT, "negative count", "not MPI_ERR_COUNT");
    f += nft_check(NF_Allreduce_route(b, b, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                      NF_ROUTE_FP32) == MPI_ERR_BUFFER, "aliased buffers", "not MPI_ERR_BUFFER");
    f += nft_check(NF_Allreduce_route(b, r, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                      (nf_route_t)99) == MPI_ERR_ARG, "route 99", "not MPI_ERR_ARG");
    f += nft_check(NF_Allreduce_route(b, r, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL,
                                      NF_ROUTE_FP32) == MPI_ERR_COMM, "MPI_COMM_NULL", "not MPI_ERR_COMM");
    f += nft_check(NF_Allreduce(b, r, -5, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_ERR_COUNT,
                   "NF_Allreduce negative count", "not MPI_ERR_COUNT");
    /* The communicator's own handler sees the code once per failed call. */
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(count_handler, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    int rc = NF_Allreduce_route(b, r, -2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32);
    f += nft_check(rc == MPI_ERR_COUNT && handler_calls == 1 && handler_code == MPI_ERR_COUNT,
                   "error handler invoked with MPI_ERR_COUNT", "handler not invoked as expected");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&eh);
    return f;
}

/* Ranks that pass different counts: MPI_ERR_COUNT on every rank, whichever
 * path each rank's own count would take (a small call against a large one
 * too; on two one-rank nodes, 16000 floats ride with the verdict and 17000
 * do not), and the communicator works on afterwards. */
static int test_count_mismatch(void)
{
    static const int counts[][2] = {{7, 8}, {100, 300000}, {300000, 300001}, {16000, 17000}};
    size_t most = 300001;
    float *b = malloc(most * sizeof(float)), *r = malloc(most * sizeof(float));
    int f = 0;
    for (size_t j = 0; j < most; j++)
        b[j] = (float)(j % 5) - 2.0f;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int route = NF_ROUTE_FP32; route <= NF_ROUTE_TERNARY; route++)
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            int m = counts[i][rank == n - 1];
            int rc = NF_Allreduce_route(b, r, m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                        (nf_route_t)route);
            char what[96];
            snprintf(what, sizeof(what), "%s counts %d/%d differ", nf_route_name((nf_route_t)route),
                     counts[i][0], counts[i][1]);
            f += nft_check(n == 1 ? rc == MPI_SUCCESS : rc == MPI_ERR_COUNT, what, "returned %d", rc);
            rc = NF_Allreduce_route(b, r, 513, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32);
            f += nft_check(rc == MPI_SUCCESS && r[3] == (float)n, "a call after the mismatch",
                           "returned %d, r[3] = %g", rc, (double)r[3]);
        }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    free(b);
    free(r);
    return f;
}

/* Forced low-bit on what it cannot take: PMPI's answer, counted by reason. */
static int test_passthrough(void)
{
    double d[3] = {rank + 0.25, -1.5 * rank, 1e300}, dr[3], dw[3];
    float x[5] = {1.5f * rank, -2.0f, 3.0f, (float)rank, 0.5f}, fr[5], fw[5];
    int f = 0;
    uint64_t dt0 = nf_stats_fallbacks(NF_FALLBACK_DATATYPE), op0 = nf_stats_fallbacks(NF_FALLBACK_OP);
    f += NF_Allreduce_route(d, dr, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_BINARY) != MPI_SUCCESS;
    PMPI_Allreduce(d, dw, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    f += nft_check(memcmp(dr, dw, sizeof(dr)) == 0, "MPI_DOUBLE forced binary", "differs from PMPI");
    f += NF_Allreduce_route(x, fr, 5, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD, NF_ROUTE_TERNARY) != MPI_SUCCESS;
    PMPI_Allreduce(x, fw, 5, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    f += nft_check(memcmp(fr, fw, sizeof(fr)) == 0, "MPI_MAX forced ternary", "differs from PMPI");
    f += nft_check(nf_stats_fallbacks(NF_FALLBACK_DATATYPE) == dt0 + 1, "datatype fallback", "not counted");
    f += nft_check(nf_stats_fallbacks(NF_FALLBACK_OP) == op0 + 1, "op fallback", "not counted");
    return f;
}

/* Call 1 carries a NaN (last rank) and an Inf (rank 0): that call is fp32,
 * the residual is left alone, and the calls around it stay low-bit. */
static int test_nonfinite(nf_route_t route)
{
    const size_t m = 513;
    float *xs = malloc(n * m * sizeof(float)), *es = calloc(n * m, sizeof(float));
    float *buf = nft_keep(malloc(m * sizeof(float))), ref[513];
    uint64_t nf0 = nf_stats_fallbacks(NF_FALLBACK_NONFINITE);
    int f = 0;
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < n; i++)
            ref_input(xs + (size_t)i * m, m, i, c, 77 + route);
        if (c == 1) {
            xs[(size_t)(n - 1) * m + 5] = NAN;
            xs[9] = INFINITY;
        }
        memcpy(buf, xs + (size_t)rank * m, m * sizeof(float));
        f += NF_Allreduce_route(MPI_IN_PLACE, buf, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                route) != MPI_SUCCESS;
        if (c == 1)
            ref_fp32(ref, xs, n, m);
        else if (route == NF_ROUTE_BINARY)
            ref_binary(ref, xs, es, n, m);
        else
            ref_ternary(ref, xs, es, n, m, 1.0);
        f += nft_check(isnan(buf[5]) == isnan(ref[5]), "NaN position", "NaN not propagated");
        buf[5] = ref[5] = 0.0f; /* NaN payloads are MPI's business, not ours */
        f += nft_same_floats(buf, ref, m, c == 1 ? "non-finite call runs fp32" : "call after NaN");
    }
    f += nft_check(nf_stats_fallbacks(NF_FALLBACK_NONFINITE) == nf0 + 1, "nonfinite fallback",
                   "counted %llu times, expected 1",
                   (unsigned long long)(nf_stats_fallbacks(NF_FALLBACK_NONFINITE) - nf0));
    free(xs);
    free(es);
    return f;
}

/* Same address, new count: the residual starts over from zero. */
static int test_residual_reset(void)
{
    const size_t ms[4] = {513, 7, 7, 513};
    float *buf = nft_keep(malloc(513 * sizeof(float))), ref[513];
    float *xs = malloc(n * 513 * sizeof(float)), *es = calloc(n * 513, sizeof(float));
    int f = 0;
    for (int c = 0; c < 4; c++) {
        size_t m = ms[c];
        if (c == 0 || ms[c] != ms[c - 1])
            memset(es, 0, n * 513 * sizeof(float));
        for (int i = 0; i < n; i++)
            ref_input(xs + (size_t)i * m, m, i, c, 99);
        memcpy(buf, xs + (size_t)rank * m, m * sizeof(float));
        f += NF_Allreduce_route(MPI_IN_PLACE, buf, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                NF_ROUTE_BINARY) != MPI_SUCCESS;
        ref_binary(ref, xs, es, n, m);
        f += nft_same_floats(buf, ref, m, "residual reset on count change");
    }
    free(xs);
    free(es);
    return f;
}

/* One buffer switching between binary and ternary keeps one residual e. */
static int test_route_switch(void)
{
    const size_t m = 1031;
    const nf_route_t seq[6] = {NF_ROUTE_BINARY, NF_ROUTE_BINARY, NF_ROUTE_TERNARY,
                               NF_ROUTE_BINARY, NF_ROUTE_TERNARY, NF_ROUTE_TERNARY};
    float *xs = malloc(n * m * sizeof(float)), *es = calloc(n * m, sizeof(float));
    float *buf = nft_keep(malloc(m * sizeof(float))), *ref = malloc(m * sizeof(float));
    int f = 0;
    for (int c = 0; c < 6; c++) {
        for (int i = 0; i < n; i++)
            ref_input(xs + (size_t)i * m, m, i, c, 123);
        memcpy(buf, xs + (size_t)rank * m, m * sizeof(float));
        f += NF_Allreduce_route(MPI_IN_PLACE, buf, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                seq[c]) != MPI_SUCCESS;
        if (seq[c] == NF_ROUTE_BINARY)
            ref_binary(ref, xs, es, n, m);
        else
            ref_ternary(ref, xs, es, n, m, 1.0);
        f += nft_same_floats(buf, ref, m, "route switch keeps the residual");
    }
    free(xs);
    free(es);
    free(ref);
    return f;
}

/* One rank's identity read-back through the fp32 route is byte-exact. */
static int test_identity(void)
{
    float x[6] = {-0.0f, 0.0f, NAN, -INFINITY, 1e-45f, 3.4e38f}, r[6];
    uint32_t payload = 0x7fc12345;
    memcpy(&x[2], &payload, 4);
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    int rc = NF_Allreduce_route(x, r, 6, MPI_FLOAT, MPI_SUM, self, NF_ROUTE_FP32);
    MPI_Comm_free(&self);
    return nft_check(rc == MPI_SUCCESS && memcmp(x, r, sizeof(x)) == 0, "identity read-back",
                     "not byte-exact");
}

static int test_count0(void)
{
    float r[2] = {42.0f, 43.0f};
    int f = 0;
    for (int route = NF_ROUTE_PMPI; route < NF_ROUTE_COUNT; route++) {
        f += NF_Allreduce_route(MPI_IN_PLACE, r, 0, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                (nf_route_t)route) != MPI_SUCCESS;
        f += nft_check(r[0] == 42.0f && r[1] == 43.0f, "count 0", "buffer touched");
    }
    return f;
}

static long rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *fp = fopen("/proc/self/statm", "r");
    if (fp == NULL)
        return -1;
    if (fscanf(fp, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(fp);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* 1000 calls on the same buffers: no growth past the first 100. */
static int test_memory(void)
{
    const int m = 4099;
    float *buf = nft_keep(malloc(m * sizeof(float)));
    long before = 0;
    int f = 0;
    for (int c = 0; c < 1000; c++) {
        ref_input(buf, m, rank, c, 5);
        f += NF_Allreduce_route(MPI_IN_PLACE, buf, m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                (nf_route_t)(NF_ROUTE_FP32 + c % 3)) != MPI_SUCCESS;
        if (c == 99)
            before = rss_kib();
    }
    long after = rss_kib();
    return f + nft_check(after - before <= 256, "1000 calls", "RSS grew by %ld KiB", after - before);
}

/* NFCOLL_COUNT_BITS=1 cannot count 3 ranks: binary runs fp32, counted once per call. */
static int test_capacity(void)
{
    const size_t m = 130;
    float xs[4 * 130], buf[130], ref[130];
    uint64_t c0 = nf_stats_fallbacks(NF_FALLBACK_CAPACITY);
    for (int i = 0; i < n; i++)
        ref_input(xs + (size_t)i * m, m, i, 0, 3);
    memcpy(buf, xs + (size_t)rank * m, sizeof(buf));
    int f = NF_Allreduce_route(MPI_IN_PLACE, buf, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               NF_ROUTE_BINARY) != MPI_SUCCESS;
    ref_fp32(ref, xs, n, m);
    f += nft_same_floats(buf, ref, m, "capacity fallback runs fp32");
    return f + nft_check(nf_stats_fallbacks(NF_FALLBACK_CAPACITY) == c0 + 1, "capacity fallback",
                         "not counted");
}

/* A malformed NFCOLL_EF keeps the default (on): EF carries over calls. */
static int test_bad_env(void)
{
    const size_t m = 77;
    float xs[4 * 77], es[4 * 77] = {0}, buf[77], ref[77];
    int f = 0;
    for (int c = 0; c < 2; c++) {
        for (int i = 0; i < n; i++)
            ref_input(xs + (size_t)i * m, m, i, c, 11);
        memcpy(buf, xs + (size_t)rank * m, sizeof(buf));
        f += NF_Allreduce_route(MPI_IN_PLACE, buf, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                NF_ROUTE_BINARY) != MPI_SUCCESS;
        ref_binary(ref, xs, es, n, m);
        f += nft_same_floats(buf, ref, m, "malformed NFCOLL_EF keeps EF on");
    }
    return f;
}

int main(int argc, char **argv)
{
    int f = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    if (argc > 1 && strcmp(argv[1], "--capacity") == 0)
        return nft_finish(test_capacity(), "test_misc --capacity");
    if (argc > 1 && strcmp(argv[1], "--bad-env") == 0)
        return nft_finish(test_bad_env(), "test_misc --bad-env");
    f += test_errors();
    f += test_count_mismatch();
    f += test_passthrough();
    f += test_nonfinite(NF_ROUTE_BINARY);
    f += test_nonfinite(NF_ROUTE_TERNARY);
    f += test_residual_reset();
    f += test_route_switch();
    f += test_identity();
    f += test_count0();
    f += test_memory();
    return nft_finish(f, "test_misc");
}
