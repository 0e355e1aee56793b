/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Health monitoring (tests/mpi_health.sh, policy tests/policy_shim/
 * health.policy: binary, cooldown 3, cap 6). One buffer, one call per step;
 * which route each step ran on is read back from the stats counters (fp32
 * calls versus binary calls before and after the step), identical on every
 * rank:
 *   steps 0-3 binary; step 4 rank 1 has a NaN: that call runs fp32
 *   (nonfinite) and the next 3 steps run fp32; then binary; a second NaN
 *   soon after doubles the cool-down to 6;
 *   every rank reports a loss each step; a spike (x10) cools down again;
 *   a gradient that drops 1e6-fold against its residual: ef_growth.
 * Prints one letter per step (b a low-bit route, f fp32) on rank 0 for the
 * script.
 * Losses that are negative or change sign (no NaN, no ef_growth):
 *   --negative: -2.0 every step, +5.0 at step 20 (a spike: 3 steps fp32);
 *   --alternating: +0.1 and -0.1 in turn: never a spike.
 *   --overflow: 1.0 every step but 1.7e308 at step 10 (the ranks' mean
 *   overflows to +Inf: a spike) and 10.0 at step 17 (a spike the window
 *   must still see: an Inf in it made its scale NaN).
 *
 * --record (policy record.policy, profile record.profile): a buffer of
 * four bound regions, rec.head (fp32 by its rule), rec.body (binary by its
 * profile entry), rec.tail (fp32: no entry), rec.old (fp32: its entry
 * measured another count). Rank n-1 puts a NaN into rec.body at step 4:
 * that call falls back to fp32 (nonfinite), a cool-down of 3 calls follows
 * (5-7) and rec.body re-enters binary at call 8. The script reads why from
 * the stats' "admission" record and the trace.
 *
 * --reentry: a divergence that health cools down, then lets back: every
 * rank's gradient is 1000 times larger at step 10 and the loss spikes
 * (x10); steps 11-13 cool down, step 14 re-enters binary and stays there:
 * the residual left by step 10 starts over (kept, it read as ef_growth at
 * once and cooled the buffer down again). Prints "reentry ROUTES".
 *
 * --gaps: a fused buffer a | gap | b | gap | c whose two gaps have one
 * size. A NaN in the first gap cools that gap alone, for exactly its
 * cool-down (issue 17 item 6: they shared one record, so the other gap
 * cooled too and the cool-down counted down twice per call).
 *
 * --warmup (policy tests/policy_shim/warmup.policy): a whole buffer under
 * `warmup = 3` runs its first 3 calls fp32, bit for bit the exact sum,
 * then binary from a zero residual, bit for bit the reference; in a fused
 * buffer w.a (warmup 2) and w.b (no warm-up) count apart: w.a runs fp32
 * twice while w.b is binary from its first call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

enum { M = 4096, STEPS = 40 };

static char step_route(void)
{
    static const nf_route_t low[] = {NF_ROUTE_BINARY, NF_ROUTE_TERNARY, NF_ROUTE_INT4,
                                     NF_ROUTE_INT3, NF_ROUTE_INT2};
    static uint64_t fp32_seen, low_seen;
    nf_route_stats_t f, b;
    uint64_t lowc = 0;
    nf_stats_get(NF_ROUTE_FP32, &f);
    for (size_t i = 0; i < sizeof(low) / sizeof(low[0]); i++) {
        nf_stats_get(low[i], &b);
        lowc += b.calls;
    }
    char r = f.calls > fp32_seen ? 'f' : lowc > low_seen ? 'b' : '?';
    fp32_seen = f.calls, low_seen = lowc;
    return r;
}

/* fp32 segments run since the last look. */
static unsigned fp32_segments(void)
{
    static uint64_t seen;
    nf_route_stats_t f;
    nf_stats_get(NF_ROUTE_FP32, &f);
    unsigned d = (unsigned)(f.calls - seen);
    seen = f.calls;
    return d;
}

static int test_gaps(int rank, int n)
{
    enum { GM = 5000, GSTEPS = 10, NAN_STEP = 2 };
    /* a [0,1000) gap [1000,1500) b [1500,2500) gap [2500,3000) c [3000,5000) */
    static const unsigned want[GSTEPS] = {0, 0, 1, 1, 1, 1, 0, 0, 0, 0};
    float *buf = nft_keep(malloc(GM * sizeof(float)));
    char got[3 * GSTEPS + 1] = {0}, exp[3 * GSTEPS + 1] = {0};
    int fails = 0;
    fails += nft_check(NF_Region_bind(buf, 1000, MPI_FLOAT, "gaps.a") == MPI_SUCCESS &&
                           NF_Region_bind(buf + 1500, 1000, MPI_FLOAT, "gaps.b") == MPI_SUCCESS &&
                           NF_Region_bind(buf + 3000, 2000, MPI_FLOAT, "gaps.c") == MPI_SUCCESS,
                       "bind a, b, c", "failed");
    fp32_segments();
    for (int s = 0; s < GSTEPS; s++) {
        ref_input(buf, GM, rank, s, 11);
        if (s == NAN_STEP && rank == n - 1)
            buf[1200] = NAN; /* in the first gap */
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, GM, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        fails += nft_check(rc == MPI_SUCCESS, "gaps call", "return code %d", rc);
        snprintf(got + 2 * s, 3, "%u ", fp32_segments());
        snprintf(exp + 2 * s, 3, "%u ", want[s]);
    }
    if (rank == 0)
        printf("gaps: fp32 segments per step %s\n", got);
    fails += nft_check(strcmp(got, exp) == 0, "one gap's NaN cools that gap alone",
                       "fp32 segments per step %s, want %s", got, exp);
    NF_Region_unbind(buf);
    NF_Region_unbind(buf + 1500);
    NF_Region_unbind(buf + 3000);
    return fails;
}

static int test_record(int rank, int n)
{
    enum { RM = 4000, RSTEPS = 12 };
    float *buf = nft_keep(malloc(RM * sizeof(float)));
    int fails = nft_check(NF_Region_bind(buf, 1000, MPI_FLOAT, "rec.head") == MPI_SUCCESS &&
                              NF_Region_bind(buf + 1000, 2000, MPI_FLOAT, "rec.body") ==
                                  MPI_SUCCESS &&
                              NF_Region_bind(buf + 3000, 500, MPI_FLOAT, "rec.tail") ==
                                  MPI_SUCCESS &&
                              NF_Region_bind(buf + 3500, 500, MPI_FLOAT, "rec.old") ==
                                  MPI_SUCCESS,
                          "bind rec.*", "failed");
    for (int s = 0; s < RSTEPS; s++) {
        ref_input(buf, RM, rank, s, 13);
        if (s == 4 && rank == n - 1)
            buf[1500] = NAN; /* in rec.body */
        NF_Health_report(1.0);
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, RM, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        fails += nft_check(rc == MPI_SUCCESS, "record call", "return code %d", rc);
    }
    for (int k = 0; k < 4; k++)
        NF_Region_unbind(buf + (k == 0 ? 0 : k == 1 ? 1000 : k == 2 ? 3000 : 3500));
    return fails;
}

static int test_reentry(int rank)
{
    enum { RSTEPS = 24 };
    char routes[RSTEPS + 1] = {0};
    float *buf = nft_keep(malloc(M * sizeof(float)));
    int fails = 0;
    step_route();
    for (int s = 0; s < RSTEPS; s++) {
        ref_input(buf, M, rank, s, 17);
        for (int j = 0; s == 10 && j < M; j++)
            buf[j] *= 1000.0f;
        NF_Health_report(s == 10 ? 10.0 : 1.0);
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        fails += nft_check(rc == MPI_SUCCESS, "reentry call", "return code %d", rc);
        routes[s] = step_route();
    }
    fails += nft_identical_on_all(routes, RSTEPS, "routes per step");
    if (rank == 0)
        printf("reentry %s\n", routes);
    return fails;
}

static int test_warmup(int rank, int n)
{
    enum { WM = 3000, WSTEPS = 6, WARM = 3 };
    float *buf = nft_keep(malloc(WM * sizeof(float)));
    float *xs = nft_keep(malloc((size_t)n * WM * sizeof(float)));
    float *es = nft_keep(calloc((size_t)n * WM, sizeof(float)));
    float *want = nft_keep(malloc(WM * sizeof(float)));
    char got[WSTEPS + 1] = {0};
    int fails = 0;
    ref_nodes_init(n);
    for (int s = 0; s < WSTEPS; s++) {
        for (int i = 0; i < n; i++)
            ref_input(xs + (size_t)i * WM, WM, i, s, 5);
        memcpy(buf, xs + (size_t)rank * WM, WM * sizeof(float));
        if (s < WARM)
            ref_fp32(want, xs, n, WM);
        else
            ref_binary(want, xs, es, n, WM);
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, WM, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        fails += nft_check(rc == MPI_SUCCESS, "warmup call", "return code %d", rc);
        got[s] = step_route();
        fails += nft_check(memcmp(buf, want, WM * sizeof(float)) == 0, "warm-up results",
                           "step %d differs from the %s reference", s, s < WARM ? "fp32" : "binary");
    }
    fails += nft_check(strcmp(got, "fffbbb") == 0, "a buffer warms up for 3 calls",
                       "routes %s, want fffbbb", got);
    /* w.a [0,1000) warmup 2, gap [1000,1500) (rule all: warmup 3), w.b
     * [1500,3000) no warm-up */
    static const unsigned wantf[WSTEPS] = {2, 2, 1, 0, 0, 0};
    char fs[3 * WSTEPS + 1] = {0}, fe[3 * WSTEPS + 1] = {0};
    fails += nft_check(NF_Region_bind(buf, 1000, MPI_FLOAT, "w.a") == MPI_SUCCESS &&
                           NF_Region_bind(buf + 1500, 1500, MPI_FLOAT, "w.b") == MPI_SUCCESS,
                       "bind w.a, w.b", "failed");
    fp32_segments();
    for (int s = 0; s < WSTEPS; s++) {
        ref_input(buf, WM, rank, s, 9);
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, WM, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        fails += nft_check(rc == MPI_SUCCESS, "fused warmup call", "return code %d", rc);
        snprintf(fs + 2 * s, 3, "%u ", fp32_segments());
        snprintf(fe + 2 * s, 3, "%u ", wantf[s]);
    }
    if (rank == 0)
        printf("warmup: routes %s; fused fp32 segments per step %s\n", got, fs);
    fails += nft_check(strcmp(fs, fe) == 0, "regions warm up apart",
                       "fp32 segments per step %s, want %s", fs, fe);
    NF_Region_unbind(buf);
    NF_Region_unbind(buf + 1500);
    return fails;
}

int main(int argc, char **argv)
{
    int rank, n, fails = 0;
    char routes[STEPS + 1] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc > 1 && strcmp(argv[1], "--gaps") == 0)
        return nft_finish(test_gaps(rank, n), "test_health --gaps");
    if (argc > 1 && strcmp(argv[1], "--reentry") == 0)
        return nft_finish(test_reentry(rank), "test_health --reentry");
    if (argc > 1 && strcmp(argv[1], "--record") == 0)
        return nft_finish(test_record(rank, n), "test_health --record");
    if (argc > 1 && strcmp(argv[1], "--warmup") == 0)
        return nft_finish(test_warmup(rank, n), "test_health --warmup");
    int neg = argc > 1 && strcmp(argv[1], "--negative") == 0;
    int alt = argc > 1 && strcmp(argv[1], "--alternating") == 0;
    int ovf = argc > 1 && strcmp(argv[1], "--overflow") == 0;
    float *buf = nft_keep(malloc(M * sizeof(float)));
    for (int s = 0; s < STEPS; s++) {
        float scale = s >= 30 && !neg && !alt && !ovf ? 1e-6f : 1.0f; /* ef_growth from 30 */
        ref_input(buf, M, rank, s, 7);
        for (int j = 0; j < M; j++)
            buf[j] *= scale;
        if ((s == 4 || s == 10) && rank == n - 1 && !neg && !alt && !ovf)
            buf[17] = NAN;
        if (neg)
            NF_Health_report(s == 20 ? 5.0 : -2.0);
        else if (alt)
            NF_Health_report(s % 2 ? -0.1 : 0.1);
        else if (ovf)
            NF_Health_report(s == 10 ? 1.7e308 : s == 17 ? 10.0 : 1.0);
        else
            NF_Health_report(s == 20 ? 10.0 : 1.0); /* a loss spike at step 20 */
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        fails += nft_check(rc == MPI_SUCCESS, "call", "return code %d", rc);
        routes[s] = step_route();
    }
    fails += nft_identical_on_all(routes, STEPS, "routes per step");
    fails += nft_check(NF_Health_report(NAN) == MPI_ERR_ARG, "report NaN", "accepted");
    if (rank == 0)
        printf("routes %s\n", routes);
    return nft_finish(fails, "test_health");
}
