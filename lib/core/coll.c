/*
 * The allreduce protocol over the node-shared segment. No arithmetic here:
 * kernels do the math, this file moves lines between ranks.
 * docs/design.md, "Protocol".
 *
 * A call:  exchange a header (count, layout hash, lines needed): every rank
 * learns whether the others called alike  ->  grow the segment if needed
 * (agreed)  ->  pack each low-bit segment's lines into my slot  ->  exchange
 * the scales of all low-bit segments (also the barrier that publishes every
 * slot)  ->  each local rank counts its share of all lines over all slots
 * ->  node barrier (+ leaders merge node counts across nodes)  ->  everyone
 * unpacks its segments  ->  one fp32 pass over the fp32 segments (and any
 * low-bit one a rank's NaN/Inf sent there).
 * The counts are integers, so every rank gets the same bits whatever the
 * order; the scales are summed in rank order in double.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "nf_coll.h"
#include "nf_ctx.h"
#include "nf_placement.h"
#include "nf_util.h"

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

static inline uint64_t *nf_cnt_line(const nf_comm_t *c, size_t line)
{
    return c->cnt + line * c->k * NF_LINE_WORDS;
}

/* ---------------------------------------------------------------- header */

enum { NF_H_COUNT, NF_H_LAYOUT, NF_H_LINES, NF_H_OK, NF_H_N };
_Static_assert(NF_H_N == NF_HDR_WORDS, "c->hdr holds NF_HDR_WORDS words per rank");

static uint64_t nf_layout_hash(const nf_call_t *call)
{
    uint64_t h = NF_HASH_INIT;
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        h = nf_hash_u64(nf_hash_u64(nf_hash_u64(nf_hash_u64(h, g->off), g->m), g->route), g->tag);
    }
    return h;
}

/* Every rank's header, one fixed-size block each, so that ranks which
 * called differently still meet in the same exchange. Returns NF_OK with
 * *same set when every rank's layout matches mine. */
static nf_status_t nf_header(nf_comm_t *c, const nf_call_t *call, size_t lines, int ok,
                             size_t *max_lines, int *same)
{
    uint64_t mine[NF_H_N] = {call->m, nf_layout_hash(call), lines, (uint64_t)ok};
    nf_status_t st = nf_mpi_status(PMPI_Allgather(mine, NF_H_N, MPI_UINT64_T, c->hdr, NF_H_N,
                                                  MPI_UINT64_T, c->priv));
    if (st != NF_OK)
        return st;
    *same = 1, *max_lines = 0;
    for (int i = 0; i < c->size; i++) {
        const uint64_t *h = c->hdr + (size_t)i * NF_H_N;
        if (h[NF_H_COUNT] != mine[NF_H_COUNT])
            return nf_mpi_status(MPI_ERR_COUNT); /* every rank sees the same blocks */
        *same &= h[NF_H_LAYOUT] == mine[NF_H_LAYOUT] && h[NF_H_OK] != 0;
        if (h[NF_H_LINES] > *max_lines)
            *max_lines = h[NF_H_LINES];
    }
    return NF_OK;
}

/* ---------------------------------------------------------------- low-bit */

static int nf_lowbit(const nf_seg_t *g) { return g->route != NF_ROUTE_FP32; }

static size_t nf_seg_lines(const nf_seg_t *g)
{
    return g->route == NF_ROUTE_TERNARY ? 2 * nf_lines(g->m) : nf_lines(g->m);
}

/* Lay the low-bit segments' lines out one after the other. */
static size_t nf_layout(nf_call_t *call, unsigned *nlow)
{
    size_t lines = 0;
    *nlow = 0;
    for (size_t s = 0; s < call->nseg; s++) {
        nf_seg_t *g = &call->seg[s];
        g->nonfinite = 0;
        if (!nf_lowbit(g))
            continue;
        g->line0 = lines;
        lines += nf_seg_lines(g);
        (*nlow)++;
    }
    return lines;
}

/* Binary pass 1: sign lines into my slot, a_i back (NaN when non-finite). */
static double nf_pack_binary(const nf_seg_t *g, const float *x, uint64_t *bits)
{
    const nf_kernels_t *k = nf_ctx.k;
    nf_residual_t *res = g->res;
    double sum;
    if (res == NULL)
        sum = k->bin_pack(x, NULL, g->m, bits);
    else if (res->form == NF_RES_E)
        sum = k->bin_pack(x, res->buf[res->cur], g->m, bits);
    else
        sum = k->bin_pack_ef(x, res->buf[res->cur], res->aprev, res->buf[res->cur ^ 1u], g->m,
                             bits);
    double ai = sum / (double)g->m;
    return isfinite(ai) ? ai : NAN;
}

/* Ternary pass 1: gated lines (plus, then minus) into my slot; b_i back,
 * the gate in *t. */
static double nf_pack_ternary(const nf_seg_t *g, const float *x, uint64_t *plus, float *t)
{
    const nf_kernels_t *k = nf_ctx.k;
    float *e = g->res != NULL ? nf_residual_e(g->res) : NULL;
    double ai = k->abs_sum(x, e, g->m) / (double)g->m;
    size_t nin = 0;
    *t = 0.0f;
    if (!isfinite(ai))
        return NAN;
    *t = (float)(g->gamma * ai);
    double bsum = k->ter_pack(x, e, g->m, *t, plus, plus + nf_lines(g->m) * NF_LINE_WORDS, &nin);
    return nin > 0 ? bsum / (double)nin : 0.0;
}

/* Pack every low-bit segment; its scale goes to mine[j] (segment order),
 * its gate (ternary) to gate[j]. */
static void nf_pack_all(nf_comm_t *c, const nf_call_t *call, double *mine, float *gate)
{
    uint64_t *slot = (uint64_t *)nf_slot(c, c->lrank);
    unsigned j = 0;
    for (size_t s = 0; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (!nf_lowbit(g))
            continue;
        uint64_t *lines = slot + g->line0 * NF_LINE_WORDS;
        gate[j] = 0.0f;
        mine[j] = g->route == NF_ROUTE_BINARY ? nf_pack_binary(g, call->x + g->off, lines)
                                              : nf_pack_ternary(g, call->x + g->off, lines,
                                                                &gate[j]);
        j++;
    }
}

/* Gather nlow doubles per rank (NaN marks a rank that saw a non-finite
 * value) into c->scales, rank-major. */
static nf_status_t nf_exchange_scales(nf_comm_t *c, const double *mine, unsigned nlow)
{
    return nf_mpi_status(PMPI_Allgather(mine, (int)nlow, MPI_DOUBLE, c->scales, (int)nlow,
                                        MPI_DOUBLE, c->priv));
}

/* The rank-ordered mean of scale j, NaN when some rank flagged. */
static double nf_mean_scale(const nf_comm_t *c, unsigned nlow, unsigned j)
{
    double sum = 0.0;
    for (int i = 0; i < c->size; i++)
        sum += c->scales[(size_t)i * nlow + j];
    return sum / (double)c->size;
}

/* Leaders add the node counters of all nodes, in node order. cnt holds
 * nlines counter lines of k planes; the other local ranks wait. */
static nf_status_t nf_merge_counts(nf_comm_t *c, size_t nlines)
{
    nf_status_t st = nf_mpi_status(PMPI_Barrier(c->node));
    if (st != NF_OK || c->nnodes < 2)
        return st;
    if (c->lrank == 0) {
        size_t words = nlines * c->k * NF_LINE_WORDS;
        uint64_t *x = c->xnode;
        st = nf_mpi_status(PMPI_Allgather(c->cnt, (int)(words / NF_LINE_WORDS), nf_ctx.line_type,
                                          x, (int)(words / NF_LINE_WORDS), nf_ctx.line_type,
                                          c->leaders));
        if (st != NF_OK)
            return st;
        memcpy(c->cnt, x, words * sizeof(uint64_t));
        for (int j = 1; j < c->nnodes; j++)
            nf_ctx.k->count_merge(c->cnt, x + (size_t)j * words, c->k, nlines);
    }
    return nf_mpi_status(PMPI_Barrier(c->node));
}

/* Count my share of lines [0, nlines) over every local slot, near the node. */
static void nf_count_lines(nf_comm_t *c, size_t nlines)
{
    const uint64_t **in = (const uint64_t **)c->ptrs;
    size_t l0, l1;
    nf_place_pin_t pin;
    nf_share(c, nlines, &l0, &l1);
    if (l1 == l0)
        return;
    nf_place_reducer_enter(&pin);
    for (int i = 0; i < c->lsize; i++)
        in[i] = (const uint64_t *)nf_slot(c, i) + l0 * NF_LINE_WORDS;
    nf_ctx.k->count_sum(nf_cnt_line(c, l0), c->k, in, (unsigned)c->lsize, l1 - l0);
    nf_place_reducer_leave(&pin);
}

static void nf_finish_binary(nf_comm_t *c, const nf_call_t *call, nf_seg_t *g, double a,
                             double ai)
{
    nf_residual_t *res = g->res;
    const float *x = call->x + g->off;
    float *r = call->r + g->off;
    const uint64_t *cnt = nf_cnt_line(c, g->line0);
    if (res != NULL && res->form == NF_RES_E) {
        nf_ctx.k->bin_finish(r, x, res->buf[res->cur], cnt, c->k, g->m, (unsigned)c->size, a,
                             (float)ai);
        return;
    }
    nf_ctx.k->bin_finish(r, NULL, NULL, cnt, c->k, g->m, (unsigned)c->size, a, (float)ai);
    if (res != NULL) { /* the new y becomes the state */
        res->cur ^= 1u;
        res->aprev = (float)ai;
    }
}

static void nf_finish_ternary(nf_comm_t *c, const nf_call_t *call, nf_seg_t *g, double b,
                              double bi, float t)
{
    float *e = g->res != NULL ? g->res->buf[g->res->cur] : NULL; /* E form since the pack */
    nf_ctx.k->ter_finish(call->r + g->off, call->x + g->off, e, nf_cnt_line(c, g->line0),
                         nf_cnt_line(c, g->line0 + nf_lines(g->m)), c->k, g->m, b, t,
                         (float)bi);
}

/* Unpack every low-bit segment whose scale is finite on every rank; mark
 * the others for the fp32 pass (their residuals are as they were). */
static void nf_finish_all(nf_comm_t *c, nf_call_t *call, unsigned nlow, const double *mine,
                          const float *gate)
{
    unsigned j = 0;
    for (size_t s = 0; s < call->nseg; s++) {
        nf_seg_t *g = &call->seg[s];
        if (!nf_lowbit(g))
            continue;
        double mean = nf_mean_scale(c, nlow, j);
        if (!isfinite(mean))
            g->nonfinite = 1;
        else if (g->route == NF_ROUTE_BINARY)
            nf_finish_binary(c, call, g, mean, mine[j]);
        else
            nf_finish_ternary(c, call, g, mean, mine[j], gate[j]);
        j++;
    }
}

/* ---------------------------------------------------------------- fp32 */

/* Leaders sum the node results of one chunk across nodes, in node order. */
static nf_status_t nf_fp32_nodes(nf_comm_t *c, float *res, size_t len)
{
    const float **in = (const float **)c->ptrs;
    float *x = c->xnode;
    nf_status_t st = nf_mpi_status(
        PMPI_Allgather(res, (int)len, MPI_FLOAT, x, (int)len, MPI_FLOAT, c->leaders));
    if (st != NF_OK)
        return st;
    for (int j = 0; j < c->nnodes; j++)
        in[j] = x + (size_t)j * len;
    nf_ctx.k->sum_f32(res, in, (unsigned)c->nnodes, len);
    return NF_OK;
}

/* Sum one chunk already in every slot at off: my share in rank order,
 * barrier, leaders across nodes, barrier. The result is at fp32_res + off. */
static nf_status_t nf_fp32_sum(nf_comm_t *c, size_t off, size_t len)
{
    const float **in = (const float **)c->ptrs;
    float *res = c->fp32_res + off;
    size_t j0, j1;
    nf_status_t st = nf_mpi_status(PMPI_Barrier(c->node));
    if (st != NF_OK)
        return st;
    nf_share(c, (len + NF_LANES - 1) / NF_LANES, &j0, &j1);
    j0 *= NF_LANES;
    j1 = j1 * NF_LANES < len ? j1 * NF_LANES : len;
    if (j1 > j0) {
        for (int i = 0; i < c->lsize; i++)
            in[i] = (const float *)nf_slot(c, i) + off + j0;
        nf_ctx.k->sum_f32(res + j0, in, (unsigned)c->lsize, j1 - j0);
    }
    if ((st = nf_mpi_status(PMPI_Barrier(c->node))) != NF_OK)
        return st;
    if (c->nnodes > 1) {
        if (c->lrank == 0 && (st = nf_fp32_nodes(c, res, len)) != NF_OK)
            return st;
        if ((st = nf_mpi_status(PMPI_Barrier(c->node))) != NF_OK)
            return st;
    }
    return NF_OK;
}

/* A cursor over the fp32 segments' elements, as if they were one vector. */
typedef struct nf_fp32_it {
    const nf_call_t *call;
    size_t s, done; /* segment, elements of it consumed */
    int all;        /* every segment (layout mismatch) */
} nf_fp32_it_t;

static int nf_fp32_takes(const nf_fp32_it_t *it, const nf_seg_t *g)
{
    return it->all || !nf_lowbit(g) || g->nonfinite;
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
        if (in)
            memcpy(buf + n, it->call->x + at, take * sizeof(float));
        else
            memcpy(it->call->r + at, buf + n, take * sizeof(float));
        n += take, it->done += take;
    }
    return n;
}

/* The fp32 pass: chunks of NF_FP32_CHUNK elements alternating between two
 * buffers; every rank walks the same segments, so every rank agrees on the
 * number of chunks. */
static nf_status_t nf_fp32_pass(nf_comm_t *c, const nf_call_t *call, int all)
{
    nf_fp32_it_t in = {.call = call, .all = all}, out = in;
    float *mine = (float *)nf_slot(c, c->lrank);
    for (unsigned parity = 0;; parity ^= 1u) {
        size_t off = (size_t)parity * NF_FP32_CHUNK;
        size_t len = nf_fp32_move(&in, mine + off, NF_FP32_CHUNK, 1);
        if (len == 0)
            return NF_OK;
        if (c->size == 1) { /* identity read-back: byte-exact */
            nf_fp32_move(&out, mine + off, len, 0);
            continue;
        }
        nf_status_t st = nf_fp32_sum(c, off, len);
        if (st != NF_OK)
            return st;
        nf_fp32_move(&out, c->fp32_res + off, len, 0);
    }
}

/* ---------------------------------------------------------------- a call */

nf_status_t nf_coll_run(nf_comm_t *c, nf_call_t *call)
{
    unsigned nlow;
    size_t lines = nf_layout(call, &nlow), need;
    int same;
    call->mismatch = call->capacity = 0;
    nf_status_t st = nf_comm_scales(c, nlow);
    st = nf_header(c, call, lines, st == NF_OK, &need, &same);
    if (st != NF_OK)
        return st;
    if (!same) { /* the ranks cut the buffer differently: exact for all */
        call->mismatch = 1;
        return nf_fp32_pass(c, call, 1);
    }
    if (nlow > 0 && nf_comm_reserve(c, need * NF_LINE_BITS / 2) != NF_OK) {
        call->capacity = 1; /* agreed: the segment cannot grow anywhere */
        return nf_fp32_pass(c, call, 1);
    }
    if (nlow > 0) {
        nf_pack_all(c, call, c->mine, c->gate);
        if ((st = nf_exchange_scales(c, c->mine, nlow)) != NF_OK)
            return st;
        nf_count_lines(c, lines);
        if ((st = nf_merge_counts(c, lines)) != NF_OK)
            return st;
        nf_finish_all(c, call, nlow, c->mine, c->gate);
    }
    return nf_fp32_pass(c, call, 0);
}
