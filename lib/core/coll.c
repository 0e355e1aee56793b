/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The allreduce protocol over the node-shared segment. No arithmetic here:
 * kernels do the math, this file moves lines between ranks.
 * docs/design.md, "Protocol".
 *
 * Ranks of a node synchronize through flags in the segment (nf_flags.h);
 * node leaders exchange across nodes over PMPI (xnode.c). A call:
 *   every rank writes its header (count, layout hash, ok) and, when the
 *   segment already holds them, packs its low-bit lines (or, for a small
 *   call on one node or an inline one across one-rank nodes, all of its
 *   data) -> node barrier -> every rank checks the headers (across nodes:
 *   leaders exchange them, with an inline call's data, and publish the
 *   verdict): different counts are MPI_ERR_COUNT everywhere, different
 *   layouts run the whole call fp32
 *   small or inline call: every rank reduces all the copies itself. Done.
 *   otherwise -> grow the segment if needed (agreed) -> (integer
 *   segments: pass 1, then the block maxes' allreduce, then their pack:
 *   an integer call is never small or inline) -> scales (one node:
 *   read from the slots; several: PMPI_Allgather, or with one rank per
 *   node at the end of the count exchange) -> each local rank counts its
 *   share of lines -> node barrier (+ leaders merge node counts across
 *   nodes and publish) -> everyone unpacks -> the fp32 pass.
 * The counts are integers, so every rank gets the same bits whatever the
 * order; the scales are summed in rank order in double; fp32 sums run in
 * rank order within a node, then in node order.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "nf_coll.h"
#include "nf_ctx.h"
#include "nf_flags.h"
#include "nf_placement.h"
#include "nf_stats.h"
#include "nf_util.h"
#include "nf_xnode.h"

static inline uint8_t *nf_slot(const nf_comm_t *c, int lrank)
{
    return c->slots + (size_t)lrank * c->slot_bytes;
}

/* This local rank's share [*l0, *l1) of n units. */
static void nf_share(const nf_comm_t *c, size_t n, size_t *l0, size_t *l1)
{
    *l0 = n * (size_t)c->lrank / (size_t)c->lsize;
    *l1 = n * (size_t)(c->lrank + 1) / (size_t)c->lsize;
}

/* What a call's data looks like to the protocol. */
typedef struct nf_shape {
    size_t lines;     /* low-bit lines of all low-bit segments */
    size_t slines;    /* lines the scales take after them */
    unsigned nlow;    /* low-bit segments */
    unsigned nscale;  /* their scales: one per segment, binary with scale_block
                         one per block (nf_seg_t.sc0, .nsc) */
    unsigned nsc;     /* doubles per rank in the scale exchange: nscale, or with
                         health nscale + nlow + 1 (the ef ratios, the loss) */
    unsigned nint;    /* of them, integer routes: their block maxes are agreed
                         before packing, so the call is neither small nor inline */
    size_t nbmax;     /* block maxes of the integer segments (nf_seg_t.bm0) */
    size_t fp32;      /* elements of fp32 segments */
    size_t bf16;      /* elements of bf16 segments (a pass of their own) */
    int small;        /* one node, and everything fits a control block's area */
    uint64_t need;    /* bytes of the verdict's area this call would fill
                         (nf_traffic_inline_need) */
    int inl;          /* one rank on every node, and everything fits the
                         verdict's area: the call rides with the verdict */
    uint64_t *area;   /* inl: this rank's area in the verdict's payload */
    unsigned parity;  /* of this call: which header and small area */
} nf_shape_t;

/* ---------------------------------------------------------------- layout */

static int nf_lowbit(const nf_seg_t *g) { return nf_route_lowbit(g->route); }

/* A low-bit segment's lines: one bit line per 512 elements for each bit
 * a rank writes per element (the route table's bits). */
static size_t nf_seg_lines(const nf_seg_t *g)
{
    return nf_route_info(g->route)->bits * nf_lines(g->m);
}

/* Elements per scale: binary's scale_block (whole lines, so each block's
 * bits and counts start on a line), the integer routes' block, else the
 * whole segment. */
static size_t nf_seg_block(const nf_seg_t *g)
{
    if (nf_route_intk(g->route) > 0)
        return g->block > 0 ? (size_t)g->block : NF_INT_BLOCK_DEFAULT;
    return g->route == NF_ROUTE_BINARY && g->scale_block > 0 && (size_t)g->scale_block < g->m
               ? (size_t)g->scale_block
               : g->m;
}

/* An integer segment's scale blocks (the last may be short). */
static size_t nf_seg_blocks(const nf_seg_t *g)
{
    return (g->m + nf_seg_block(g) - 1) / nf_seg_block(g);
}

/* Lay the low-bit segments' lines out one after the other, the scales after
 * them; decide whether the call is small, or rides inline (c->varea: the
 * area its verdict carries). */
static void nf_layout(nf_comm_t *c, nf_call_t *call, nf_shape_t *sh)
{
    memset(sh, 0, sizeof(*sh));
    for (size_t s = 0; s < call->nseg; s++) {
        nf_seg_t *g = &call->seg[s];
        g->nonfinite = 0;
        if (g->route == NF_ROUTE_BF16) {
            sh->bf16 += g->m;
            continue;
        }
        if (!nf_lowbit(g)) {
            sh->fp32 += g->m;
            continue;
        }
        g->line0 = sh->lines;
        sh->lines += nf_seg_lines(g);
        g->sc0 = sh->nscale;
        g->nsc = g->m > 0 ? (unsigned)((g->m + nf_seg_block(g) - 1) / nf_seg_block(g)) : 1;
        if (nf_route_intk(g->route) > 0) { /* one value in the exchange: finite or not */
            g->nsc = 1;
            g->bm0 = sh->nbmax;
            sh->nbmax += nf_seg_blocks(g);
            sh->nint++;
        }
        sh->nscale += g->nsc;
        sh->nlow++;
    }
    sh->nsc = call->health && sh->nlow > 0 ? sh->nscale + sh->nlow + 1 : sh->nscale;
    sh->slines = (size_t)nf_scale_lines(sh->nsc);
    size_t bytes = (sh->lines + sh->slines) * NF_LINE_BYTES + sh->fp32 * sizeof(float);
    sh->small = c->nnodes == 1 && c->size > 1 && bytes <= NF_SMALL_BYTES && sh->bf16 == 0 &&
                sh->nint == 0;
    sh->need = sh->nint > 0 ? NF_INLINE_NONE
                            : nf_traffic_inline_need(sh->lines, sh->slines, sh->fp32, sh->bf16);
    c->varea = nf_xnode_pair(c) ? (unsigned)nf_pair_area_words(sh->lines, sh->need)
                                : nf_inline_words(&c->ihist);
    sh->inl = c->nnodes > 1 && c->size == c->nnodes && sh->need <= (uint64_t)c->varea * 8;
    sh->parity = (unsigned)(c->calls & 1u);
}

/* Where a rank's lines, scales and (small and inline calls) fp32 elements
 * are (inline: this rank's only). */
static uint64_t *nf_lines_of(const nf_comm_t *c, const nf_shape_t *sh, int lrank)
{
    return sh->inl     ? sh->area
           : sh->small ? (uint64_t *)nf_ctl(c, lrank)->small[sh->parity]
                       : (uint64_t *)nf_slot(c, lrank);
}

static double *nf_scales_of(const nf_comm_t *c, const nf_shape_t *sh, int lrank)
{
    return (double *)(nf_lines_of(c, sh, lrank) + sh->lines * NF_LINE_WORDS);
}

static float *nf_small_fp32(const nf_comm_t *c, const nf_shape_t *sh, int lrank)
{
    return (float *)(nf_lines_of(c, sh, lrank) + (sh->lines + sh->slines) * NF_LINE_WORDS);
}

/* Elements the segment must hold for these lines and scales. */
static size_t nf_need(const nf_shape_t *sh)
{
    return (sh->lines + sh->slines) * NF_LINE_BITS / 2;
}

/* ---------------------------------------------------------------- header */

enum { NF_H_COUNT, NF_H_LAYOUT, NF_H_OK, NF_H_SPARE, NF_H_N };
/* An inline call's counts go to c->pcnt, which holds a small call's. */
_Static_assert(NF_INLINE_MAX_WORDS * 8 <= NF_SMALL_BYTES, "an inline call's lines fit pcnt");
_Static_assert(NF_H_N == NF_HDR_WORDS, "a header is NF_HDR_WORDS words");

static uint64_t nf_layout_hash(const nf_call_t *call)
{
    uint64_t h = NF_HASH_INIT;
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        h = nf_hash_u64(nf_hash_u64(nf_hash_u64(nf_hash_u64(h, g->off), g->m), g->route), g->tag);
        if (nf_lowbit(g) && (nf_seg_block(g) < g->m || nf_route_intk(g->route) > 0))
            h = nf_hash_u64(h, nf_seg_block(g)); /* the scale exchange's shape */
    }
    /* health adds values to the scales' exchange (admission can turn it
     * off on one rank that runs short of memory): ranks that differ run
     * the call fp32 */
    return nf_hash_u64(h, (uint64_t)(call->health != 0));
}

/* The verdict of the local headers against mine: NF_V_COUNT when some
 * count differs (every rank sees the same headers, so every rank says so),
 * else NF_V_SAME when every layout matches and every rank is ok. */
static uint64_t nf_local_verdict(const nf_comm_t *c, const uint64_t *mine, unsigned parity)
{
    uint64_t v = NF_V_SAME;
    for (int i = 0; i < c->lsize; i++) {
        const uint64_t *h = nf_ctl(c, i)->hdr[parity];
        if (h[NF_H_COUNT] != mine[NF_H_COUNT])
            return NF_V_COUNT;
        if (h[NF_H_LAYOUT] != mine[NF_H_LAYOUT] || h[NF_H_OK] == 0)
            v = 0;
    }
    return v;
}

/* After the header barrier: the call's verdict on every rank alike. One
 * node decides from the headers in the segment; several add one exchange
 * among leaders, published to the other local ranks. node: the exchange's
 * payload (nf_xnode_verdict), its area written by nf_publish when sh->inl;
 * *inl: every node's area came (one rank on every node). */
static nf_status_t nf_verdict(nf_comm_t *c, const nf_call_t *call, const nf_shape_t *sh,
                              const uint64_t *mine, uint64_t *node, uint64_t *v, int *inl)
{
    nf_status_t st = NF_OK;
    *inl = 0;
    *v = nf_local_verdict(c, mine, sh->parity);
    if (c->nnodes < 2)
        return NF_OK;
    if (c->lrank == 0) {
        size_t words = nf_verdict_words(c->size == c->nnodes, c->varea);
        node[0] = mine[NF_H_COUNT], node[1] = mine[NF_H_LAYOUT], node[2] = *v;
        node[3] = sh->need;
        st = nf_xnode_verdict(c, v, inl);
        nf_ctl(c, 0)->verdict[0] = *v;
        nf_stats_internode(call->seg[0].route, (uint64_t)(c->nnodes - 1) * words * 8);
    }
    if ((st = nf_leader_wait(c, st)) != NF_OK)
        return st;
    *v = nf_ctl(c, 0)->verdict[0];
    return NF_OK;
}

/* ---------------------------------------------------------------- low-bit */

/* The factor of the residual this call adds (docs/design.md, "Error
 * feedback"): a float, as the kernels apply it. */
static float nf_decay(const nf_seg_t *g) { return (float)g->ef_decay; }

/* An E-form binary residual runs through the finish pass unless decayed:
 * then pass 1 writes y = x + decay * e into the next buffer (ter_y_ef with
 * an infinite gate takes e as it is) and the residual leaves in Y form,
 * so that e itself is never written before the call completes. */
static int nf_binary_e(const nf_seg_t *g)
{
    return g->res != NULL && g->res->form == NF_RES_E && nf_decay(g) == 1.0f;
}

/* Whether the kernels may write this call's outputs (new residuals,
 * results) with streaming stores: decided once, on the whole call's size,
 * not per segment, so that a call cut into many regions writes its memory
 * as the same call whole does (docs/design.md, "Streaming stores"). */
static int nf_stream(const nf_call_t *call) { return call->m >= NF_STREAM_MIN; }

/* Binary pass 1 over elements [o, o + n) of the segment (o on a line):
 * their sign lines into bits, the lane sum of |y| back. aprev: their a_i
 * of the previous call (Y form). stream: nf_stream() of the call. */
static double nf_pack_binary_part(const nf_seg_t *g, const float *x, uint64_t *bits, size_t o,
                                  size_t n, float aprev, int stream)
{
    const nf_kernels_t *k = nf_ctx.k;
    nf_residual_t *res = g->res;
    bits += o / NF_LINE_BITS * NF_LINE_WORDS;
    x += o;
    if (res == NULL)
        return k->bin_pack(x, NULL, n, bits);
    if (nf_binary_e(g))
        return k->bin_pack(x, res->buf[res->cur] + o, n, bits);
    if (res->form == NF_RES_E) {
        float *y = res->buf[res->cur ^ 1u] + o;
        k->ter_y_ef(x, res->buf[res->cur] + o, INFINITY, 0.0f, nf_decay(g), y, n, stream);
        return k->bin_pack(y, NULL, n, bits);
    }
    return k->bin_pack_ef(x, res->buf[res->cur] + o, aprev, nf_decay(g),
                          res->buf[res->cur ^ 1u] + o, n, bits, stream);
}

/* Binary pass 1: sign lines into bits, each block's a_i into ai[0, nsc)
 * (NaN when non-finite). One block is the segment: one a_i, as without
 * scale_block. */
static void nf_pack_binary(const nf_seg_t *g, const float *x, uint64_t *bits, double *ai,
                           int stream)
{
    nf_residual_t *res = g->res;
    size_t B = nf_seg_block(g);
    if (res != NULL && (res->form == NF_RES_TY || res->form == NF_RES_Q ||
                        (res->form == NF_RES_Y && res->block > 0 && res->block != B)))
        nf_residual_e(res); /* after other routes, or another block size */
    for (unsigned b = 0; b < g->nsc; b++) {
        size_t o = (size_t)b * B, n = g->m - o < B ? g->m - o : B;
        float aprev = res == NULL ? 0.0f : res->block > 0 ? res->ablk[b] : res->aprev;
        double a = nf_pack_binary_part(g, x, bits, o, n, aprev, stream) / (double)n;
        ai[b] = isfinite(a) ? a : NAN;
    }
}

/* Ternary pass 1: the lane sum of |y| (with error feedback, writing y into
 * the residual's next buffer: an E-form e is a TY form with an infinite
 * gate), the gate, then the gated lines (plus, then minus) from y alone.
 * b_i back, the gate in *t. */
static double nf_pack_ternary(const nf_seg_t *g, const float *x, uint64_t *plus, float *t,
                              int stream)
{
    const nf_kernels_t *k = nf_ctx.k;
    nf_residual_t *res = g->res;
    const float *y = x;
    double sum;
    if (res == NULL) {
        sum = k->abs_sum(x, NULL, g->m);
    } else {
        if (res->form != NF_RES_TY && res->form != NF_RES_E)
            nf_residual_e(res); /* after other routes */
        int e = res->form == NF_RES_E;
        y = res->buf[res->cur ^ 1u];
        sum = k->ter_y_ef(x, res->buf[res->cur], e ? INFINITY : res->tprev,
                          e ? 0.0f : res->aprev, nf_decay(g), res->buf[res->cur ^ 1u], g->m,
                          stream);
    }
    double ai = sum / (double)g->m;
    size_t nin = 0;
    *t = 0.0f;
    if (!isfinite(ai))
        return NAN;
    *t = (float)(g->gamma * ai);
    double bsum = k->ter_pack(y, NULL, g->m, *t, plus, plus + nf_lines(g->m) * NF_LINE_WORDS, &nin);
    return nin > 0 ? bsum / (double)nin : 0.0;
}

/* ---------------------------------------------------------------- integer */

/* The residual an integer segment reads: a Q form of its own block and
 * bits as it is, anything else as e (exact). */
static void nf_int_residual(const nf_seg_t *g)
{
    nf_residual_t *res = g->res;
    unsigned kb = nf_route_intk(g->route);
    if (res != NULL && res->form != NF_RES_E &&
        !(res->form == NF_RES_Q && res->block == nf_seg_block(g) && res->kb == kb))
        nf_residual_e(res); /* after another route, block or width */
}

/* Pass 1 of an integer segment: y = x + decay * e into the residual's next
 * buffer (or y = x without one) and each block's max |y| as the bits of a
 * float into bmax (nf_kernels.h, int_y_ef). */
static void nf_int_y(const nf_seg_t *g, const float *x, uint32_t *bmax, int stream)
{
    nf_residual_t *res = g->res;
    unsigned kb = nf_route_intk(g->route);
    if (res == NULL) {
        nf_ctx.k->int_y_ef(x, NULL, NULL, kb, 1.0f, NULL, g->m, nf_seg_block(g), bmax, stream);
        return;
    }
    nf_int_residual(g);
    nf_ctx.k->int_y_ef(x, res->buf[res->cur], res->form == NF_RES_Q ? res->ablk : NULL, kb,
                       nf_decay(g), res->buf[res->cur ^ 1u], g->m, nf_seg_block(g), bmax,
                       stream);
}

/* The block maxes of every integer segment, agreed before packing: each
 * rank's pass 1, then the max over the ranks (an integer max of the bits
 * of |y|, the same on every rank whatever the order) into c->bmf as
 * floats. A block that is not finite somewhere makes its segment's
 * exchanged value NaN on every rank: the segment then runs fp32 and its
 * residual stays as it was. Runs after the verdict, so every rank has the
 * same blocks. docs/design.md, "Integer routes". */
static nf_status_t nf_int_agree(nf_comm_t *c, nf_call_t *call, const nf_shape_t *sh)
{
    const int stream = nf_stream(call);
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (nf_route_intk(g->route) > 0)
            nf_int_y(g, call->x + g->off, c->bmax + g->bm0, stream);
    }
    if (c->size > 1) {
        int rc = PMPI_Allreduce(MPI_IN_PLACE, c->bmax, (int)sh->nbmax, MPI_UINT32_T, MPI_MAX,
                                c->priv);
        if (rc != MPI_SUCCESS)
            return nf_mpi_status(rc);
    }
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (nf_route_intk(g->route) == 0)
            continue;
        int finite = 1;
        for (size_t b = g->bm0; b < g->bm0 + nf_seg_blocks(g); b++) {
            finite &= c->bmax[b] < 0x7F800000u;
            memcpy(&c->bmf[b], &c->bmax[b], sizeof(float));
        }
        c->mine[g->sc0] = finite ? 0.0 : NAN;
        if (c->nnodes > 1) /* a ring allreduce's share of the maxes, both ways */
            nf_stats_internode(g->route, 2 * (uint64_t)(c->nnodes - 1) * nf_seg_blocks(g) *
                                             sizeof(uint32_t) / (uint64_t)c->nnodes);
    }
    return NF_OK;
}

/* An integer segment's pack: its codes, from y (the residual's next buffer,
 * or x), in its bit planes. Not packed when a block is not finite. */
static void nf_pack_int(const nf_comm_t *c, const nf_seg_t *g, const float *x, uint64_t *lines)
{
    const float *y = g->res != NULL ? g->res->buf[g->res->cur ^ 1u] : x;
    if (isfinite(c->mine[g->sc0]))
        nf_ctx.k->int_pack(y, c->bmf + g->bm0, nf_route_intk(g->route), g->m, nf_seg_block(g),
                           lines);
}

/* Elements an integer segment's part starts on: whole lines and whole
 * blocks, so that the part's counters and maxes start with it. */
static size_t nf_int_step(const nf_seg_t *g)
{
    return nf_seg_block(g) > NF_LINE_BITS ? nf_seg_block(g) : NF_LINE_BITS;
}

/* An integer segment's final pass over elements [o0, o1) (o0 a multiple of
 * nf_int_step): s * (the ranks' sum of q) per element. cnt: the
 * segment's counters. Each element depends on its own counters and block
 * max alone, so a segment finished in parts is the segment finished whole. */
static void nf_finish_int_part(nf_comm_t *c, const nf_call_t *call, const nf_seg_t *g,
                               const uint64_t *cnt, size_t o0, size_t o1)
{
    unsigned kb = nf_route_intk(g->route);
    nf_ctx.k->int_finish(call->r + g->off + o0, cnt + o0 / NF_LINE_BITS * kb * c->k * NF_LINE_WORDS,
                         c->k, c->bmf + g->bm0 + o0 / nf_seg_block(g), kb, o1 - o0,
                         nf_seg_block(g), (unsigned)c->size, nf_stream(call));
}

/* After the last part: the residual keeps y and the agreed maxes. */
static void nf_finish_int_done(const nf_comm_t *c, const nf_seg_t *g)
{
    if (g->res != NULL)
        nf_residual_commit_q(g->res, nf_seg_block(g), nf_route_intk(g->route),
                             c->bmf + g->bm0, nf_seg_blocks(g));
}

/* Health's signal: the residual carried into this call against the call's
 * gradient, sum |e| / sum |x| (0 without a residual or a gradient). */
static double nf_ef_ratio(const nf_seg_t *g, const float *x)
{
    if (g->res == NULL)
        return 0.0;
    double gx = nf_ctx.k->abs_sum(x, NULL, g->m);
    return gx > 0.0 && isfinite(gx) ? nf_residual_l1(g->res) / gx : 0.0;
}

/* Pack every low-bit segment into my lines; its scales go to
 * c->mine[sc0, sc0 + nsc) and after the lines (segment order), its gate
 * (ternary) to c->gate[j], j counting low-bit segments.
 * Touches only my lines and the residuals' next buffers: harmless when the
 * call then runs fp32. */
static void nf_pack_all(nf_comm_t *c, const nf_call_t *call, const nf_shape_t *sh)
{
    uint64_t *slot = nf_lines_of(c, sh, c->lrank);
    const int stream = nf_stream(call);
    unsigned j = 0;
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (!nf_lowbit(g))
            continue;
        uint64_t *lines = slot + g->line0 * NF_LINE_WORDS;
        c->gate[j] = 0.0f;
        if (g->route == NF_ROUTE_BINARY)
            nf_pack_binary(g, call->x + g->off, lines, c->mine + g->sc0, stream);
        else if (nf_route_intk(g->route) > 0)
            nf_pack_int(c, g, call->x + g->off, lines);
        else
            c->mine[g->sc0] = nf_pack_ternary(g, call->x + g->off, lines, &c->gate[j], stream);
        if (call->health)
            c->mine[sh->nscale + j] = nf_ef_ratio(g, call->x + g->off);
        j++;
    }
    if (call->health)
        c->mine[sh->nscale + sh->nlow] = call->loss;
    memcpy(nf_scales_of(c, sh, c->lrank), c->mine, sh->nsc * sizeof(double));
}

/* Every rank's scales, rank-major, into c->scales: from the segment on one
 * node (local rank order is rank order there), by PMPI_Allgather across
 * nodes (also the barrier that publishes every slot). */
static nf_status_t nf_gather_scales(nf_comm_t *c, const nf_shape_t *sh)
{
    if (c->nnodes < 2) {
        for (int i = 0; i < c->lsize; i++)
            memcpy(c->scales + (size_t)i * sh->nsc, nf_scales_of(c, sh, i),
                   sh->nsc * sizeof(double));
        return NF_OK;
    }
    return nf_mpi_status(PMPI_Allgather(c->mine, (int)sh->nsc, MPI_DOUBLE, c->scales,
                                        (int)sh->nsc, MPI_DOUBLE, c->priv));
}

/* The rank-ordered mean of exchanged value j, NaN when some rank flagged. */
static double nf_mean_scale(const nf_comm_t *c, unsigned nsc, unsigned j)
{
    double sum = 0.0;
    for (int i = 0; i < c->size; i++)
        sum += c->scales[(size_t)i * nsc + j];
    return sum / (double)c->size;
}

/* Health: the ranks' mean ef ratio per low-bit segment, and the mean of
 * the losses the ranks reported (NaN: none did). Every rank reads the same
 * values in the same order: the same bits. */
static void nf_health_agree(const nf_comm_t *c, nf_call_t *call, const nf_shape_t *sh)
{
    unsigned j = 0, nl = 0;
    double ls = 0.0;
    for (size_t s = 0; s < call->nseg; s++)
        if (nf_lowbit(&call->seg[s]))
            call->seg[s].ef_ratio = nf_mean_scale(c, sh->nsc, sh->nscale + j++);
    for (int i = 0; i < c->size; i++) {
        double l = c->scales[(size_t)i * sh->nsc + sh->nscale + sh->nlow];
        if (!isnan(l))
            ls += l, nl++;
    }
    call->loss_mean = nl > 0 ? ls / nl : NAN;
}

/* Count my share of lines [0, nlines) over every local slot, near the node;
 * a small call counts all of them into its private counters. */
static void nf_count_lines(nf_comm_t *c, const nf_shape_t *sh, uint64_t *cnt)
{
    const uint64_t **in = (const uint64_t **)c->ptrs;
    size_t l0 = 0, l1 = sh->lines;
    nf_place_pin_t pin;
    if (!sh->small)
        nf_share(c, sh->lines, &l0, &l1);
    if (l1 == l0)
        return;
    nf_place_reducer_enter(&pin);
    for (int i = 0; i < c->lsize; i++)
        in[i] = nf_lines_of(c, sh, i) + l0 * NF_LINE_WORDS;
    nf_ctx.k->count_sum(cnt + l0 * c->k * NF_LINE_WORDS, c->k, in, (unsigned)c->lsize, l1 - l0);
    nf_place_reducer_leave(&pin);
}

/* Binary's final pass over elements [o0, o1) of the segment (o0 on a
 * line), block by block: the ranks' mean a of the block times its sign
 * counts, and (E form) my residual against my own a_i of the block. Each
 * element's result depends on its block alone, so a segment finished in
 * parts is the segment finished whole. */
static void nf_finish_binary_part(nf_comm_t *c, const nf_call_t *call, const nf_seg_t *g,
                                  const uint64_t *cnt, const nf_shape_t *sh, size_t o0,
                                  size_t o1)
{
    nf_residual_t *res = g->res;
    const float *x = call->x + g->off;
    float *r = call->r + g->off, *e = nf_binary_e(g) ? res->buf[res->cur] : NULL;
    size_t B = nf_seg_block(g);
    for (unsigned b = (unsigned)(o0 / B); b < g->nsc && (size_t)b * B < o1; b++) {
        size_t lo = (size_t)b * B > o0 ? (size_t)b * B : o0;
        size_t hi = (size_t)b * B + B < o1 ? (size_t)b * B + B : o1;
        double a = nf_mean_scale(c, sh->nsc, g->sc0 + b), ai = c->mine[g->sc0 + b];
        nf_ctx.k->bin_finish(r + lo, e != NULL ? x + lo : NULL, e != NULL ? e + lo : NULL,
                             cnt + lo / NF_LINE_BITS * c->k * NF_LINE_WORDS, c->k, hi - lo,
                             (unsigned)c->size, a, (float)ai, nf_stream(call));
    }
}

/* After the last part: a Y-form residual keeps the new y and the blocks'
 * a_i. */
static void nf_finish_binary_done(const nf_comm_t *c, const nf_seg_t *g)
{
    size_t B = nf_seg_block(g);
    if (g->res != NULL && !nf_binary_e(g))
        nf_residual_commit_y(g->res, B < g->m ? B : 0, c->mine + g->sc0, g->nsc);
}

/* Whether every block's scale is finite on every rank. */
static int nf_scales_finite(const nf_comm_t *c, const nf_shape_t *sh, const nf_seg_t *g)
{
    for (unsigned b = 0; b < g->nsc; b++)
        if (!isfinite(nf_mean_scale(c, sh->nsc, g->sc0 + b)))
            return 0;
    return 1;
}

static void nf_finish_ternary(nf_comm_t *c, const nf_call_t *call, nf_seg_t *g,
                              const uint64_t *cnt, double b, double bi, float t)
{
    nf_residual_t *res = g->res;
    nf_ctx.k->ter_finish(call->r + g->off, NULL, NULL, cnt,
                         cnt + nf_lines(g->m) * c->k * NF_LINE_WORDS, c->k, g->m, b, t,
                         (float)bi);
    if (res != NULL) /* the new y, gate and b_i become the state */
        nf_residual_commit_ty(res, (float)bi, t);
}

/* Unpack low-bit segment g (the j-th) whose scale is finite on every rank,
 * from cnt, the counters of line 0; else mark it for the fp32 pass (its
 * residual is as it was). done: a binary or integer segment whose results
 * the streamed finish wrote already (its residual is committed here). */
static void nf_finish_seg(nf_comm_t *c, nf_call_t *call, const nf_shape_t *sh, nf_seg_t *g,
                          unsigned j, const uint64_t *cnt, int done)
{
    const uint64_t *gc = cnt + g->line0 * c->k * NF_LINE_WORDS;
    if (!nf_scales_finite(c, sh, g)) {
        g->nonfinite = 1;
        return;
    }
    if (g->route == NF_ROUTE_BINARY) {
        if (!done)
            nf_finish_binary_part(c, call, g, gc, sh, 0, g->m);
        nf_finish_binary_done(c, g);
    } else if (nf_route_intk(g->route) > 0) {
        if (!done)
            nf_finish_int_part(c, call, g, gc, 0, g->m);
        nf_finish_int_done(c, g);
    } else {
        nf_finish_ternary(c, call, g, gc, nf_mean_scale(c, sh->nsc, g->sc0), c->mine[g->sc0],
                          c->gate[j]);
    }
}

/* Unpack every low-bit segment (nf_finish_seg). Returns whether some
 * segment was marked for the fp32 pass. */
static int nf_finish_all(nf_comm_t *c, nf_call_t *call, const nf_shape_t *sh,
                         const uint64_t *cnt)
{
    unsigned j = 0;
    int marked = 0;
    for (size_t s = 0; s < call->nseg; s++) {
        nf_seg_t *g = &call->seg[s];
        if (!nf_lowbit(g))
            continue;
        nf_finish_seg(c, call, sh, g, j++, cnt, 0);
        marked |= g->nonfinite;
    }
    return marked;
}

/* A streamed call's finish (nf_xnode_counts_stream). As each message's
 * lines arrive, the results of binary segments with a Y-form residual (or
 * none) are written up to them, block by block, and those of integer
 * segments up to their last whole line of every plane and whole block; nothing that outlives a
 * failed call changes before the last message is in (the last call of
 * ready comes only after every message arrived): then the residuals are
 * committed, E-form binary and ternary segments (whose minus lines come
 * last) finished, and non-finite segments marked. The same passes as
 * nf_finish_all, in parts: the same bits. */
typedef struct nf_fin {
    nf_comm_t *c;
    nf_call_t *call;
    const nf_shape_t *sh;
    size_t s, done; /* the binary segment being written, its elements done */
    int ok;         /* its scales are finite (-1: not looked at yet) */
} nf_fin_t;

static int nf_fin_streams(const nf_seg_t *g)
{
    return (g->route == NF_ROUTE_BINARY && !nf_binary_e(g)) || nf_route_intk(g->route) > 0;
}

static void nf_fin_ready(void *arg, size_t lines)
{
    nf_fin_t *f = arg;
    nf_comm_t *c = f->c;
    for (; f->s < f->call->nseg; f->s++, f->done = 0, f->ok = -1) {
        nf_seg_t *g = &f->call->seg[f->s];
        if (!nf_lowbit(g) || !nf_fin_streams(g))
            continue;
        if (f->ok < 0)
            f->ok = nf_scales_finite(c, f->sh, g);
        if (!f->ok)
            continue;
        size_t end = g->line0 + nf_seg_lines(g);
        const uint64_t *gc = c->cnt + g->line0 * c->k * NF_LINE_WORDS;
        if (lines <= g->line0)
            return;
        unsigned kb = nf_route_intk(g->route);
        if (kb > 0) { /* whole lines of every plane, whole blocks */
            size_t upto = lines >= end ? g->m
                                       : (lines - g->line0) / kb * NF_LINE_BITS / nf_int_step(g) *
                                             nf_int_step(g);
            if (upto > f->done)
                nf_finish_int_part(c, f->call, g, gc, f->done, upto);
            f->done = upto > f->done ? upto : f->done;
            if (f->done < g->m)
                return;
            continue;
        }
        size_t upto = lines >= end ? g->m : (lines - g->line0) * NF_LINE_BITS;
        nf_finish_binary_part(c, f->call, g, gc, f->sh, f->done, upto);
        f->done = upto;
        if (upto < g->m)
            return;
    }
    if (lines < f->sh->lines)
        return;
    unsigned j = 0;
    for (size_t s = 0; s < f->call->nseg; s++) {
        nf_seg_t *g = &f->call->seg[s];
        if (nf_lowbit(g))
            nf_finish_seg(c, f->call, f->sh, g, j++, c->cnt, nf_fin_streams(g));
    }
}

/* Low-bit segments after the header barrier, on the shared counters:
 * count my share, barrier (+ leaders merge across nodes), unpack; two
 * one-rank nodes with more than a message of lines finish as the lines
 * arrive. */
static nf_status_t nf_lowbit_shared(nf_comm_t *c, nf_call_t *call, const nf_shape_t *sh,
                                    int *marked)
{
    if (nf_xnode_counts_streamed(c, sh->lines)) {
        nf_fin_t f = {.c = c, .call = call, .sh = sh, .ok = -1};
        nf_status_t st = nf_xnode_counts_stream(c, call, nf_lines_of(c, sh, c->lrank), c->cnt,
                                                sh->lines, sh->nsc, nf_fin_ready, &f);
        if (st != NF_OK)
            return st;
        for (size_t s = 0; s < call->nseg; s++)
            *marked |= nf_lowbit(&call->seg[s]) && call->seg[s].nonfinite;
        if (call->health)
            nf_health_agree(c, call, sh);
        return NF_OK;
    }
    int ride = nf_xnode_scales_ride(c, sh->lines, sh->nsc);
    nf_status_t st = ride ? NF_OK : nf_gather_scales(c, sh);
    if (st != NF_OK)
        return st;
    unsigned extra = sh->nsc - sh->nscale; /* health's values, counted to the first */
    for (size_t s = 0; s < call->nseg && c->nnodes > 1 && !ride; s++)
        if (nf_lowbit(&call->seg[s])) { /* its scales to each rank on the other nodes */
            nf_stats_internode(call->seg[s].route,
                               (uint64_t)(c->size - c->lsize) * 8 * (call->seg[s].nsc + extra));
            extra = 0;
        }
    nf_count_lines(c, sh, c->cnt);
    nf_node_barrier(c);
    if (c->nnodes > 1) {
        if (c->lrank == 0)
            st = nf_xnode_counts(c, call, c->cnt, sh->lines, ride ? sh->nsc : 0);
        if ((st = nf_leader_wait(c, st)) != NF_OK)
            return st;
    }
    *marked = nf_finish_all(c, call, sh, c->cnt);
    if (call->health)
        nf_health_agree(c, call, sh);
    return NF_OK;
}

/* ---------------------------------------------------------------- fp32 */

/* Which segments an fp32 pass takes; NF_TAKE_BF16 is the bf16 pass: the
 * same pipeline with bf16 inputs (half the bytes into the slots) summed as
 * floats (sum_bf16) into float results. */
typedef enum nf_take { NF_TAKE_ALL, NF_TAKE_REST, NF_TAKE_NONFINITE, NF_TAKE_BF16 } nf_take_t;

/* A cursor over the fp32 segments' elements, as if they were one vector. */
typedef struct nf_fp32_it {
    const nf_call_t *call;
    size_t s, done; /* segment, elements of it consumed */
    nf_take_t take;
} nf_fp32_it_t;

static int nf_fp32_takes(const nf_fp32_it_t *it, const nf_seg_t *g)
{
    switch (it->take) {
    case NF_TAKE_ALL: return 1;
    case NF_TAKE_REST: return g->route == NF_ROUTE_FP32 || g->nonfinite;
    case NF_TAKE_BF16: return g->route == NF_ROUTE_BF16;
    default: return g->nonfinite;
    }
}

/* Copy (in) or out up to len elements from the cursor; advances a copy. */
static size_t nf_fp32_move(nf_fp32_it_t *it, float *buf, size_t len, int in)
{
    size_t n = 0;
    while (n < len && it->s < it->call->nseg) {
        const nf_seg_t *g = &it->call->seg[it->s];
        if (!nf_fp32_takes(it, g) || it->done == g->m) {
            it->s++, it->done = 0;
            continue;
        }
        size_t take = g->m - it->done < len - n ? g->m - it->done : len - n;
        size_t at = g->off + it->done;
        if (in && it->take == NF_TAKE_BF16)
            nf_ctx.k->bf16_pack(it->call->x + at, (uint16_t *)buf + n, take);
        else if (in)
            memcpy(buf + n, it->call->x + at, take * sizeof(float));
        else
            memcpy(it->call->r + at, buf + n, take * sizeof(float));
        n += take, it->done += take;
    }
    return n;
}

/* My share, in whole lane groups, of a chunk of len elements. Across
 * nodes the leader, which exchanges, sums nothing when it has helpers. */
static void nf_fp32_share(const nf_comm_t *c, size_t len, size_t *j0, size_t *j1)
{
    size_t groups = (len + NF_LANES - 1) / NF_LANES;
    int skip = c->nnodes > 1 && c->lsize > 1;
    if (skip && c->lrank == 0) {
        *j0 = *j1 = 0;
        return;
    }
    size_t me = (size_t)(c->lrank - skip), n = (size_t)(c->lsize - skip);
    *j0 = groups * me / n * NF_LANES;
    *j1 = groups * (me + 1) / n * NF_LANES;
    if (*j1 > len)
        *j1 = len;
}

/* Sum my share of chunk k (input buffer k & 1) over every slot, in local
 * rank order, into result buffer res. */
static void nf_fp32_sum_share(nf_comm_t *c, unsigned k, float *res, size_t len, int bf16)
{
    size_t j0, j1;
    nf_fp32_share(c, len, &j0, &j1);
    if (j1 <= j0)
        return;
    if (bf16) { /* the chunk's input buffer holds len bf16 values */
        const uint16_t **in = (const uint16_t **)c->ptrs;
        for (int i = 0; i < c->lsize; i++)
            in[i] = (const uint16_t *)((const float *)nf_slot(c, i) +
                                       (size_t)(k & 1u) * c->fp32_chunk) + j0;
        nf_ctx.k->sum_bf16(res + j0, in, (unsigned)c->lsize, j1 - j0);
        return;
    }
    const float **in = (const float **)c->ptrs;
    for (int i = 0; i < c->lsize; i++)
        in[i] = (const float *)nf_slot(c, i) + (size_t)(k & 1u) * c->fp32_chunk + j0;
    nf_ctx.k->sum_f32(res + j0, in, (unsigned)c->lsize, j1 - j0);
}

static float *nf_fp32_res(const nf_comm_t *c, size_t k)
{
    return c->fp32_res + (k % nf_fp32_nres(c)) * c->fp32_chunk;
}

/* Chunks of c->fp32_chunk floats through a pipeline with one node barrier
 * per stage. Between barriers s and s+1 a rank copies out chunk s-D's
 * result, (several nodes) the leader sums chunk s-2's node results across
 * nodes, every rank sums its share of chunk s-1, and copies in chunk s; D
 * is 2 on one node, 3 across nodes, so the leader's exchange of one chunk
 * overlaps the others' work on the next two. Each step's inputs were all
 * complete before the barrier that precedes it, inputs alternate between
 * two buffers and results rotate through nf_fp32_nres: nobody still reads
 * what a rank overwrites. The leader's status rides on its barrier. */
static nf_status_t nf_fp32_pipe(nf_comm_t *c, const nf_call_t *call, nf_take_t take)
{
    nf_fp32_it_t in = {.call = call, .take = take}, out = in;
    float *mine = (float *)nf_slot(c, c->lrank);
    size_t nres = nf_fp32_nres(c), depth = c->nnodes > 1 ? 3 : 2;
    size_t len[NF_FP32_NRES_MAX] = {0}; /* of the chunks in flight, by chunk % nres */
    nf_ctl_t *lead = nf_ctl(c, 0);
    for (size_t s = 0;; s++) {
        if (s >= depth && len[(s - depth) % nres] > 0) {
            nf_fp32_move(&out, nf_fp32_res(c, s - depth), len[(s - depth) % nres], 0);
            len[(s - depth) % nres] = 0;
        }
        if (c->nnodes > 1 && c->lrank == 0) {
            nf_status_t st = NF_OK;
            if (s >= 2 && len[(s - 2) % nres] > 0)
                st = nf_xnode_fp32(c, nf_fp32_res(c, s - 2), len[(s - 2) % nres]);
            lead->stage_status[s & 1u] = st; /* read after this barrier, rewritten two later */
        }
        if (s >= 1 && len[(s - 1) % nres] > 0)
            nf_fp32_sum_share(c, (unsigned)(s - 1), nf_fp32_res(c, s - 1), len[(s - 1) % nres],
                              take == NF_TAKE_BF16);
        len[s % nres] = nf_fp32_move(&in, mine + (s & 1u) * c->fp32_chunk, c->fp32_chunk, 1);
        size_t busy = 0;
        for (size_t i = 0; i < nres; i++)
            busy += len[i];
        if (busy == 0)
            return NF_OK;
        nf_node_barrier(c);
        if (c->nnodes > 1 && lead->stage_status[s & 1u] != NF_OK)
            return (nf_status_t)lead->stage_status[s & 1u];
    }
}

/* One rank on every node: no node pipeline. The input goes straight into
 * the exchange and the nodes' sum straight into the result, instead of
 * through the slot (copy in), the node sum of one rank (a copy) and the
 * result buffer (copy out): the same sums in node order, the same bits.
 * Taken when the pass's elements are one run of the buffer (all of it, or
 * a fused call's fp32 segments side by side) that nf_xnode_fp32_direct
 * takes; bf16 packs its input, so it keeps the pipeline. The exchanges are
 * not the pipeline's, so every rank decides alike: from the node counts,
 * the agreed take and count, and (NF_TAKE_REST, after a NF_V_SAME
 * verdict) the layout they share. 0: not taken. */
static int nf_fp32_direct(nf_comm_t *c, const nf_call_t *call, nf_take_t take,
                          nf_status_t *st)
{
    nf_fp32_it_t it = {.call = call, .take = take};
    size_t off = 0, n = take == NF_TAKE_ALL ? call->m : 0; /* segments cover [0, m) */
    if (c->size != c->nnodes || c->nnodes < 2 || take == NF_TAKE_BF16)
        return 0; /* a one-rank node among larger ones pipelines too */
    for (size_t s = 0; s < call->nseg && take != NF_TAKE_ALL; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (!nf_fp32_takes(&it, g) || g->m == 0)
            continue;
        if (n > 0 && g->off != off + n)
            return 0;
        off = n > 0 ? off : g->off;
        n += g->m;
    }
    if (!nf_xnode_fp32_direct(c, n))
        return 0;
    *st = nf_xnode_fp32_from(c, call->x + off, call->r + off, n);
    return 1;
}

/* Elements a pass takes: the same on every rank (a pass over all of a call
 * whose ranks cut it differently takes the agreed count). */
static size_t nf_fp32_elems(const nf_call_t *call, nf_take_t take)
{
    nf_fp32_it_t it = {.call = call, .take = take};
    size_t n = 0;
    if (take == NF_TAKE_ALL)
        return call->m;
    for (size_t s = 0; s < call->nseg; s++)
        if (nf_fp32_takes(&it, &call->seg[s]))
            n += call->seg[s].m;
    return n;
}

/* Every rank enters each pass of a call alike, after it is done with what
 * the segment held: the chunk may grow here (agreed); when it cannot, the
 * pass runs in the chunks the segment has, as exact. */
static nf_status_t nf_fp32_pass(nf_comm_t *c, nf_call_t *call, nf_take_t take)
{
    if (nf_comm_reserve_fp32(c, nf_fp32_elems(call, take)) != NF_OK)
        call->fp32_stuck = 1;
    if (c->size == 1) { /* identity read-back: byte-exact (bf16: rounded, widened) */
        nf_fp32_it_t in = {.call = call, .take = take}, out = in;
        float *mine = (float *)nf_slot(c, 0), *res = c->fp32_res;
        size_t len;
        while ((len = nf_fp32_move(&in, mine, c->fp32_chunk, 1)) > 0) {
            if (take == NF_TAKE_BF16) {
                const uint16_t *one[1] = {(const uint16_t *)mine};
                nf_ctx.k->sum_bf16(res, one, 1, len);
                nf_fp32_move(&out, res, len, 0);
            } else {
                nf_fp32_move(&out, mine, len, 0);
            }
        }
        return NF_OK;
    }
    nf_status_t st;
    return nf_fp32_direct(c, call, take, &st) ? st : nf_fp32_pipe(c, call, take);
}

/* ---------------------------------------------------------------- small */

/* A small call on one node after the header barrier: every rank reduces
 * every rank's copy itself, so no second barrier; the areas alternate by
 * call parity, and a rank writes one again only after the next call's
 * barrier, when everyone has finished reading it. */
static nf_status_t nf_small_run(nf_comm_t *c, nf_call_t *call, const nf_shape_t *sh)
{
    const float **in = (const float **)c->ptrs;
    int marked = 0;
    if (sh->nlow > 0) {
        nf_gather_scales(c, sh);
        nf_count_lines(c, sh, c->pcnt);
        marked = nf_finish_all(c, call, sh, c->pcnt);
        if (call->health)
            nf_health_agree(c, call, sh);
    }
    size_t at = 0;
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (nf_lowbit(g))
            continue;
        for (int i = 0; i < c->lsize; i++)
            in[i] = nf_small_fp32(c, sh, i) + at;
        nf_ctx.k->sum_f32(call->r + g->off, in, (unsigned)c->lsize, g->m);
        at += g->m;
    }
    return marked ? nf_fp32_pass(c, call, NF_TAKE_NONFINITE) : NF_OK;
}

/* An inline call after the verdict: every node's area came with it (node j
 * is rank j), so every rank reduces them all itself, as nf_small_run does
 * a node's areas: the counts are integers, the scales the same doubles in
 * rank order, and each fp32 element the sum in node order of the nodes'
 * sums of one rank, as the exchanges would give (sum_f32 of one input is
 * a copy): the same bits. */
static nf_status_t nf_inline_run(nf_comm_t *c, nf_call_t *call, const nf_shape_t *sh)
{
    int marked = 0;
    unsigned p = (unsigned)c->nnodes;
    if (sh->nlow > 0) {
        const uint64_t **in = (const uint64_t **)c->ptrs;
        for (unsigned j = 0; j < p; j++) {
            in[j] = nf_xnode_area(c, (int)j);
            memcpy(c->scales + (size_t)j * sh->nsc, in[j] + sh->lines * NF_LINE_WORDS,
                   sh->nsc * sizeof(double));
        }
        nf_ctx.k->count_sum(c->pcnt, c->k, in, p, sh->lines);
        marked = nf_finish_all(c, call, sh, c->pcnt);
        if (call->health)
            nf_health_agree(c, call, sh);
    }
    const float **fin = (const float **)c->ptrs;
    size_t at = 0;
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (nf_lowbit(g))
            continue;
        for (unsigned j = 0; j < p; j++)
            fin[j] = (const float *)(nf_xnode_area(c, (int)j) +
                                     (sh->lines + sh->slines) * NF_LINE_WORDS) + at;
        nf_ctx.k->sum_f32(call->r + g->off, fin, p, g->m);
        at += g->m;
    }
    return marked ? nf_fp32_pass(c, call, NF_TAKE_NONFINITE) : NF_OK;
}

/* Copy my fp32 segments' elements into my small area. */
static void nf_small_fp32_in(nf_comm_t *c, const nf_call_t *call, const nf_shape_t *sh)
{
    nf_fp32_it_t it = {.call = call, .take = NF_TAKE_REST};
    nf_fp32_move(&it, nf_small_fp32(c, sh, c->lrank), sh->fp32, 1);
}

/* ---------------------------------------------------------------- a call */

/* Write my header and, where the segment holds it already, my data. Returns
 * whether the low-bit lines are packed. */
static int nf_publish(nf_comm_t *c, const nf_call_t *call, const nf_shape_t *sh, int ok,
                      uint64_t *mine)
{
    mine[NF_H_COUNT] = call->m;
    mine[NF_H_LAYOUT] = nf_layout_hash(call);
    mine[NF_H_OK] = (uint64_t)ok;
    mine[NF_H_SPARE] = 0;
    memcpy(nf_ctl(c, c->lrank)->hdr[sh->parity], mine, NF_HDR_WORDS * sizeof(uint64_t));
    if (!ok)
        return 0;
    if (sh->small || sh->inl) {
        nf_small_fp32_in(c, call, sh);
        if (sh->nlow > 0)
            nf_pack_all(c, call, sh);
        return 1;
    }
    if (sh->nlow == 0 || sh->nint > 0 || nf_need(sh) > c->cap_elems)
        return 0; /* integer routes pack after agreeing their block maxes */
    nf_pack_all(c, call, sh);
    return 1;
}

void nf_coll_forget(nf_comm_t *c) { memset(&c->ihist, 0, sizeof(c->ihist)); }

nf_status_t nf_coll_run(nf_comm_t *c, nf_call_t *call)
{
    nf_shape_t sh;
    uint64_t mine[NF_H_N], v, *node = NULL;
    int marked = 0, inl;
    nf_layout(c, call, &sh);
    if (c->nnodes > 1 && c->lrank == 0) /* the verdict's payload, in the scratch */
        node = nf_xnode_payload(c);
    if (node != NULL && c->size == c->nnodes) {
        /* what is sent beyond the call's data goes as zeros: the header's
         * line, and the area whole or, inline, the scale lines (the
         * scales fill them only in part) and everything from the line
         * where the fp32 elements end (their padding, and with three
         * nodes or more the rest of the history's area) */
        size_t area = nf_verdict_words(1, c->varea) - NF_LINE_WORDS, from = 0;
        sh.area = node + NF_LINE_WORDS;
        memset(node, 0, NF_LINE_BYTES);
        if (sh.inl) {
            memset(sh.area + sh.lines * NF_LINE_WORDS, 0, sh.slines * NF_LINE_BYTES);
            from = (size_t)sh.need / NF_LINE_BYTES * NF_LINE_WORDS;
        }
        if (area > from)
            memset(sh.area + from, 0, (area - from) * sizeof(uint64_t));
    }
    c->calls++;
    call->mismatch = call->capacity = call->fp32_stuck = 0;
    call->loss_mean = NAN;
    for (size_t s = 0; s < call->nseg; s++)
        call->seg[s].ef_ratio = NAN;
    int ok = nf_comm_scales(c, sh.nsc) == NF_OK && nf_comm_bmax(c, sh.nbmax) == NF_OK;
    int packed = nf_publish(c, call, &sh, ok, mine);
    nf_node_barrier(c);
    nf_status_t st = nf_verdict(c, call, &sh, mine, node, &v, &inl);
    if (st != NF_OK)
        return st;
    if (v == NF_V_COUNT)
        return nf_mpi_status(MPI_ERR_COUNT);
    if (v != NF_V_SAME) { /* the ranks cut the buffer differently: exact for all */
        call->mismatch = 1;
        return nf_fp32_pass(c, call, NF_TAKE_ALL);
    }
    if (sh.inl) /* inl: the same layout everywhere, so every rank's area came */
        return inl ? nf_inline_run(c, call, &sh) : nf_fp32_pass(c, call, NF_TAKE_ALL);
    if (sh.small)
        return nf_small_run(c, call, &sh);
    if (sh.nlow > 0 && !packed) {
        if (nf_comm_reserve(c, nf_need(&sh)) != NF_OK) {
            call->capacity = 1; /* agreed: the segment cannot grow anywhere */
            return nf_fp32_pass(c, call, NF_TAKE_ALL);
        }
        if (sh.nint > 0 && (st = nf_int_agree(c, call, &sh)) != NF_OK)
            return st;
        nf_pack_all(c, call, &sh);
        if (c->nnodes < 2)
            nf_node_barrier(c); /* publishes the slots (several nodes: the allgather) */
    }
    if (sh.nlow > 0 && (st = nf_lowbit_shared(c, call, &sh, &marked)) != NF_OK)
        return st;
    if ((sh.fp32 > 0 || marked) && (st = nf_fp32_pass(c, call, NF_TAKE_REST)) != NF_OK)
        return st;
    return sh.bf16 > 0 ? nf_fp32_pass(c, call, NF_TAKE_BF16) : NF_OK;
}
