/*
 * The allreduce protocol over the node-shared segment. No arithmetic here:
 * kernels do the math, this file moves lines between ranks.
 *
 * Low-bit call:  pack my lines into my slot  ->  exchange scales (allgather:
 * also the barrier that publishes every slot)  ->  each local rank counts
 * its share of lines over all slots  ->  node barrier (+ leaders merge node
 * counts across nodes)  ->  everyone unpacks the shared counts.
 * The counts are integers, so every rank gets the same bits whatever the
 * order; the scales are summed in rank order in double.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "nf_coll.h"
#include "nf_ctx.h"
#include "nf_placement.h"

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

/* Gather one double per rank; NaN marks a rank that saw a non-finite value.
 * Returns the rank-ordered mean, or NAN if any rank flagged. */
static nf_status_t nf_scales(nf_comm_t *c, double mine, double *mean)
{
    nf_status_t st = nf_mpi_status(
        PMPI_Allgather(&mine, 1, MPI_DOUBLE, c->scales, 1, MPI_DOUBLE, c->priv));
    if (st != NF_OK)
        return st;
    double sum = 0.0;
    for (int i = 0; i < c->size; i++)
        sum += c->scales[i];
    *mean = sum / (double)c->size;
    return NF_OK;
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

/* Count planes for lines [l0, l1) of one plane set over every local slot. */
static void nf_count_share(nf_comm_t *c, size_t plane_off, uint64_t *cnt, size_t nlines)
{
    const uint64_t **in = (const uint64_t **)c->ptrs;
    size_t l0, l1;
    nf_share(c, nlines, &l0, &l1);
    if (l1 == l0)
        return;
    for (int i = 0; i < c->lsize; i++)
        in[i] = (const uint64_t *)(nf_slot(c, i) + plane_off) + l0 * NF_LINE_WORDS;
    nf_ctx.k->count_sum(cnt + l0 * c->k * NF_LINE_WORDS, c->k, in, (unsigned)c->lsize, l1 - l0);
}

static void nf_reduce_lines(nf_comm_t *c, size_t nlines, int ternary)
{
    nf_place_pin_t pin;
    nf_place_reducer_enter(&pin);
    nf_count_share(c, 0, c->cnt, nlines);
    if (ternary)
        nf_count_share(c, nlines * NF_LINE_BYTES, c->cnt + nlines * c->k * NF_LINE_WORDS, nlines);
    nf_place_reducer_leave(&pin);
}

/* Pass 1 of binary: sign lines into my slot, the lane sum of |y| back. */
static double nf_binary_pack(const nf_call_t *call, uint64_t *bits)
{
    const nf_kernels_t *k = nf_ctx.k;
    nf_residual_t *res = call->res;
    if (res == NULL)
        return k->bin_pack(call->x, NULL, call->m, bits);
    if (res->form == NF_RES_E)
        return k->bin_pack(call->x, res->buf[res->cur], call->m, bits);
    return k->bin_pack_ef(call->x, res->buf[res->cur], res->aprev, res->buf[res->cur ^ 1u],
                          call->m, bits);
}

nf_status_t nf_coll_binary(nf_comm_t *c, const nf_call_t *call)
{
    nf_residual_t *res = call->res;
    size_t nlines = nf_lines(call->m);
    double a;
    double ai = nf_binary_pack(call, (uint64_t *)nf_slot(c, c->lrank)) / (double)call->m;
    nf_status_t st = nf_scales(c, isfinite(ai) ? ai : NAN, &a);
    if (st != NF_OK)
        return st;
    if (!isfinite(a))
        return NF_ERR_UNSUPPORTED; /* the residual is untouched: Y form wrote the spare */
    nf_reduce_lines(c, nlines, 0);
    if ((st = nf_merge_counts(c, nlines)) != NF_OK)
        return st;
    if (res != NULL && res->form == NF_RES_E) {
        nf_ctx.k->bin_finish(call->r, call->x, res->buf[res->cur], c->cnt, c->k, call->m,
                             (unsigned)c->size, a, (float)ai);
        return NF_OK;
    }
    nf_ctx.k->bin_finish(call->r, NULL, NULL, c->cnt, c->k, call->m, (unsigned)c->size, a,
                       (float)ai);
    if (res != NULL) { /* the new y becomes the state */
        res->cur ^= 1u;
        res->aprev = (float)ai;
    }
    return NF_OK;
}

nf_status_t nf_coll_ternary(nf_comm_t *c, const nf_call_t *call)
{
    const nf_kernels_t *k = nf_ctx.k;
    size_t nlines = nf_lines(call->m), nin = 0;
    uint64_t *plus = (uint64_t *)nf_slot(c, c->lrank);
    float *e = call->res != NULL ? nf_residual_e(call->res) : NULL;
    double b, bi = NAN;
    double ai = k->abs_sum(call->x, e, call->m) / (double)call->m;
    float t = 0.0f;
    if (isfinite(ai)) {
        t = (float)(call->gamma * ai);
        double bsum = k->ter_pack(call->x, e, call->m, t, plus,
                                  plus + nlines * NF_LINE_WORDS, &nin);
        bi = nin > 0 ? bsum / (double)nin : 0.0;
    }
    nf_status_t st = nf_scales(c, bi, &b);
    if (st != NF_OK)
        return st;
    if (!isfinite(b))
        return NF_ERR_UNSUPPORTED;
    nf_reduce_lines(c, nlines, 1);
    if ((st = nf_merge_counts(c, 2 * nlines)) != NF_OK)
        return st;
    k->ter_finish(call->r, call->x, e, c->cnt, c->cnt + nlines * c->k * NF_LINE_WORDS,
                  c->k, call->m, b, t, (float)bi);
    return NF_OK;
}

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

/* One chunk: copy in, barrier, sum my share in rank order, barrier, copy out. */
static nf_status_t nf_fp32_chunk(nf_comm_t *c, const float *x, float *r, size_t len,
                                 unsigned parity)
{
    const float **in = (const float **)c->ptrs;
    size_t off = (size_t)parity * NF_FP32_CHUNK, j0, j1;
    float *res = c->fp32_res + off;
    memcpy((float *)nf_slot(c, c->lrank) + off, x, len * sizeof(float));
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
    memcpy(r, res, len * sizeof(float));
    return NF_OK;
}

nf_status_t nf_coll_fp32(nf_comm_t *c, const nf_call_t *call)
{
    if (c->size == 1) { /* identity read-back: byte-exact */
        if (call->r != call->x)
            memcpy(call->r, call->x, call->m * sizeof(float));
        return NF_OK;
    }
    unsigned parity = 0;
    for (size_t off = 0; off < call->m; off += NF_FP32_CHUNK, parity ^= 1u) {
        size_t len = call->m - off < NF_FP32_CHUNK ? call->m - off : NF_FP32_CHUNK;
        nf_status_t st = nf_fp32_chunk(c, call->x + off, call->r + off, len, parity);
        if (st != NF_OK)
            return st;
    }
    return NF_OK;
}
