/*
 * Calibration on synthetic data (tests/mpi_calib.sh): a fused buffer with
 * a region "dense" where every rank holds the same dense signal (plus a
 * little noise) and a region "spiky" where each rank holds a few private
 * spikes of magnitudes spread over decades on a quiet floor. With
 * --calibrate the results must be the exact fp32 sums (checked against
 * nf_ref.h); the profile written at MPI_Finalize is checked by the script.
 * With --auto (a policy with route = auto and that profile) the segments
 * take the profile's routes, which the script reads from the stats.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

enum { M1 = 4096, M2 = 4096, M = M1 + M2 };

static void fill(float *x, int rank, int call)
{
    uint64_t s = 0x1234567ull + (uint64_t)call * 7919u, p = s ^ ((uint64_t)rank << 40);
    for (int j = 0; j < M1; j++) { /* shared signal, private noise */
        double u = (double)(ref_rng(&s) >> 11) / 9007199254740992.0 - 0.5;
        double v = (double)(ref_rng(&p) >> 11) / 9007199254740992.0 - 0.5;
        x[j] = (float)(u + 0.05 * v);
    }
    for (int j = 0; j < M2; j++) {
        double v = (double)(ref_rng(&p) >> 11) / 9007199254740992.0 - 0.5;
        x[M1 + j] = (float)(1e-4 * v);
    }
    for (int k = 0; k < 24; k++) { /* this rank's spikes */
        uint64_t r = ref_rng(&p);
        x[M1 + (int)(r % M2)] = (float)((r & 1 ? 1 : -1) * pow(10.0, (double)(k % 8) / 2.0));
    }
}

int main(int argc, char **argv)
{
    int rank, n, calls = argc > 2 ? atoi(argv[2]) : 8, fails = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    int exact = argc > 1 && strcmp(argv[1], "--calibrate") == 0;
    float *buf = nft_keep(malloc(M * sizeof(float)));
    float *xs = malloc((size_t)n * M * sizeof(float)), *ref = malloc(M * sizeof(float));
    NF_Region_bind(buf, M1, MPI_FLOAT, "dense");
    NF_Region_bind(buf + M1, M2, MPI_FLOAT, "spiky");
    for (int c = 0; c < calls; c++) {
        for (int i = 0; i < n; i++)
            fill(xs + (size_t)i * M, i, c);
        memcpy(buf, xs + (size_t)rank * M, M * sizeof(float));
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, M, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        char what[64];
        snprintf(what, sizeof(what), "call %d", c);
        fails += nft_check(rc == MPI_SUCCESS, what, "return code %d", rc);
        if (exact) {
            ref_fp32(ref, xs, n, M);
            fails += nft_same_floats(buf, ref, M, what);
        }
        fails += nft_identical_on_all(buf, M * sizeof(float), what);
    }
    free(xs);
    free(ref);
    return nft_finish(fails, exact ? "test_calib --calibrate" : "test_calib --auto");
}
