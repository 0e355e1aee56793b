/* SPDX-License-Identifier: BSD-3-Clause */
/* What the osu-style benchmarks share (bench_args.h). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_args.h"

int bench_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1024 * 1024; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end != '\0' || !isfinite(v) || v >= 0x1p63)
        return -1;
    *out = (size_t)v;
    return 0;
}

int bench_range(char *s, size_t *min, size_t *max)
{
    char *colon = strchr(s, ':');
    if (colon != NULL)
        *colon = '\0';
    if ((colon != NULL && bench_size(s, min) != 0) ||
        bench_size(colon != NULL ? colon + 1 : s, max) != 0 || *max < *min)
        return -1;
    return 0;
}

int bench_count(const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

int bench_sizes_parse(char *s, bench_sizes_t *z)
{
    size_t min = z->min, max = z->max;
    if (strchr(s, ',') == NULL) {
        if (bench_range(s, &min, &max) != 0)
            return -1;
        z->min = min < sizeof(float) ? sizeof(float) : min;
        z->max = max < z->min ? z->min : max;
        z->n = 0;
        return 0;
    }
    int n = 0;
    max = 0;
    for (char *tok = strtok(s, ","); tok != NULL; tok = strtok(NULL, ",")) {
        size_t b;
        if (n == BENCH_MAX_SIZES || bench_size(tok, &b) != 0 || b == 0 || b % sizeof(float) ||
            b / sizeof(float) > INT32_MAX)
            return -1;
        z->list[n++] = b;
        max = b > max ? b : max;
    }
    if (n == 0)
        return -1;
    z->n = n, z->max = max;
    return 0;
}

size_t bench_sizes_at(const bench_sizes_t *z, int i)
{
    if (z->n > 0)
        return i < z->n ? z->list[i] : 0;
    if (i >= 63 || z->min > (z->max >> i))
        return 0;
    return z->min << i;
}

int bench_launch_rank(void)
{
    static const char *const var[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof(var) / sizeof(var[0]); i++) {
        const char *v = getenv(var[i]);
        if (v != NULL && *v != '\0')
            return atoi(v);
    }
    return 0;
}

#define BENCH_STR_(x) #x
#define BENCH_STR(x) BENCH_STR_(x)
#if defined(OMPI_MAJOR_VERSION)
#define BENCH_MPI "Open MPI " BENCH_STR(OMPI_MAJOR_VERSION) "." BENCH_STR(OMPI_MINOR_VERSION) \
                  "." BENCH_STR(OMPI_RELEASE_VERSION)
#elif defined(MPICH_VERSION)
#define BENCH_MPI "MPICH " MPICH_VERSION
#else
#define BENCH_MPI "an MPI"
#endif

void bench_version(FILE *f, const char *prog)
{
    const char *lib = nf_version(NULL, NULL, NULL);
    fprintf(f, "%s (libnfcoll) %s\n", prog, NFCOLL_VERSION_STRING);
    if (strcmp(lib, NFCOLL_VERSION_STRING) != 0)
        fprintf(f, "running libnfcoll %s\n", lib);
    fprintf(f, "built with %s (MPI standard %d.%d)\n", BENCH_MPI, MPI_VERSION, MPI_SUBVERSION);
}

bench_check_t bench_check_of(nf_route_t route)
{
    return route == NF_ROUTE_PMPI || route == NF_ROUTE_FP32 ? BENCH_EXACT
           : route == NF_ROUTE_BF16                          ? BENCH_BF16
                                                             : BENCH_SIGNS;
}

float bench_input(size_t j, int rank)
{
    int k = (int)(j % 7);
    return (float)(k - 3) * (float)(rank + 1) + (k == 3 ? 0.5f : 0.0f);
}

/* x rounded to bfloat16, nearest with ties to even (x finite). */
static float bf16_of(float x)
{
    uint32_t u, lo;
    memcpy(&u, &x, sizeof(u));
    lo = u & 0xffff0000u;
    u = (u & 0xffffu) > 0x8000u || ((u & 0xffffu) == 0x8000u && (lo & 0x10000u)) ? lo + 0x10000u
                                                                                  : lo;
    memcpy(&x, &u, sizeof(x));
    return x;
}

int bench_check(const float *r, size_t count, int rank, int nranks, bench_check_t how)
{
    for (size_t j = 0; j < count; j++) {
        if (how == BENCH_SIGNS) {
            float s = bench_input(j, rank);
            if (!isfinite(r[j]) || (s > 0 && r[j] < 0) || (s < 0 && r[j] > 0))
                return 1;
            continue;
        }
        float sum = 0.0f;
        for (int i = 0; i < nranks; i++)
            sum += how == BENCH_BF16 ? bf16_of(bench_input(j, i)) : bench_input(j, i);
        if (r[j] != sum)
            return 1;
    }
    return 0;
}
