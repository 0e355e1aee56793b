/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Calibration on synthetic data (tests/mpi_calib.sh): a fused buffer with
 * a region "dense" where every rank holds the same dense signal (plus a
 * little noise) and a region "spiky" where each rank holds a few private
 * spikes of magnitudes spread over decades on a quiet floor. With
 * --calibrate the results must be the exact fp32 sums (checked against
 * nf_ref.h); the profile written at MPI_Finalize is checked by the script.
 * With --auto (a policy with route = auto and that profile) the segments
 * take the profile's routes, which the script reads from the stats.
 * Variants of --calibrate, checked by the script through the profile:
 *   --nonfinite: the last rank has an Inf (call 2) and a NaN (call 3) in
 *     dense: those calls are skipped, not measured;
 *   --late: the buffer has an unbound tail that the last rank binds as
 *     "late" at call 7, after the others have measured everything;
 *   --mismatch: only rank 0 binds the regions: no call measures low-bit.
 * --unwritable: NFCOLL_CALIBRATE names a path that cannot be written:
 * every rank must have said so when MPI_Init returns (stderr captured).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

enum { M1 = 4096, M2 = 4096, M = M1 + M2, TAIL = 1000 };

/* m floats: dense, spiky, and (m > M) a tail like dense. */
static void fill(float *x, int rank, int call, int m)
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
    for (int j = M; j < m; j++)
        x[j] = x[j - M];
}

/* MPI_Init with this rank's stderr in a file; 1 if libnfcoll had said by
 * then that the calibration path cannot be written. */
static int init_unwritable(int *argc, char ***argv)
{
    FILE *cap = tmpfile();
    int saved = dup(2), said = 0;
    char line[512];
    fflush(stderr);
    dup2(fileno(cap), 2);
    MPI_Init(argc, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(cap);
    while (fgets(line, sizeof(line), cap) != NULL) {
        fputs(line, stderr); /* what it said, for the log */
        said |= strstr(line, "calibration profile") != NULL && strstr(line, "cannot be written");
    }
    fclose(cap);
    return said;
}

int main(int argc, char **argv)
{
    int rank, n, calls = argc > 2 ? atoi(argv[2]) : 8, fails = 0;
    const char *mode = argc > 1 ? argv[1] : "--auto";
    int said = strcmp(mode, "--unwritable") == 0 ? init_unwritable(&argc, &argv)
                                                 : (MPI_Init(&argc, &argv), 1);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    fails += nft_check(said, "MPI_Init", "no word that the calibration path cannot be written");
    int exact = strcmp(mode, "--auto") != 0, late = strcmp(mode, "--late") == 0;
    int nonfinite = strcmp(mode, "--nonfinite") == 0, m = late ? M + TAIL : M;
    float *buf = nft_keep(malloc(m * sizeof(float)));
    float *xs = malloc((size_t)n * m * sizeof(float)), *ref = malloc(m * sizeof(float));
    if (strcmp(mode, "--mismatch") != 0 || rank == 0) {
        NF_Region_bind(buf, M1, MPI_FLOAT, "dense");
        NF_Region_bind(buf + M1, M2, MPI_FLOAT, "spiky");
    }
    for (int c = 0; c < calls; c++) {
        for (int i = 0; i < n; i++)
            fill(xs + (size_t)i * m, i, c, m);
        if (nonfinite && (c == 2 || c == 3))
            xs[(size_t)(n - 1) * m + 5] = c == 2 ? INFINITY : NAN;
        if (late && c == 7 && rank == n - 1)
            NF_Region_bind(buf + M, TAIL, MPI_FLOAT, "late");
        memcpy(buf, xs + (size_t)rank * m, m * sizeof(float));
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        char what[64];
        snprintf(what, sizeof(what), "call %d", c);
        fails += nft_check(rc == MPI_SUCCESS, what, "return code %d", rc);
        if (exact && !(nonfinite && (c == 2 || c == 3))) {
            ref_fp32(ref, xs, n, (size_t)m);
            fails += nft_same_floats(buf, ref, (size_t)m, what);
        }
        fails += nft_identical_on_all(buf, (size_t)m * sizeof(float), what);
    }
    free(xs);
    free(ref);
    char name[64];
    snprintf(name, sizeof(name), "test_calib %s", mode);
    return nft_finish(fails, name);
}
