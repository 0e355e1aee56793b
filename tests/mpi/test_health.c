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
 * Prints one letter per step (b binary, f fp32) on rank 0 for the script.
 * Losses that are negative or change sign (no NaN, no ef_growth):
 *   --negative: -2.0 every step, +5.0 at step 20 (a spike: 3 steps fp32);
 *   --alternating: +0.1 and -0.1 in turn: never a spike.
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
    static uint64_t fp32_seen, bin_seen;
    nf_route_stats_t f, b;
    nf_stats_get(NF_ROUTE_FP32, &f);
    nf_stats_get(NF_ROUTE_BINARY, &b);
    char r = f.calls > fp32_seen ? 'f' : b.calls > bin_seen ? 'b' : '?';
    fp32_seen = f.calls, bin_seen = b.calls;
    return r;
}

int main(int argc, char **argv)
{
    int rank, n, fails = 0;
    char routes[STEPS + 1] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int neg = argc > 1 && strcmp(argv[1], "--negative") == 0;
    int alt = argc > 1 && strcmp(argv[1], "--alternating") == 0;
    float *buf = nft_keep(malloc(M * sizeof(float)));
    for (int s = 0; s < STEPS; s++) {
        float scale = s >= 30 && !neg && !alt ? 1e-6f : 1.0f; /* ef_growth from step 30 */
        ref_input(buf, M, rank, s, 7);
        for (int j = 0; j < M; j++)
            buf[j] *= scale;
        if ((s == 4 || s == 10) && rank == n - 1 && !neg && !alt)
            buf[17] = NAN;
        if (neg)
            NF_Health_report(s == 20 ? 5.0 : -2.0);
        else if (alt)
            NF_Health_report(s % 2 ? -0.1 : 0.1);
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
