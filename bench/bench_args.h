/* SPDX-License-Identifier: BSD-3-Clause */
/* Command-line pieces the osu-style benchmarks share (bench_args.c). */
#ifndef BENCH_ARGS_H
#define BENCH_ARGS_H

#include <stddef.h>

/* A byte count with an optional K, M or G suffix (powers of 1024). */
int bench_size(const char *s, size_t *out);
/* -m's "[MIN:]MAX" (s is cut at the colon): MAX alone keeps *min. */
int bench_range(char *s, size_t *min, size_t *max);

#endif
