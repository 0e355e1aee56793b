/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the osu-style benchmarks (nfcoll_allreduce, nfcoll_overlap) share
 * (bench_args.c): the command line's sizes, the rank a launcher gives
 * before MPI_Init, --version, and the data and checks of --validation.
 *
 * Their options, one meaning per letter in both (OSU's long names where
 * OSU has the option; man nfcoll_allreduce(1), nfcoll_overlap(1)):
 *   -m --message-size  -i --iterations  -x --warmup  -c --validation
 *   -h --help  -V -v --version                                   (OSU's)
 *   -r --routes  -R --repeats                                    (both)
 *   -F --first-calls (nfcoll_allreduce)  -s --sleep (nfcoll_overlap)
 */
#ifndef BENCH_ARGS_H
#define BENCH_ARGS_H

#include <stddef.h>
#include <stdio.h>

#include <nfcoll.h>

/* Exit statuses: as the tools' (a usage error is 2). */
enum { BENCH_OK = 0, BENCH_FAILED = 1, BENCH_USAGE = 2 };

#define BENCH_MAX_SIZES 64

/* -m's sizes: powers of two from min to max, or the n of list. */
typedef struct bench_sizes {
    size_t min, max;              /* max: the largest, list or not */
    size_t list[BENCH_MAX_SIZES];
    int n;                        /* 0: the powers of two */
} bench_sizes_t;

/* A byte count with an optional K, M or G suffix (powers of 1024). */
int bench_size(const char *s, size_t *out);
/* "[MIN:]MAX" (s is cut at the colon): MAX alone keeps *min. */
int bench_range(char *s, size_t *min, size_t *max);
/* -i, -x, -R: a whole number from lo to INT_MAX into *out; 0, or -1. */
int bench_count(const char *s, int lo, int *out);
/* -m's argument: "[MIN:]MAX", or with a comma "SIZE,SIZE,..." (up to
 * BENCH_MAX_SIZES multiples of 4; "SIZE," for one). s is cut up. MIN
 * below 4 becomes 4. 0, or -1 with z unchanged but for its list. */
int bench_sizes_parse(char *s, bench_sizes_t *z);
/* The i-th size to run (from 0), or 0 after the last. */
size_t bench_sizes_at(const bench_sizes_t *z, int i);

/* This process's rank as the launcher says it (Open MPI, MPICH's hydra,
 * PMIx) before MPI_Init; 0 when none does (a singleton). Only rank 0
 * prints --help, --version and usage errors. */
int bench_launch_rank(void);

/* --version: "PROG (libnfcoll) VERSION" and the MPI PROG was compiled
 * with (from mpi.h; no MPI call, so no MPI_Init). */
void bench_version(FILE *f, const char *prog);

/* --validation: how a route's result is checked. */
typedef enum { BENCH_EXACT, BENCH_BF16, BENCH_SIGNS } bench_check_t;
bench_check_t bench_check_of(nf_route_t route);
/* Element j of rank's input: integers and halves, so that every
 * summation order is exact; all ranks' elements j share a sign. */
float bench_input(size_t j, int rank);
/* Whether r (count elements, the reduction of nranks ranks' bench_input)
 * holds what `how` expects: 1 if not. */
int bench_check(const float *r, size_t count, int rank, int nranks, bench_check_t how);

#endif
