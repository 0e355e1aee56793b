/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Low-bit, bf16 and FP32 kernels over 512-bit lines. Plain C over arrays: nothing
 * here knows MPI, hwloc or the policy, so the unit tests and bench/nf_kernels
 * link these alone (libnfkernels.la).
 *
 * The scalar versions in kernels_scalar.c are the specification. Every ISA
 * must produce the same bits as the scalar reference for every input, which
 * the definitions below make possible:
 *
 *  - |y| sums ("lane sums") are taken in double over 16 lanes: element k of
 *    the buffer (k counted from the first element, whatever its alignment)
 *    is added to lane k % 16 in increasing k; the lanes are then folded as
 *    for (w = 8; w >= 1; w /= 2) for (i = 0; i < w; i++) lane[i] += lane[i + w];
 *    and lane[0] is the result. A sum that is not finite means some y was
 *    NaN or Inf (finite floats cannot overflow a double sum).
 *  - y = x + e is a float add (e == NULL means e = 0, y = x). No FMA anywhere
 *    (built with -ffp-contract=off).
 *  - Bit j of a line covers element 512*l + j of line l: word j / 64, bit
 *    j % 64 of uint64_t words (little-endian bit order). Bits past the end
 *    of the buffer in the last line are zero.
 *  - Counters are bit-sliced: a counter of k planes for line l is k
 *    consecutive lines, plane p (weight 2^p) at cnt + (l * k + p) * 8.
 *  - Results come from a count through a double multiply rounded once to
 *    float: r = (float)(scale * (double)v).
 *
 * Buffers: x may alias r (MPI_IN_PLACE), e never aliases x or r. Line buffers
 * (bits, planes, cnt) are 64-byte aligned. Float buffers may start anywhere,
 * bf16 buffers (uint16_t) at any even address.
 */
#ifndef NF_KERNELS_H
#define NF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define NF_LINE_BYTES 64
#define NF_LINE_BITS 512
#define NF_LINE_WORDS 8   /* uint64_t per line */
#define NF_LANES 16       /* double lanes of a lane sum */

/* A call that writes at least this many floats may use streaming stores:
 * it is far larger than the caches, so skipping the read-for-ownership
 * wins. The caller decides once per call, on the call's whole size, and
 * passes the decision to the kernels with an output (the stream argument of
 * bin_pack_ef, ter_y_ef, bin_finish): a call cut into many small pieces
 * streams as the same call whole does (docs/design.md, "Streaming stores").
 * The decision changes speed only: the same bits are written either way. */
#define NF_STREAM_MIN (1u << 20)

/** Count planes: a counter of NF_COUNT_PLANES_MAX bits holds up to 65535. */
#define NF_COUNT_PLANES_MAX 16

/** Lines needed for m elements at one bit each. */
static inline size_t nf_lines(size_t m) { return (m + NF_LINE_BITS - 1) / NF_LINE_BITS; }

/** Planes needed to count up to n: ceil(log2(n + 1)), at least 1. */
static inline unsigned nf_count_planes(unsigned n)
{
    unsigned k = 1;
    while (k < 32 && (n >> k) != 0)
        k++;
    return k;
}

/* ---- the integer routes' arithmetic, shared by every ISA ---- */

/** Scale blocks of the integer routes: powers of two in this range. */
#define NF_INT_BLOCK_MIN 32u
#define NF_INT_BLOCK_MAX 4096u
#define NF_INT_BLOCK_DEFAULT 128u

/** A block whose max |y| is below 2^-120 quantizes to zero: its scale and
 * inverse are 0 (L / M would overflow a float near the denormals). */
#define NF_INT_TINY 0x1p-120f

/** Levels on each side of zero of a kb-bit code: 7, 3, 1 for 4, 3, 2 bits. */
static inline unsigned nf_int_levels(unsigned kb) { return (1u << (kb - 1)) - 1u; }

/** A block's scale s = M / L and inverse inv = L / M, both float divisions
 * (0 and 0 for a block below NF_INT_TINY). M is finite and >= 0. */
static inline void nf_int_scale(float M, unsigned kb, float *s, float *inv)
{
    float L = (float)nf_int_levels(kb);
    if (!(M >= NF_INT_TINY)) {
        *s = 0.0f, *inv = 0.0f;
        return;
    }
    *s = M / L, *inv = L / M;
}

/** q = clamp(round-half-even(y * inv), -L, L): the float product rounded
 * to an integer, ties to even, both in the default rounding mode (round to
 * nearest, ties to even), which libnfcoll never changes; the SIMD versions
 * round in the same mode (vcvtps2dq). y and inv are finite: the library
 * packs and rebuilds only blocks whose agreed max is finite. */
static inline int nf_int_q(float y, float inv, unsigned kb)
{
    float t = __builtin_nearbyintf(y * inv), L = (float)nf_int_levels(kb);
    t = t > L ? L : t < -L ? -L : t;
    return (int)t;
}

typedef enum nf_isa {
    NF_ISA_SCALAR = 0,
    NF_ISA_AVX2 = 1,
    NF_ISA_AVX512 = 2,
    NF_ISA_COUNT
} nf_isa_t;

typedef struct nf_kernels {
    nf_isa_t isa;     /* a tuned table: the highest ISA of any entry */
    const char *name; /* "scalar", "avx2", "avx512"; a tuned table: its summary */

    /* Lane sum of |x + e| over m elements (ternary pass 1, scale only). */
    double (*abs_sum)(const float *x, const float *e, size_t m);

    /* G-Binary pass 1: y = x + e; sign bit of y (set for -0.0) into bits
     * (nf_lines(m) lines); returns the lane sum of |y|. */
    double (*bin_pack)(const float *x, const float *e, size_t m, uint64_t *bits);

    /* G-Binary pass 1 with error feedback kept as the previous call's y:
     * per element, e = yprev - aprev if yprev's sign bit is clear, else
     * yprev + aprev (exactly the float e the previous call's update
     * e = y - a_i * s produces), then y = x + decay * e: a float multiply
     * (exact for decay 1), then a float add; decay is in [0, 1] (the
     * ef_decay of docs/design.md, "Error feedback"). Writes y into ynew
     * (64-byte aligned, aliasing neither x nor yprev; with stream != 0
     * written with streaming stores where the ISA has them) and the sign
     * bits of y into bits; returns the lane sum of |y|. yprev all +0.0 with
     * aprev = 0 is the zero residual.
     * Keeping y instead of e moves the update out of the final pass, so a
     * call with error feedback touches x, yprev, ynew and r once each. */
    double (*bin_pack_ef)(const float *x, const float *yprev, float aprev, float decay,
                          float *ynew, size_t m, uint64_t *bits, int stream);

    /* G-Binary final pass. For each element: c = counter value from cnt (k
     * planes) = number of ranks whose sign bit was SET (the -1 signs), so
     * the +1 count is n - c and r = (float)(a * (double)(n - 2c)). When e != NULL, first
     * y = x + e and then e = y - ai if y's sign bit is clear, y + ai if set
     * (float arithmetic). x is not read when e == NULL (x may be NULL).
     * stream != 0: r may be written with streaming stores when e == NULL. */
    void (*bin_finish)(float *r, const float *x, float *e, const uint64_t *cnt,
                       unsigned k, size_t m, unsigned n, double a, float ai, int stream);

    /* G-Ternary pass 2: y = x + e; plus bit = (y > t), minus bit = (y < -t)
     * into plus[] and minus[] (nf_lines(m) lines each). Returns the lane sum
     * of |y| over gated-in elements (others add nothing) and their number in
     * *nin. */
    double (*ter_pack)(const float *x, const float *e, size_t m, float t,
                       uint64_t *plus, uint64_t *minus, size_t *nin);

    /* G-Ternary pass 1 with error feedback kept as the previous call's y:
     * per element, e = yprev - bprev if yprev > tprev, yprev + bprev if
     * yprev < -tprev, else yprev (exactly the float e the previous call's
     * ter_finish update produces with t = tprev, bi = bprev), then
     * y = x + decay * e as in bin_pack_ef. Writes y into ynew (64-byte
     * aligned, aliasing neither x nor yprev; with stream != 0 written with
     * streaming stores where the ISA has them) and
     * returns the lane sum of |y|, from which the gate comes; ter_pack then
     * reads ynew alone. yprev all +0.0 with tprev = bprev = 0 is the zero
     * residual; an e buffer with tprev = +Inf is e itself. A call with error
     * feedback then touches x, yprev, ynew (twice) and r once each. */
    double (*ter_y_ef)(const float *x, const float *yprev, float tprev, float bprev,
                       float decay, float *ynew, size_t m, int stream);

    /* G-Ternary final pass. v = P - M from the two counters (k planes each),
     * r = (float)(b * (double)v). When e != NULL: y = x + e; y > t: e = y - bi;
     * y < -t: e = y + bi; else e = y. x is not read when e == NULL. */
    void (*ter_finish)(float *r, const float *x, float *e, const uint64_t *cntp,
                       const uint64_t *cntm, unsigned k, size_t m, double b,
                       float t, float bi);

    /* Bit-sliced sign count: cnt (k planes per line, overwritten) = number of
     * set bits at each position over in[0..nin-1], lines [0, nlines). Needs
     * nin < 2^k. Full-adder logic on planes, no widening to bytes. */
    void (*count_sum)(uint64_t *cnt, unsigned k, const uint64_t *const *in,
                      unsigned nin, size_t nlines);

    /* acc += add, both k-plane counters over nlines lines (carry beyond
     * plane k-1 is the caller's error: it sizes k for the total). */
    void (*count_merge)(uint64_t *acc, const uint64_t *add, unsigned k, size_t nlines);

    /* out[j] = (((in[0][j] + in[1][j]) + in[2][j]) + ...) in float; nin >= 1.
     * out may alias any in[i] (same index). With nin == 1 it is a copy. */
    void (*sum_f32)(float *out, const float *const *in, unsigned nin, size_t m);

    /* bf16 route, each rank: out[j] = the bfloat16 of x[j], as the top 16
     * bits of a float's encoding. With u the bits of x[j]:
     *  - not NaN: (u + 0x7FFF + ((u >> 16) & 1)) >> 16, which is IEEE round
     *    to nearest, ties to even, for every value: denormals are rounded,
     *    not flushed (to a bf16 denormal, to +-0, or from 0x007F8000 up to
     *    the smallest normal); magnitudes (u & 0x7FFFFFFF) from 0x7F7F8000,
     *    halfway between the largest finite bf16 and 2^128, round to +-Inf
     *    as IEEE overflow does (FLT_MAX does); +-0 and +-Inf keep their sign.
     *  - NaN: (u >> 16) | 0x0040. Never rounded: the carry could run into
     *    the sign (0x7FFFFFFF would give -0). The quiet bit keeps a NaN
     *    whose payload lies in the low half from truncating to Inf. So the
     *    sign and the payload's top six bits below the quiet bit are kept,
     *    and a NaN stays a NaN, never Inf or zero, and comes out quiet, as
     *    IEEE convertFormat quiets a signalling NaN (a quiet NaN's top half
     *    is unchanged).
     * out may start at any even address; it overlaps no x. AVX512_BF16's
     * VCVTNEPS2BF16 rounds and quiets NaNs the same way but takes denormal
     * inputs as +-0, so it is not used. */
    void (*bf16_pack)(const float *x, uint16_t *out, size_t m);

    /* bf16 route, the reducer: out[j] = ((b0 + b1) + b2) + ... in float, bi
     * the float whose bits are in[i][j] << 16 (the exact widening: a NaN
     * keeps its bits; no FMA); nin >= 1. With nin == 1 it is the widening
     * alone. Inputs may start at any even address; out overlaps none. */
    void (*sum_bf16)(float *out, const uint16_t *const *in, unsigned nin, size_t m);

    /* The same sum continued from a partial one in float: out[j] =
     * ((acc[j] + b0) + b1) + ...; nin >= 0 (0: out = acc). out may alias acc
     * (same index). For 1 <= k < n, sum_bf16 over n inputs equals sum_bf16
     * over the first k continued by sum_bf16_f32 over the rest, bit for bit:
     * a reducer may add ranks as they arrive, in batches, and the next node
     * may continue a node's partial sum, and the result is still the sum in
     * rank order. */
    void (*sum_bf16_f32)(float *out, const float *acc, const uint16_t *const *in,
                         unsigned nin, size_t m);

    /* int-k pass 1 (docs/design.md, "Integer routes"; kb = 2, 3 or 4 bits,
     * L = nf_int_levels(kb)). Blocks of B elements (a power of two from
     * NF_INT_BLOCK_MIN to NF_INT_BLOCK_MAX) start at element 0; the last
     * may be short. Per element, with b = j / B:
     *  - yprev == NULL: y = x (ynew is not written and may be NULL);
     *  - else e = yprev when mprev == NULL (an E-form residual), otherwise
     *    (mprev finite and >= 0, as every committed block max is)
     *    e = yprev - s * (float)q with s, inv = nf_int_scale(mprev[b], kb)
     *    and q = nf_int_q(yprev, inv, kb) (exactly the e the previous
     *    call's quantization left); y = x + decay * e (a float multiply,
     *    then a float add, as in bin_pack_ef), written to ynew (64-byte
     *    aligned, aliasing neither x nor yprev; with stream != 0 written with
     *    streaming stores where the ISA has them).
     * bmax[b] = the largest of the encodings of |y| over the block, as
     * uint32_t (the bits of fabsf(y)): the block's max |y| when every y is
     * finite, >= 0x7F800000 when some y is Inf or NaN. An integer max, so
     * the same whatever the order. */
    void (*int_y_ef)(const float *x, const float *yprev, const float *mprev, unsigned kb,
                     float decay, float *ynew, size_t m, size_t B, uint32_t *bmax,
                     int stream);

    /* int-k pack: per element, with b = j / B, s, inv = nf_int_scale(M[b],
     * kb) (M[b] the agreed block max, finite and >= 0), q = nf_int_q(y[j],
     * inv, kb) and u = q + L in [0, 2L]: bit p of u (p < kb) into plane p of
     * the element's line. A line l of 512 elements has kb bit lines, plane p
     * at planes + (l * kb + p) * NF_LINE_WORDS (nf_lines(m) * kb lines);
     * bits past m are zero. */
    void (*int_pack)(const float *y, const float *M, unsigned kb, size_t m, size_t B,
                     uint64_t *planes);

    /* int-k final pass. cnt: the count_sum of the n ranks' planes, kc count
     * planes per bit line (bit line i = l * kb + p has its counter at cnt +
     * (i * kc + t) * NF_LINE_WORDS, t < kc). Per element: v = sum over p of
     * 2^p * c_p - n * L (the exact integer sum of the ranks' q), s from
     * nf_int_scale(M[j / B], kb), r = (float)((double)s * (double)v). With
     * stream != 0, r may be written with streaming stores. */
    void (*int_finish)(float *r, const uint64_t *cnt, unsigned kc, const float *M,
                       unsigned kb, size_t m, size_t B, unsigned n, int stream);
} nf_kernels_t;

/*
 * The kernels of nf_kernels_t, in its order: X(field, ID). The one list the
 * tuner's kernel ids, names and table copies are generated from
 * (kernels_tune.c), checked against the struct field by field at compile
 * time (each field's offset is its place in the list). A new kernel is a
 * field above, with its contract, and a line here.
 */
#define NF_KERNEL_LIST(X)                                                                  \
    X(abs_sum, ABS_SUM)                                                                    \
    X(bin_pack, BIN_PACK)                                                                  \
    X(bin_pack_ef, BIN_PACK_EF)                                                            \
    X(bin_finish, BIN_FINISH)                                                              \
    X(ter_pack, TER_PACK)                                                                  \
    X(ter_y_ef, TER_Y_EF)                                                                  \
    X(ter_finish, TER_FINISH)                                                              \
    X(count_sum, COUNT_SUM)                                                                \
    X(count_merge, COUNT_MERGE)                                                            \
    X(sum_f32, SUM_F32)                                                                    \
    X(bf16_pack, BF16_PACK)                                                                \
    X(sum_bf16, SUM_BF16)                                                                  \
    X(sum_bf16_f32, SUM_BF16_F32)                                                          \
    X(int_y_ef, INT_Y_EF)                                                                  \
    X(int_pack, INT_PACK)                                                                  \
    X(int_finish, INT_FINISH)

/* Per-ISA tables; NULL when the ISA was not built (see NF_HAVE_AVX2/512). */
extern const nf_kernels_t nf_kernels_scalar;
extern const nf_kernels_t nf_kernels_avx2;
extern const nf_kernels_t nf_kernels_avx512;

/** Best ISA this CPU runs (cpuid + OS xsave state), capped by what was built. */
nf_isa_t nf_isa_detect(void);

/** Kernel table for isa, or NULL if that ISA was not built or the CPU lacks it. */
const nf_kernels_t *nf_kernels_for(nf_isa_t isa);

/** ISA name, or NULL for an out-of-range value. */
const char *nf_isa_name(nf_isa_t isa);

/**
 * Kernel table chosen by measurement: each entry is the fastest candidate
 * among the ISAs at or below cap that the CPU runs (a cap above the CPU is
 * lowered to it). Candidates are the vector ISAs, scalar only where none may
 * run. The first call for a cap times them within about 20 ms, on buffers
 * flushed from the caches (the regime of buffers beyond the last-level
 * cache); a lower ISA replaces the highest only when at least 5 % faster.
 * After nf_kernels_set_tune(0) (the library's NFCOLL_SIMD_TUNE=off) nothing
 * is timed and every entry is the highest ISA at or below cap. The choice changes speed only:
 * all ISAs give the same bits. Thread-safe; built once per cap; the table
 * lives for the process. Its name summarises the choice ("avx512", or
 * "avx512 (avx2: ter_pack sum_f32)" when some kernels differ).
 */
const nf_kernels_t *nf_kernels_tuned(nf_isa_t cap);

/** Whether nf_kernels_tuned() times the candidates (default 1). The caller
 * owns the setting (libnfcoll: NFCOLL_SIMD_TUNE, parsed once by settings);
 * set it before the first nf_kernels_tuned() of a cap: a table, once
 * built, stays. */
void nf_kernels_set_tune(int on);

/** Number of kernels in a table: the function pointers of nf_kernels_t. */
int nf_kernels_count(void);

/**
 * Kernel i (0 .. nf_kernels_count() - 1, in nf_kernels_t order) of the table
 * nf_kernels_tuned() returned last: returns its name ("abs_sum", ...), sets
 * *isa to the ISA chosen for it and *ns_per_elem to that version's measured
 * time in ns per element, 0 when not measured (summed over the calls it is
 * timed with: with and without e, the finish kernels at n = 4 and n = 64;
 * cold buffers, so below what bench/nf_kernels shows for buffers beyond the
 * last-level cache). Before any nf_kernels_tuned() call
 * *isa is NF_ISA_COUNT. Either output may be NULL. NULL past the end.
 */
const char *nf_kernels_choice(int i, nf_isa_t *isa, double *ns_per_elem);

/** What nf_kernels_choice() reports for isa's version of kernel i, chosen
 * or not: ns per element, 0 when not measured. */
double nf_kernels_measured(int i, nf_isa_t isa);

#endif /* NF_KERNELS_H */
