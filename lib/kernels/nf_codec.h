/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What each route's codec costs on this machine, in ns per element of the
 * call, measured with a kernel table (codec.c). nfcoll_info prints it and
 * nfcoll_replay --link predicts a call's time from it (docs/design.md,
 * "Predicting a call's time"). Plain C over the kernels: no MPI.
 */
#ifndef NF_CODEC_H
#define NF_CODEC_H

#include <stddef.h>

#include "nf_kernels.h"

/* The codecs, one per route that has one (pmpi's sum is Open MPI's, close
 * to fp32's reduce stage). */
typedef enum nf_codec {
    NF_CODEC_FP32 = 0,
    NF_CODEC_BF16,
    NF_CODEC_BINARY,
    NF_CODEC_TERNARY,
    NF_CODEC_INT4,
    NF_CODEC_COUNT /* last: the number of codecs */
} nf_codec_t;

/* A call's three stages, as the library runs them with one rank per node:
 *   pack    each rank, before the wire: fp32 copies x into its slot, bf16
 *           rounds (bf16_pack), binary bin_pack_ef, ternary ter_y_ef then
 *           ter_pack, int4 int_y_ef (the residual from the previous block
 *           maxima) then int_pack with the block maxima it found (all with
 *           error feedback, decay 1; int4 in blocks of NF_INT_BLOCK_DEFAULT);
 *   reduce  the n ranks' contributions summed: sum_f32, sum_bf16, or the
 *           bit counters (count_sum over n inputs; ternary has two lines
 *           per 512 elements, int4 four);
 *   finish  each rank, after the reduction: fp32 copies the sum out, binary
 *           bin_finish, ternary ter_finish, int4 int_finish, bf16 nothing
 *           (the sum is the result). */
enum { NF_CODEC_PACK = 0, NF_CODEC_REDUCE, NF_CODEC_FINISH, NF_CODEC_STAGES };

/* Sizes a measurement takes, in elements: one in the caches, one past
 * them, one far beyond the last-level cache (16 MiB of floats). */
#define NF_CODEC_SIZES 3
extern const size_t nf_codec_size[NF_CODEC_SIZES];

/* Most copies of the measurement run at once (nf_codec_measure's share). */
#define NF_CODEC_SHARE_MAX 64u

typedef struct nf_codec_rates {
    unsigned ranks; /* n of the reduce stage */
    unsigned share; /* copies timed at once */
    /* ns per element of the call, median of the repeats, per size */
    double ns[NF_CODEC_COUNT][NF_CODEC_STAGES][NF_CODEC_SIZES];
} nf_codec_rates_t;

/* Time every codec's stages with table k at each of nf_codec_size, ranks
 * contributions in the reduce stage (2..64), the median of reps (1..99)
 * repeats. Each stage is timed on its second run in a row; the largest size
 * reads from DRAM. share (1..NF_CODEC_SHARE_MAX) copies run at once, each
 * in a thread with buffers of its own, each stage started together: the
 * ranks whose codecs share this memory (a node's ranks, or pretend hosts on
 * one machine), since at the largest size they share its bandwidth; a
 * stage's time is the slowest copy's. Takes about 0.1 s per repeat here,
 * and about 100 MiB per copy. Returns 0, or 1 when the buffers or threads
 * cannot be had or an argument is out of range. */
int nf_codec_measure(const nf_kernels_t *k, unsigned ranks, unsigned share, int reps,
                     nf_codec_rates_t *out);

/* A stage's (or with stage < 0, the whole codec's) time in ns for a call of
 * m elements: the rate per element interpolated linearly in log2(m)
 * between the measured sizes, the end rates beyond them, times m. */
double nf_codec_ns(const nf_codec_rates_t *r, nf_codec_t codec, int stage, size_t m);

/* "fp32", "bf16", "binary", "ternary", "int4"; NULL out of range. */
const char *nf_codec_name(nf_codec_t codec);

#endif /* NF_CODEC_H */
