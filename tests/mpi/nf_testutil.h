/* SPDX-License-Identifier: BSD-3-Clause */
/* Small helpers shared by the multi-rank tests (plain MPI programs run
 * under mpirun by tests/mpi_run.sh; Check's fork mode and MPI do not mix). */
#ifndef NF_TESTUTIL_H
#define NF_TESTUTIL_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void *nft_kept[4096];
static int nft_nkept;

static inline void *nft_keep(void *p)
{
    if (nft_nkept < 4096)
        nft_kept[nft_nkept++] = p;
    return p;
}

static inline int nft_rank(void)
{
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* 1 on failure (printed by the failing rank), 0 on success. */
static inline int nft_check(int ok, const char *what, const char *fmt, ...)
{
    if (ok)
        return 0;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("FAIL rank %d: %s: %s\n", nft_rank(), what, msg);
    fflush(stdout);
    return 1;
}

static inline int nft_same_floats(const float *got, const float *want, size_t m, const char *what)
{
    if (m == 0 || memcmp(got, want, m * sizeof(float)) == 0)
        return 0;
    for (size_t j = 0; j < m; j++)
        if (memcmp(&got[j], &want[j], sizeof(float)) != 0)
            return nft_check(0, what, "element %zu is %a, expected %a", j, (double)got[j],
                             (double)want[j]);
    return 0;
}

static inline uint64_t nft_hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Every rank's bytes hash the same. */
static inline int nft_identical_on_all(const void *p, size_t n, const char *what)
{
    uint64_t h = nft_hash(p, n), lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return nft_check(lo == hi, what, "results differ between ranks");
}

/* Sum failures over ranks, print one verdict, free kept buffers. */
static inline int nft_finish(int fails, const char *name)
{
    int total = 0, n;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (nft_rank() == 0)
        printf("%s %s on %d rank%s (%d failure%s)\n", total ? "FAIL" : "PASS", name, n,
               n == 1 ? "" : "s", total, total == 1 ? "" : "s");
    for (int i = 0; i < nft_nkept; i++)
        free(nft_kept[i]);
    MPI_Finalize();
    return total ? 1 : 0;
}

#endif
