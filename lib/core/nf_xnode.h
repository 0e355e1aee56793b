/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What node leaders exchange across nodes over PMPI (xnode.c): the call's
 * verdict, fp32 node sums and low-bit node counts. Only local rank 0 of a
 * communicator with several nodes calls these; it then publishes the result
 * to its node through the segment (nf_flags.h). docs/design.md, "Protocol".
 */
#ifndef NF_XNODE_H
#define NF_XNODE_H

#include <stddef.h>
#include <stdint.h>

#include "nf_coll.h"
#include "nf_comm.h"

/* A call's verdict: some count differs (MPI_ERR_COUNT on every rank), or
 * every rank called with the same layout (anything else: all fp32). */
#define NF_V_SAME 1u
#define NF_V_COUNT 2u

/* NF_XNODE_WHOLE_MAX, what crosses whole: nf_traffic.h, whose
 * nf_traffic_internode() models these exchanges' bytes. */

/* Leaders' private scratch for a segment of cap low-bit elements and fp32
 * chunks of chunk floats. */
size_t nf_xnode_bytes(const nf_comm_t *c, size_t cap, size_t chunk);

/* Two one-rank nodes: the verdict goes point-to-point, and each node's
 * area is its own call's (nf_pair_area_words), not the history's; past
 * NF_PAIR_EAGER_BYTES the payload's rest follows in tail messages. */
int nf_xnode_pair(const nf_comm_t *c);
/* Completes or leaves to MPI the pair's tails still in flight, and frees
 * their staging (at the communicator's end). */
void nf_xnode_tails_free(nf_comm_t *c);
/* Where this leader builds its verdict payload, in the scratch, before
 * nf_xnode_verdict: {count, layout hash, local verdict, need}, and with one
 * rank on every node, padded to a line, then the rank's area of c->varea
 * words (its call's data when the call rides inline, else zeros). */
uint64_t *nf_xnode_payload(const nf_comm_t *c);
/* Sends the payload, gets every node's. need: the bytes of area the call
 * would fill (nf_traffic_inline_need). *v: the verdict of all; *inl:
 * NF_V_SAME and every node's need fits the area, so every node's data came
 * (nf_xnode_area). Several one-rank nodes: the largest need goes into
 * c->ihist, which sizes the next call's area alike on every rank. */
nf_status_t nf_xnode_verdict(nf_comm_t *c, uint64_t *v, int *inl);
/* Node j's area of the last verdict (line-aligned; node j is rank j when
 * every node has one rank), until the next exchange. */
const uint64_t *nf_xnode_area(const nf_comm_t *c, int j);

/* res: this node's sum of len floats; becomes the node-order sum of all
 * nodes' sums. */
nf_status_t nf_xnode_fp32(nf_comm_t *c, float *res, size_t len);
/* Whether nf_xnode_fp32 sends len floats whole (one allgather). */
int nf_xnode_fp32_whole(const nf_comm_t *c, size_t len);
/* Whether nf_xnode_fp32_from takes a run of n floats: two nodes always
 * (point-to-point), more when chunks of c->fp32_chunk cross whole. */
int nf_xnode_fp32_direct(const nf_comm_t *c, size_t n);
/* One rank on every node: res (which may be in) becomes the node-order sum
 * of every node's n floats of in. */
nf_status_t nf_xnode_fp32_from(nf_comm_t *c, const float *in, float *res, size_t n);

/* Whether a call's nsc scales ride with its counts of nlines lines (every
 * node has one rank and the counts with them cross whole: one exchange
 * fewer); the same on every rank. */
int nf_xnode_scales_ride(const nf_comm_t *c, size_t nlines, unsigned nsc);

/* cnt: this node's counters of nlines lines (k planes each, at most
 * c->kn of them set); becomes the counters of all nodes. nsc > 0 (only
 * when nf_xnode_scales_ride): the rank's nsc scales at c->mine go along,
 * and c->scales gets every rank's, rank-major, as nf_gather_scales would
 * leave them. call attributes the bytes sent to its segments' routes. */
nf_status_t nf_xnode_counts(nf_comm_t *c, const nf_call_t *call, uint64_t *cnt, size_t nlines,
                            unsigned nsc);

/* Whether nf_xnode_counts_stream takes a call's nlines count lines: two
 * one-rank nodes (kn = 1: a rank's packed lines are its node's counts) and
 * more lines than one message holds; the same on every rank. */
int nf_xnode_counts_streamed(const nf_comm_t *c, size_t nlines);
/* Lines [0, done) of cnt hold every node's counts (and c->scales every
 * rank's); called in order, the last time with done = nlines. */
typedef void (*nf_xnode_ready_t)(void *arg, size_t done);
/* Two one-rank nodes: my nsc scales at c->mine and my nlines packed lines
 * at mine go to the peer as nf_xnode_counts would send them, and cnt's
 * lines (k planes) become both nodes' counts a message at a time, each
 * handed to ready as it arrives; c->scales gets both ranks' scales before
 * the first. On error nothing more is handed on. */
nf_status_t nf_xnode_counts_stream(nf_comm_t *c, const nf_call_t *call, const uint64_t *mine,
                                   uint64_t *cnt, size_t nlines, unsigned nsc,
                                   nf_xnode_ready_t ready, void *arg);
#endif
