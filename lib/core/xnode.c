/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Node leaders' exchanges across nodes (nf_xnode.h). Small payloads go
 * whole through one PMPI_Allgather and every leader reduces all copies (so
 * do two nodes' fp32 sums, and counters where that sends fewer bytes);
 * large ones are cut into one block per node: PMPI_Alltoallv hands node j
 * every node's block j (the reduce-scatter), node j reduces its block, and
 * PMPI_Allgatherv hands every block to everyone (Open MPI picks the ring,
 * pairwise or recursive-doubling schedule for each by size). fp32 blocks
 * are summed in node order, so the bits do not depend on the schedule;
 * counts are integers. Counters travel with only the planes they can use:
 * c->kn planes per line before the reduction, c->k after it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "nf_ctx.h"
#include "nf_stats.h"
#include "nf_xnode.h"

/* Block j of n units over p nodes: [n*j/p, n*(j+1)/p). */
static size_t nf_blk(size_t n, int p, int j) { return n * (size_t)j / (size_t)p; }

static int nf_me(const nf_comm_t *c) { return c->node_id; }

static size_t nf_max(size_t a, size_t b) { return a > b ? a : b; }

/* Words of the verdict's exchange per node: this call's. */
static size_t nf_verdict_size(const nf_comm_t *c)
{
    return nf_verdict_words(c->size == c->nnodes, c->varea);
}

int nf_xnode_pair(const nf_comm_t *c) { return c->nnodes == 2 && c->size == 2; }

/* Words from one node's verdict payload to the next's in the scratch: two
 * one-rank nodes, the most a peer may send; else this call's, which every
 * node sends alike. */
static size_t nf_verdict_stride(const nf_comm_t *c)
{
    return nf_xnode_pair(c) ? nf_verdict_words(1, NF_PAIR_INLINE_BYTES / 8u) : nf_verdict_size(c);
}

uint64_t *nf_xnode_payload(const nf_comm_t *c)
{
    return (uint64_t *)c->xnode + (size_t)nf_me(c) * nf_verdict_stride(c);
}

/* The largest of what each exchange below keeps in the scratch. */
size_t nf_xnode_bytes(const nf_comm_t *c, size_t cap, size_t chunk)
{
    size_t p = (size_t)c->nnodes, k = c->k, kn = c->kn;
    size_t nl = 2 * nf_lines(cap) + 1; /* lines of one call, at most */
    size_t wl = p * kn <= kn + k ? nl : NF_XNODE_WHOLE_MAX / (kn * NF_LINE_BYTES);
    size_t cwhole = (wl * kn + p * wl * kn + wl * k) * NF_LINE_BYTES;
    size_t csplit = (nl * kn + (nl + p) * kn + (nl / p + 1) * k) * NF_LINE_BYTES;
    size_t fl = p == 2 ? chunk : NF_XNODE_WHOLE_MAX / sizeof(float);
    size_t fwhole = p * fl * sizeof(float), fsplit = (chunk + p) * sizeof(float);
    size_t verdict = nf_verdict_words(c->size == c->nnodes, nf_xnode_pair(c)
                                                                ? NF_PAIR_INLINE_BYTES / 8u
                                                                : NF_INLINE_MAX_WORDS) * 8 * p;
    return nf_max(nf_max(cwhole, csplit), nf_max(fwhole, fsplit)) + verdict;
}

#define NF_VERDICT_TAG 7303
#define NF_TAIL_TAG 7304
/* A pair's verdict message, at most (nf_traffic.h); the payload past it, at
 * most, which tails of a word {group, index, count} and up to
 * NF_PIECE_WORDS words carry; the tails' staging: two slots of my tails as
 * sent, and one tail received. */
#define NF_EAGER_WORDS (NF_PAIR_EAGER_BYTES / 8u)
#define NF_TAIL_WORDS (NF_PAIR_TAIL_BYTES / 8u)
#define NF_PIECE_WORDS (NF_EAGER_WORDS - 1u)
#define NF_SLOT_WORDS (NF_TAIL_WORDS + NF_PAIR_TAILS)
#define NF_STAGE_WORDS (2 * NF_SLOT_WORDS + NF_EAGER_WORDS)
_Static_assert(NF_PAIR_TAILS * NF_PIECE_WORDS >= NF_TAIL_WORDS, "the tails carry the rest");
_Static_assert(NF_PAIR_TAILS < 256, "a tail's index and count fit a byte");
#define nf_tail_word(g, i, n) ((uint64_t)(g) << 16 | (uint64_t)(i) << 8 | (uint64_t)(n))
/* Header words after NF_HDR_WORDS: the payload's words in all; the peer's
 * last group of tails this rank received; this rank's last group posted,
 * and how many of its tails were, with NF_TAIL_NOW when that group is
 * this call's (the payload's rest). */
enum { NF_H_TOTAL = NF_HDR_WORDS, NF_H_GOT, NF_H_SENT, NF_H_PIECES };
_Static_assert(NF_H_PIECES < NF_LINE_WORDS, "the tails' words fit the header line");
#define NF_TAIL_NOW 0x100u

/* Seconds a rank goes on moving its tails after the verdict, and at the
 * communicator's end, for a peer that may not receive them. */
#define NF_TAILS_SETTLE 0.02

static size_t nf_tails_of(size_t words) { return (words + NF_PIECE_WORDS - 1) / NF_PIECE_WORDS; }

/* Completes slot s's tails, trying for up to `secs` seconds (negative:
 * until they complete, for tails the peer received, which MPI then
 * finishes without it); whether they did. */
static int nf_tails_finish(nf_comm_t *c, int s, double secs)
{
    nf_tails_t *t = &c->tails;
    double until = secs > 0 ? PMPI_Wtime() + secs : 0;
    int done = t->n[s] == 0;
    MPI_Status st[NF_PAIR_TAILS]; /* not MPI_STATUSES_IGNORE: MPICH's (MPI_Status *)1
                                   * trips gcc's -Wstringop-overflow */
    while (!done) {
        if (PMPI_Testall(t->n[s], t->rq[s], &done, st) != MPI_SUCCESS)
            return 0;
        if (!done && secs >= 0 && (secs == 0 || PMPI_Wtime() > until))
            return 0;
    }
    t->n[s] = 0;
    return 1;
}

/* The tails' staging, allocated at the first call that has tails (NULL:
 * no memory). */
static uint64_t *nf_tails_stage(nf_tails_t *t)
{
    if (t->stage == NULL)
        t->stage = malloc(NF_STAGE_WORDS * sizeof(uint64_t));
    return t->stage;
}

/* Whether my next group's slot is free: its last group's tails sent, or
 * received by the peer. */
static int nf_tails_slot(nf_comm_t *c, int s)
{
    return nf_tails_finish(c, s, c->tails.group[s] <= c->tails.acked ? -1.0 : 0.0);
}

/* Posts my payload's rest past `first` words, mine[first..words), as this
 * call's group of tails, before the verdict. Sets the header's tail words;
 * none posted (no slot, no memory, MPI refused): the header says so, and
 * the peer's call fails as mine does. */
static int nf_tails_post(nf_comm_t *c, uint64_t *mine, size_t first, size_t words)
{
    nf_tails_t *t = &c->tails;
    size_t k = words > first ? nf_tails_of(words - first) : 0;
    int rc = MPI_SUCCESS, now = 0;
    if (k > 0 && nf_tails_stage(t) != NULL && nf_tails_slot(c, (int)((t->sent + 1) & 1))) {
        nf_tails_t was = *t;
        uint64_t g = ++t->sent;
        int s = (int)(g & 1);
        uint64_t *tail = t->stage + (size_t)s * NF_SLOT_WORDS;
        t->group[s] = g;
        t->sent_pieces = 0;
        for (size_t at = first, n; at < words && rc == MPI_SUCCESS; at += n, tail += 1 + n) {
            n = words - at < NF_PIECE_WORDS ? words - at : NF_PIECE_WORDS;
            tail[0] = nf_tail_word(g, t->sent_pieces, k);
            memcpy(tail + 1, mine + at, n * sizeof(uint64_t));
            rc = PMPI_Isend(tail, (int)(1 + n), MPI_UINT64_T, 1 - nf_me(c), NF_TAIL_TAG,
                            c->leaders, &t->rq[s][t->sent_pieces]);
            t->sent_pieces += rc == MPI_SUCCESS;
        }
        t->n[s] = (int)t->sent_pieces;
        now = t->sent_pieces == k;
        if (t->sent_pieces == 0) /* nothing posted: no group to announce */
            *t = was;
    } else if (k > 0) { /* no memory, or the slot's tails not yet received */
        rc = t->stage == NULL ? MPI_ERR_NO_MEM : MPI_ERR_OTHER;
    }
    mine[NF_H_TOTAL] = words;
    mine[NF_H_GOT] = t->got;
    mine[NF_H_SENT] = t->sent;
    mine[NF_H_PIECES] = t->sent_pieces | (now ? NF_TAIL_NOW : 0u);
    return rc;
}

/* Receives the peer's groups of tails that its header h announces and I
 * have not received: those of calls whose verdict failed here (dropped),
 * and this call's (into h + got, when h says they are this call's). Every
 * group but the peer's last is whole (nf_tails_slot). */
static int nf_tails_drain(nf_comm_t *c, uint64_t *h, size_t got)
{
    nf_tails_t *t = &c->tails;
    uint64_t last = h[NF_H_SENT], pieces = h[NF_H_PIECES] & 0xffu;
    int now = (h[NF_H_PIECES] & NF_TAIL_NOW) != 0;
    size_t landed = 0, k = h[NF_H_TOTAL] > got ? nf_tails_of(h[NF_H_TOTAL] - got) : 0;
    if (t->got < last && nf_tails_stage(t) == NULL)
        return MPI_ERR_NO_MEM;
    uint64_t *buf = t->stage + 2 * NF_SLOT_WORDS;
    int bad = 0;
    while (t->got < last) {
        MPI_Status st;
        int len = 0;
        int rc = PMPI_Recv(buf, (int)NF_EAGER_WORDS, MPI_UINT64_T, 1 - nf_me(c), NF_TAIL_TAG,
                           c->leaders, &st);
        if (rc == MPI_SUCCESS)
            rc = PMPI_Get_count(&st, MPI_UINT64_T, &len);
        if (rc != MPI_SUCCESS)
            return rc;
        uint64_t g = buf[0] >> 16, i = (buf[0] >> 8) & 0xffu, n = buf[0] & 0xffu;
        if (len < 1 || g <= t->got || g > last || i >= n)
            return MPI_ERR_OTHER; /* not a tail of ours */
        if (g == last && now && i < k) {
            size_t at = got + i * NF_PIECE_WORDS, want = h[NF_H_TOTAL] - at;
            want = want < NF_PIECE_WORDS ? want : NF_PIECE_WORDS;
            if ((size_t)len == 1 + want) {
                memcpy(h + at, buf + 1, want * sizeof(uint64_t));
                landed++;
            } else { /* received all the same, so the next drain goes on */
                bad = 1;
            }
        }
        if (i + 1 == (g == last && pieces < n ? pieces : n))
            t->got = g;
    }
    if (bad)
        return MPI_ERR_TRUNCATE;
    return k == 0 || (now && landed == k) ? MPI_SUCCESS : MPI_ERR_OTHER;
}

/* Whether h, got words from the peer, is a pair's verdict: at least its
 * header line, a total that the stride holds, past the message a full
 * message, and tails no more than a call has. */
static int nf_pair_header_ok(const nf_comm_t *c, const uint64_t *h, size_t got, size_t stride)
{
    if (got < NF_LINE_WORDS || h[NF_H_TOTAL] < got || h[NF_H_TOTAL] > stride ||
        (h[NF_H_PIECES] & ~(uint64_t)(NF_TAIL_NOW | 0xffu)) != 0 ||
        (h[NF_H_PIECES] & 0xffu) > NF_PAIR_TAILS || h[NF_H_SENT] < c->tails.got ||
        (h[NF_H_SENT] > c->tails.got && (h[NF_H_PIECES] & 0xffu) == 0) ||
        h[NF_H_GOT] > c->tails.sent)
        return 0;
    return h[NF_H_TOTAL] == got || (got == NF_EAGER_WORDS && h[NF_H_TOTAL] - got <= NF_TAIL_WORDS);
}

/* Two one-rank nodes: my payload of `words` words for the peer's, which
 * may be of another size (its own call's area) up to the stride. A
 * payload larger than MPI sends eagerly (a 64 KiB call's) is cut: the
 * verdict's message carries NF_EAGER_WORDS, tails the rest, posted first
 * and eager where MPI's TCP transport is (no round trip waits for any;
 * over shared memory past 4 KiB they wait for the peer's drain). No rank
 * waits for its own tails to be received (nf_tails_t), only moves them for
 * a while: a peer whose verdict failed receives them in its next verdict. */
static nf_status_t nf_verdict_pair(nf_comm_t *c, size_t words)
{
    uint64_t *all = c->xnode;
    size_t stride = nf_verdict_stride(c), first = words < NF_EAGER_WORDS ? words : NF_EAGER_WORDS;
    int me = nf_me(c), peer = 1 - me, got = 0;
    uint64_t *mine = all + (size_t)me * stride, *h = all + (size_t)peer * stride;
    MPI_Status s;
    /* tails that cannot be posted: the verdict still crosses (the peer
     * waits for it), and the peer's call fails as mine does */
    int rc = nf_tails_post(c, mine, first, words);
    int x = PMPI_Sendrecv(mine, (int)first, MPI_UINT64_T, peer, NF_VERDICT_TAG, h,
                          (int)NF_EAGER_WORDS, MPI_UINT64_T, peer, NF_VERDICT_TAG, c->leaders, &s);
    rc = rc != MPI_SUCCESS ? rc : x;
    if (x == MPI_SUCCESS) {
        int y = PMPI_Get_count(&s, MPI_UINT64_T, &got);
        if (y == MPI_SUCCESS && !nf_pair_header_ok(c, h, (size_t)got, stride))
            y = MPI_ERR_TRUNCATE; /* not a verdict of ours */
        if (y == MPI_SUCCESS) {
            c->tails.acked = h[NF_H_GOT] > c->tails.acked ? h[NF_H_GOT] : c->tails.acked;
            y = nf_tails_drain(c, h, (size_t)got);
        }
        rc = rc != MPI_SUCCESS ? rc : y;
        /* the peer drains my tails now: MPI may move them only while I am
         * in it (shared memory), so for a while, not for ever (its verdict
         * may have failed) */
        if (mine[NF_H_PIECES] & NF_TAIL_NOW)
            nf_tails_finish(c, (int)(c->tails.sent & 1), NF_TAILS_SETTLE);
    }
    return nf_mpi_status(rc);
}

/* At the communicator's end: my tails complete, or, not received (the
 * peer's last verdict failed), are left to MPI with their staging. */
void nf_xnode_tails_free(nf_comm_t *c)
{
    nf_tails_t *t = &c->tails;
    int left = 0;
    for (int s = 0; s < 2; s++) {
        if (nf_tails_finish(c, s, t->group[s] <= t->acked ? -1.0 : NF_TAILS_SETTLE))
            continue;
        for (int i = 0; i < t->n[s]; i++)
            if (t->rq[s][i] != MPI_REQUEST_NULL)
                PMPI_Request_free(&t->rq[s][i]);
        t->n[s] = 0;
        left = 1;
    }
    if (!left) /* else MPI may still read it: kept (at most one per communicator) */
        free(t->stage);
    t->stage = NULL;
}

nf_status_t nf_xnode_verdict(nf_comm_t *c, uint64_t *v, int *inl)
{
    uint64_t *all = c->xnode;
    const uint64_t *node = nf_xnode_payload(c);
    size_t words = nf_verdict_size(c), stride = nf_verdict_stride(c);
    int pair = nf_xnode_pair(c);
    uint64_t mine = node[3]; /* an in-place exchange that fails leaves node undefined */
    nf_status_t st = pair ? nf_verdict_pair(c, words)
                          : nf_mpi_status(PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all,
                                                         (int)words, MPI_UINT64_T, c->leaders));
    int area = words > NF_HDR_WORDS;
    *inl = 0;
    if (st != NF_OK) {
        /* the others noted the largest need, which is mine when the
         * layouts agree: keep the histories in step (the call fails on
         * every rank; the engine then forgets them all, nf_coll_forget) */
        if (area && !pair)
            nf_inline_note(&c->ihist, mine);
        return st;
    }
    uint64_t need = 0;
    *v = NF_V_SAME;
    for (int j = 0; j < c->nnodes; j++) {
        const uint64_t *h = all + (size_t)j * stride;
        if (h[0] != node[0] || h[2] == NF_V_COUNT)
            *v = NF_V_COUNT;
        else if (h[1] != node[1] || h[2] != NF_V_SAME)
            *v = *v == NF_V_COUNT ? *v : 0;
        need = h[3] > need ? h[3] : need;
    }
    if (area && !pair) /* every rank saw the same needs: the next areas agree */
        nf_inline_note(&c->ihist, need);
    *inl = *v == NF_V_SAME && area && need <= (uint64_t)c->varea * 8;
    return NF_OK;
}

const uint64_t *nf_xnode_area(const nf_comm_t *c, int j)
{
    return (const uint64_t *)c->xnode + (size_t)j * nf_verdict_stride(c) + NF_LINE_WORDS;
}

/* ---------------------------------------------------------------- fp32 */

/* Every node's in, gathered whole; res (which may be in) their sum in node
 * order. */
static nf_status_t nf_fp32_whole(nf_comm_t *c, const float *in, float *res, size_t len)
{
    const float **at = (const float **)c->ptrs;
    float *x = c->xnode;
    nf_status_t st = nf_mpi_status(
        PMPI_Allgather(in, (int)len, MPI_FLOAT, x, (int)len, MPI_FLOAT, c->leaders));
    if (st != NF_OK)
        return st;
    for (int j = 0; j < c->nnodes; j++)
        at[j] = x + (size_t)j * len;
    nf_ctx.k->sum_f32(res, at, (unsigned)c->nnodes, len);
    nf_stats_internode(NF_ROUTE_FP32, (uint64_t)(c->nnodes - 1) * len * sizeof(float));
    return NF_OK;
}

/* Counts and displacements of blocks of n units over the nodes, scaled by
 * unit (elements or lines per unit); bmax: the largest block. */
static void nf_blocks(const nf_comm_t *c, size_t n, size_t unit, int *cnts, int *displs,
                      size_t *bmax)
{
    *bmax = 0;
    for (int j = 0; j < c->nnodes; j++) {
        size_t b0 = nf_blk(n, c->nnodes, j), b1 = nf_blk(n, c->nnodes, j + 1);
        cnts[j] = (int)((b1 - b0) * unit);
        displs[j] = (int)(b0 * unit);
        if (b1 - b0 > *bmax)
            *bmax = b1 - b0;
    }
}

static nf_status_t nf_fp32_split(nf_comm_t *c, float *res, size_t len)
{
    const float **in = (const float **)c->ptrs;
    int p = c->nnodes, me = nf_me(c);
    int *sc = c->xv, *sd = sc + p, *rc = sd + p, *rd = rc + p;
    size_t bmax;
    float *x = c->xnode;
    nf_blocks(c, len, 1, sc, sd, &bmax);
    for (int j = 0; j < p; j++)
        rc[j] = sc[me], rd[j] = (int)((size_t)j * bmax);
    nf_status_t st = nf_mpi_status(
        PMPI_Alltoallv(res, sc, sd, MPI_FLOAT, x, rc, rd, MPI_FLOAT, c->leaders));
    if (st != NF_OK)
        return st;
    for (int j = 0; j < p; j++)
        in[j] = x + rd[j];
    nf_ctx.k->sum_f32(res + sd[me], in, (unsigned)p, (size_t)sc[me]);
    st = nf_mpi_status(PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, res, sc, sd, MPI_FLOAT,
                                       c->leaders));
    if (st == NF_OK)
        nf_stats_internode(NF_ROUTE_FP32,
                           ((uint64_t)(len - (size_t)sc[me]) + (uint64_t)(p - 1) * sc[me]) *
                               sizeof(float));
    return st;
}

/* Two nodes send as much whole as split, in one step instead of two. */
int nf_xnode_fp32_whole(const nf_comm_t *c, size_t len)
{
    return len * sizeof(float) <= NF_XNODE_WHOLE_MAX || c->nnodes == 2;
}

nf_status_t nf_xnode_fp32(nf_comm_t *c, float *res, size_t len)
{
    if (nf_xnode_fp32_whole(c, len))
        return nf_fp32_whole(c, res, res, len);
    return nf_fp32_split(c, res, len);
}

/* Two nodes' fp32, point-to-point: messages under MPI's eager limit
 * (NF_PAIR_MSG floats, lib/util/nf_traffic.h), up to NF_PAIR_DEPTH of them in flight
 * at once (as the scratch holds: 2 x c->fp32_chunk floats, nf_xnode_bytes),
 * each summed as it arrives while the next ones cross. A message past the
 * eager limit waits a round trip for its rendezvous after the verdict's
 * own, and Open MPI's TCP transport delivered eager messages faster at
 * every size in three sets of 2026-12-06: against 512 KiB messages 8
 * deep, 448 KiB-16 MiB took 0.80-1.00x the time at 1 and 10 Gbit/s and
 * 0.63-0.72x unshaped (2 pretend hosts x 1 rank; docs/benchmarks.md, "fp32
 * between two nodes in eager messages at every size"); 32 deep was no
 * faster. Back-to-back blocking exchanges of 2 MiB, the first version,
 * left the wire idle between them. */
#define NF_PAIR_DEPTH 8u
#define NF_PAIR_TAG 7301

/* The first error of rc and a Waitall's statuses (MPI_ERR_IN_STATUS names
 * none itself). */
static int nf_first_error(int rc, int w, const MPI_Status *st, int n)
{
    if (rc != MPI_SUCCESS || w == MPI_SUCCESS)
        return rc;
    for (int i = 0; i < n && w == MPI_ERR_IN_STATUS; i++)
        if (st[i].MPI_ERROR != MPI_SUCCESS)
            return st[i].MPI_ERROR;
    return w;
}

static nf_status_t nf_fp32_pair(nf_comm_t *c, const float *in, float *res, size_t n)
{
    float *x = c->xnode;
    int me = nf_me(c), peer = 1 - me, rc = MPI_SUCCESS;
    size_t msg = c->fp32_chunk < NF_PAIR_MSG ? c->fp32_chunk : NF_PAIR_MSG;
    size_t depth = 2 * c->fp32_chunk / msg, nk = (n + msg - 1) / msg;
    MPI_Request rq[2 * NF_PAIR_DEPTH];
    MPI_Status st[2];
    depth = depth < NF_PAIR_DEPTH ? depth : NF_PAIR_DEPTH;
    /* Step k: message k - depth is summed, then message k takes its slot.
     * After an error on this rank only, the messages still cross (the
     * peer's wait for them must end) but nothing more is summed. */
    for (size_t k = 0; k < nk + depth; k++) {
        size_t slot = k % depth;
        if (k >= depth && k - depth < nk) {
            size_t o = (k - depth) * msg, len = n - o < msg ? n - o : msg;
            const float *at[2];
            rc = nf_first_error(rc, PMPI_Waitall(2, rq + 2 * slot, st), st, 2);
            at[me] = in + o;
            at[peer] = x + slot * msg;
            if (rc == MPI_SUCCESS)
                nf_ctx.k->sum_f32(res + o, at, 2u, len);
        }
        if (k < nk) {
            size_t o = k * msg, len = n - o < msg ? n - o : msg;
            rq[2 * slot] = rq[2 * slot + 1] = MPI_REQUEST_NULL;
            int a = PMPI_Irecv(x + slot * msg, (int)len, MPI_FLOAT, peer, NF_PAIR_TAG,
                               c->leaders, rq + 2 * slot);
            int b = PMPI_Isend(in + o, (int)len, MPI_FLOAT, peer, NF_PAIR_TAG, c->leaders,
                               rq + 2 * slot + 1);
            rc = rc != MPI_SUCCESS ? rc : a != MPI_SUCCESS ? a : b;
        }
    }
    if (rc != MPI_SUCCESS)
        return nf_mpi_status(rc);
    nf_stats_internode(NF_ROUTE_FP32, (uint64_t)n * sizeof(float));
    return NF_OK;
}

int nf_xnode_fp32_direct(const nf_comm_t *c, size_t n)
{
    return c->nnodes == 2 || nf_xnode_fp32_whole(c, n < c->fp32_chunk ? n : c->fp32_chunk);
}

nf_status_t nf_xnode_fp32_from(nf_comm_t *c, const float *in, float *res, size_t n)
{
    nf_status_t st = NF_OK;
    if (c->nnodes == 2)
        return nf_fp32_pair(c, in, res, n);
    for (size_t o = 0; o < n && st == NF_OK; o += c->fp32_chunk)
        st = nf_fp32_whole(c, in + o, res + o, n - o < c->fp32_chunk ? n - o : c->fp32_chunk);
    return st;
}

/* ---------------------------------------------------------------- counts */

/* Copy the low kn planes of lines [l0, l1) of k-plane counters into out. */
static void nf_narrow(const nf_comm_t *c, const uint64_t *cnt, size_t l0, size_t l1,
                      uint64_t *out)
{
    for (size_t l = l0; l < l1; l++)
        memcpy(out + (l - l0) * c->kn * NF_LINE_WORDS, cnt + l * c->k * NF_LINE_WORDS,
               c->kn * NF_LINE_BYTES);
}

/* kn-plane counters of n lines into k-plane ones (upper planes zero). */
static void nf_widen(const nf_comm_t *c, const uint64_t *in, size_t n, uint64_t *out)
{
    size_t lo = c->kn * NF_LINE_BYTES, hi = (c->k - c->kn) * NF_LINE_BYTES;
    for (size_t l = 0; l < n; l++) {
        memcpy(out + l * c->k * NF_LINE_WORDS, in + l * c->kn * NF_LINE_WORDS, lo);
        memset(out + (l * c->k + c->kn) * NF_LINE_WORDS, 0, hi);
    }
}

/* acc (n lines, k planes) = the sum of p kn-plane blocks at in + j * stride. */
static void nf_merge_nodes(const nf_comm_t *c, const uint64_t *in, size_t stride, size_t n,
                           uint64_t *acc, uint64_t *tmp)
{
    nf_widen(c, in, n, acc);
    for (int j = 1; j < c->nnodes; j++) {
        nf_widen(c, in + (size_t)j * stride, n, tmp);
        nf_ctx.k->count_merge(acc, tmp, c->k, n);
    }
}

static uint64_t nf_share_of(const nf_seg_t *g, int scales)
{
    if (scales)
        return g->nsc;
    return nf_route_info(g->route)->bits * nf_lines(g->m); /* its bit lines */
}

/* Bytes sent for a call's low-bit segments, shared among them by their
 * lines (the counters) or their scales; what the shares leave (rounding,
 * padding, health's values) goes to the first. */
static void nf_lowbit_bytes(const nf_call_t *call, uint64_t bytes, int scales)
{
    uint64_t whole = 0, left = bytes;
    size_t first = call->nseg;
    for (size_t s = 0; s < call->nseg; s++)
        if (nf_route_lowbit(call->seg[s].route)) {
            whole += nf_share_of(&call->seg[s], scales);
            first = first < s ? first : s;
        }
    if (first == call->nseg || whole == 0)
        return;
    for (size_t s = first + 1; s < call->nseg; s++) {
        const nf_seg_t *g = &call->seg[s];
        if (!nf_route_lowbit(g->route))
            continue;
        uint64_t b = bytes / whole * nf_share_of(g, scales) +
                     bytes % whole * nf_share_of(g, scales) / whole;
        nf_stats_internode(g->route, b);
        left -= b;
    }
    nf_stats_internode(call->seg[first].route, left);
}

/* nsc > 0: the node's one rank's scales (c->mine) ride after its counts,
 * padded to a line, and every node's land in c->scales (leaders are in
 * rank order, each its node's only rank: node j's are rank j's). */
static nf_status_t nf_counts_whole(nf_comm_t *c, const nf_call_t *call, uint64_t *cnt,
                                   size_t nlines, unsigned nsc)
{
    size_t sw = nf_scale_lines(nsc) * NF_LINE_WORDS, w = nlines * c->kn * NF_LINE_WORDS + sw;
    uint64_t *send = c->xnode, *recv = send + w, *tmp = recv + (size_t)c->nnodes * w;
    nf_narrow(c, cnt, 0, nlines, send);
    if (sw > 0) {
        memset(send + w - sw, 0, sw * sizeof(uint64_t));
        memcpy(send + w - sw, c->mine, nsc * sizeof(double));
    }
    int n = (int)(w / NF_LINE_WORDS);
    nf_status_t st = nf_mpi_status(PMPI_Allgather(send, n, nf_ctx.line_type, recv, n,
                                                  nf_ctx.line_type, c->leaders));
    if (st != NF_OK)
        return st;
    nf_merge_nodes(c, recv, w, nlines, cnt, tmp);
    for (int j = 0; sw > 0 && j < c->nnodes; j++)
        memcpy(c->scales + (size_t)j * nsc, recv + (size_t)j * w + (w - sw),
               nsc * sizeof(double));
    nf_lowbit_bytes(call, (uint64_t)(c->nnodes - 1) * (w - sw) * sizeof(uint64_t), 0);
    if (sw > 0)
        nf_lowbit_bytes(call, (uint64_t)(c->nnodes - 1) * sw * sizeof(uint64_t), 1);
    return NF_OK;
}

static nf_status_t nf_counts_split(nf_comm_t *c, const nf_call_t *call, uint64_t *cnt,
                                   size_t nlines)
{
    int p = c->nnodes, me = nf_me(c);
    int *sc = c->xv, *sd = sc + p, *rc = sd + p, *rd = rc + p;
    size_t bmax;
    nf_blocks(c, nlines, c->kn, sc, sd, &bmax);
    uint64_t *send = c->xnode, *recv = send + nlines * c->kn * NF_LINE_WORDS;
    uint64_t *tmp = recv + (size_t)p * bmax * c->kn * NF_LINE_WORDS;
    size_t m0 = nf_blk(nlines, p, me), mn = nf_blk(nlines, p, me + 1) - m0;
    nf_narrow(c, cnt, 0, nlines, send);
    for (int j = 0; j < p; j++)
        rc[j] = sc[me], rd[j] = (int)((size_t)j * bmax * c->kn);
    nf_status_t st = nf_mpi_status(PMPI_Alltoallv(send, sc, sd, nf_ctx.line_type, recv, rc, rd,
                                                  nf_ctx.line_type, c->leaders));
    if (st != NF_OK)
        return st;
    nf_merge_nodes(c, recv, bmax * c->kn * NF_LINE_WORDS, mn, cnt + m0 * c->k * NF_LINE_WORDS,
                   tmp);
    uint64_t sent = ((uint64_t)(nlines - mn) * c->kn + (uint64_t)(p - 1) * mn * c->k) *
                    NF_LINE_BYTES;
    nf_blocks(c, nlines, c->k, sc, sd, &bmax);
    st = nf_mpi_status(PMPI_Allgatherv(MPI_IN_PLACE, 0, nf_ctx.line_type, cnt, sc, sd,
                                       nf_ctx.line_type, c->leaders));
    if (st == NF_OK)
        nf_lowbit_bytes(call, sent, 0);
    return st;
}

/* Two one-rank nodes' counts cross point-to-point, the scales first, then
 * the lines in messages of NF_CPAIR_LINES (nf_traffic.h: 32 KiB of
 * one-plane lines, 256 Ki elements), NF_CPAIR_DEPTH of them in flight,
 * each merged and handed to the caller as it arrives: the finish runs
 * while the wire carries the rest. The bytes are the whole exchange's (the
 * scales padded to lines). */
#define NF_CPAIR_DEPTH 8u
#define NF_CPAIR_TAG 7302

int nf_xnode_counts_streamed(const nf_comm_t *c, size_t nlines)
{
    return c->nnodes == 2 && c->size == 2 && nlines > NF_CPAIR_LINES;
}

/* Step k waits for message k - depth (the scales before the first), merges
 * its lines and hands them on, then posts message k in its slot. After an
 * error on this rank the messages still cross (the peer waits for them)
 * but nothing more is merged or handed on. */
nf_status_t nf_xnode_counts_stream(nf_comm_t *c, const nf_call_t *call, const uint64_t *mine,
                                   uint64_t *cnt, size_t nlines, unsigned nsc,
                                   nf_xnode_ready_t ready, void *arg)
{
    int me = nf_me(c), peer = 1 - me, rc = MPI_SUCCESS;
    size_t sw = nf_scale_lines(nsc) * NF_LINE_WORDS, L = NF_CPAIR_LINES;
    size_t nk = (nlines + L - 1) / L, depth = NF_CPAIR_DEPTH;
    uint64_t *ssend = c->xnode, *srecv = ssend + sw, *recv = srecv + sw;
    MPI_Request rq[2 + 2 * NF_CPAIR_DEPTH];
    MPI_Status st[2];
    memset(ssend, 0, sw * sizeof(uint64_t));
    memcpy(ssend, c->mine, nsc * sizeof(double));
    rq[0] = rq[1] = MPI_REQUEST_NULL;
    int a = PMPI_Irecv(srecv, (int)(sw / NF_LINE_WORDS), nf_ctx.line_type, peer, NF_CPAIR_TAG,
                       c->leaders, rq);
    int b = PMPI_Isend(ssend, (int)(sw / NF_LINE_WORDS), nf_ctx.line_type, peer, NF_CPAIR_TAG,
                       c->leaders, rq + 1);
    rc = a != MPI_SUCCESS ? a : b;
    for (size_t k = 0; k < nk + depth; k++) {
        MPI_Request *slot = rq + 2 + 2 * (k % depth);
        if (k >= depth && k - depth < nk) {
            size_t l0 = (k - depth) * L, n = nlines - l0 < L ? nlines - l0 : L;
            const uint64_t *in[2];
            if (k == depth) {
                rc = nf_first_error(rc, PMPI_Waitall(2, rq, st), st, 2);
                memcpy(c->scales + (size_t)me * nsc, c->mine, nsc * sizeof(double));
                memcpy(c->scales + (size_t)peer * nsc, srecv, nsc * sizeof(double));
            }
            rc = nf_first_error(rc, PMPI_Waitall(2, slot, st), st, 2);
            in[me] = mine + l0 * NF_LINE_WORDS;
            in[peer] = recv + l0 * NF_LINE_WORDS;
            if (rc == MPI_SUCCESS) {
                nf_ctx.k->count_sum(cnt + l0 * c->k * NF_LINE_WORDS, c->k, in, 2u, n);
                ready(arg, l0 + n);
            }
        }
        if (k < nk) {
            size_t l0 = k * L, n = nlines - l0 < L ? nlines - l0 : L;
            slot[0] = slot[1] = MPI_REQUEST_NULL;
            a = PMPI_Irecv(recv + l0 * NF_LINE_WORDS, (int)n, nf_ctx.line_type, peer,
                           NF_CPAIR_TAG, c->leaders, slot);
            b = PMPI_Isend(mine + l0 * NF_LINE_WORDS, (int)n, nf_ctx.line_type, peer,
                           NF_CPAIR_TAG, c->leaders, slot + 1);
            rc = rc != MPI_SUCCESS ? rc : a != MPI_SUCCESS ? a : b;
        }
    }
    if (rc != MPI_SUCCESS)
        return nf_mpi_status(rc);
    nf_lowbit_bytes(call, (uint64_t)nlines * NF_LINE_BYTES, 0);
    nf_lowbit_bytes(call, (uint64_t)sw * sizeof(uint64_t), 1);
    return NF_OK;
}

int nf_xnode_scales_ride(const nf_comm_t *c, size_t nlines, unsigned nsc)
{
    return c->nnodes > 1 && c->size == c->nnodes &&
           nf_traffic_counts_whole(nlines, nf_scale_lines(nsc), c->kn, c->k, c->nnodes);
}

/* Whole, a leader sends (p-1) kn planes; split, (p-1)/p (kn + k): whole
 * wins when p kn <= kn + k (two nodes of a few ranks each), besides taking
 * one step. */
nf_status_t nf_xnode_counts(nf_comm_t *c, const nf_call_t *call, uint64_t *cnt, size_t nlines,
                            unsigned nsc)
{
    if (nsc > 0 || nf_traffic_counts_whole(nlines, 0, c->kn, c->k, c->nnodes))
        return nf_counts_whole(c, call, cnt, nlines, nsc);
    return nf_counts_split(c, call, cnt, nlines);
}
