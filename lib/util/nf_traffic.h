/* SPDX-License-Identifier: BSD-3-Clause */
/* What one allreduce call moves per rank, by route (traffic.c): the model
 * the stats count and nfcoll_replay recomputes. docs/design.md,
 * "Observability". No MPI. */
#ifndef NF_TRAFFIC_H
#define NF_TRAFFIC_H

#include <stdint.h>
#include <stdio.h>

#include "nf_kernels.h"
#include "nfcoll.h"

typedef struct nf_traffic {
    uint64_t upstream, total, ring;
} nf_traffic_t;

/* Bytes per rank for a call of `bytes` of user data on n ranks whose
 * counters have k planes (nf_count_planes(n)). */
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t);
/* The same with nsc scales per rank instead of one (integer routes: nsc
 * block maxes; binary's scale_block:
 * nf_traffic_scales). */
void nf_traffic_model_scales(nf_route_t route, uint64_t bytes, unsigned n, unsigned k,
                             uint64_t nsc, nf_traffic_t *t);
/* Scales a segment of bytes sends on route with scale_block block (0: one
 * per segment; binary cuts it into blocks), or an integer route's block
 * maxes with its block (0: NF_INT_BLOCK_DEFAULT). */
uint64_t nf_traffic_scales(nf_route_t route, uint64_t bytes, uint64_t block);

/* Node payloads of at most this many bytes cross nodes whole (one
 * allgather, every leader reduces every node's copy); larger ones by
 * reduce-scatter and allgather, so a leader sends at most 2 (p-1)/p of them,
 * unless whole sends no more (lib/core/xnode.c). */
#define NF_XNODE_WHOLE_MAX (32u * 1024u)
/* The words of a call's header, which leaders exchange for the verdict. */
#define NF_HDR_WORDS 4
/* With one rank on every node the verdict's exchange is a line of header
 * (NF_HDR_WORDS, padded) and an area, where a call whose lines, scales and
 * fp32 elements fit (laid out as a small call's area on one node) travels
 * whole: it crosses nodes in that one exchange. The area's size must be
 * the same on every rank and cannot depend on the layout the verdict is
 * there to check, so it follows the communicator's past calls, which every
 * rank saw alike (each header carries its call's need): the largest need
 * of the last NF_INLINE_HIST calls that fits NF_INLINE_MAX_WORDS, in whole
 * lines, and at least NF_INLINE_WORDS (docs/design.md, "Protocol"). */
#define NF_INLINE_WORDS 56
#define NF_INLINE_MAX_WORDS 1024
#define NF_INLINE_HIST 8
/* Two one-rank nodes exchange the verdict point-to-point (lib/core/xnode.c),
 * so each sends the area its own call needs, not the history's: a call
 * rides inline when it is all fp32 and needs at most NF_PAIR_INLINE_BYTES,
 * or has low-bit lines and needs at most NF_INLINE_MAX_WORDS words (their
 * counts go where a small call's do). Up to 128 KiB, in eager messages
 * (below), that beat the verdict's round trip and the pipelined exchange
 * after it unshaped and at 10 Gbit/s (0.67-0.87x the time at 96-128 KiB),
 * and matched them at 1 Gbit/s; at 128 KiB fp32 already takes 0.57-0.60x
 * MPI_Allreduce's time, and larger calls were not tried inline this way
 * (docs/benchmarks.md).
 * nf_pair_area_words: the words a call's verdict carries. */
#define NF_PAIR_INLINE_BYTES (128u * 1024u)
/* The most of a pair's verdict payload that goes in one message: MPI
 * sends a message up to its eager limit at once, a larger one after a
 * round trip (rendezvous). Open MPI's TCP transport's is 64 KiB with its
 * own headers (btl_tcp_eager_limit). 512 bytes are left, not 128: once
 * a TCP connection has carried bulk transfers, plain MPI_Sendrecv of
 * 65152-65408 bytes took over 1 ms in 9-18 calls of 500 (up to 2.9 ms;
 * 44 ms behind a small message, as a call with a tail sends it), and the
 * verdict of 65408 bytes up to 60 ms; none of 500 of 65088 bytes did (10
 * Gbit/s; docs/benchmarks.md, "The verdict's message under 65088 bytes").
 * A larger payload's rest (up to 64 KiB + 576 bytes: a 128 KiB call's)
 * follows in tail messages of at most this size, each behind a word
 * {group, index, count} (lib/core/xnode.c), which, like MPI's own headers,
 * internode_bytes and this model leave out. A 64 KiB call in one message
 * of 65600 bytes took 1.27x (unshaped) and 1.11x (10 Gbit/s)
 * MPI_Allreduce's time, one of 65024 bytes 0.57x and 0.60x; cut at 65408
 * bytes, 0.78x and 0.71x, and at 65024, 0.69x and 0.79x
 * (docs/benchmarks.md). */
#define NF_PAIR_EAGER_BYTES (64u * 1024u - 512u)
/* The floats of one of two nodes' fp32 eager messages (lib/core/xnode.c,
 * nf_fp32_pair; tools/replay_time.c streams the sum by them). */
#define NF_PAIR_MSG (NF_PAIR_EAGER_BYTES / sizeof(float))
/* The payload past the verdict's message, at most, and the tail messages
 * that carry it (each that word and up to NF_PAIR_EAGER_BYTES - 8 bytes). */
#define NF_PAIR_TAIL_BYTES (NF_LINE_BYTES + NF_PAIR_INLINE_BYTES - NF_PAIR_EAGER_BYTES)
#define NF_PAIR_TAILS \
    ((NF_PAIR_TAIL_BYTES + NF_PAIR_EAGER_BYTES - 9u) / (NF_PAIR_EAGER_BYTES - 8u))
#define nf_pair_area_words(lines, need) \
    ((need) <= ((lines) > 0 ? NF_INLINE_MAX_WORDS * 8u : (uint64_t)NF_PAIR_INLINE_BYTES) \
         ? ((need) + NF_LINE_BYTES - 1) / NF_LINE_BYTES * NF_LINE_WORDS \
         : 0u)
#define nf_verdict_words(one_per_node, area) \
    ((one_per_node) ? NF_LINE_WORDS + (uint64_t)(area) : (uint64_t)NF_HDR_WORDS)
/* Lines that nsc scales (doubles) take after a call's lines. */
#define nf_scale_lines(nsc) (((uint64_t)(nsc) * 8u + NF_LINE_BYTES - 1) / NF_LINE_BYTES)
/* The bytes of the area a call of these low-bit lines, scale lines, fp32
 * and bf16 elements needs to ride with the verdict; NF_INLINE_NONE: it
 * cannot (bf16). lib/core/coll.c decides so, this model too. */
#define NF_INLINE_NONE UINT64_MAX
#define nf_traffic_inline_need(lines, slines, fp32, bf16) \
    ((bf16) != 0 ? NF_INLINE_NONE \
                 : ((uint64_t)(lines) + (slines)) * NF_LINE_BYTES + (uint64_t)(fp32) * sizeof(float))

/* The needs of a communicator's last NF_INLINE_HIST calls (0: none, or
 * larger than NF_INLINE_MAX_WORDS allows). Zeroed: a new communicator. */
typedef struct nf_inline_hist {
    uint64_t need[NF_INLINE_HIST];
    unsigned at;
} nf_inline_hist_t;
/* Words of the area the next call's verdict carries. */
unsigned nf_inline_words(const nf_inline_hist_t *h);
/* A call's verdict went by; need: the largest of its nodes' needs. */
void nf_inline_note(nf_inline_hist_t *h, uint64_t need);
/* The area of a call among calls of its own need (what a steady stream of
 * them sends). */
unsigned nf_inline_steady(uint64_t need);
/* Whether the node counts of `lines` lines (kn planes each, k after the
 * merge, p nodes) cross whole, with `extra` lines more (the scales, when
 * they ride along): lib/core/xnode.c decides so, this model too. */
#define nf_traffic_counts_whole(lines, extra, kn, k, p) \
    (((uint64_t)(lines) * (kn) + (extra)) * NF_LINE_BYTES <= NF_XNODE_WHOLE_MAX || \
     (uint64_t)(p) * (kn) <= (uint64_t)(kn) + (k))

/* What leaves one node for one call: bytes (the leader's exchanges, and
 * the scales every rank of the node sends to the ranks elsewhere) and the
 * exchanges that wait for each other (steps, each at least a latency). */
typedef struct nf_wire {
    uint64_t bytes;
    unsigned steps;
    uint64_t stream; /* count lines that stream, finished as they arrive
                        (two one-rank nodes, more than NF_CPAIR_LINES); 0: none */
} nf_wire_t;

/* Count lines per message of two one-rank nodes' streamed counts
 * (lib/core/xnode.c, nf_xnode_counts_stream): a call with more lines
 * sends them point-to-point, the finish running as they arrive. */
#define NF_CPAIR_LINES 512u

/* Floats per fp32 chunk across nodes at most (2 MiB): each chunk is one
 * exchange among leaders (lib/core/coll.c pipelines them), and over TCP a
 * 512 KiB exchange costs several times its wire time (2 hosts x 2 ranks,
 * 10 Gbit/s, 16 MiB: 0.5 MiB chunks 0.76x pmpi's speed, 1 MiB 0.82-1.33x,
 * 2 MiB 1.16-1.18x, 4 MiB 0.71-0.88x). */
#define NF_FP32_CHUNK_XNODE (512u * 1024u)

/* One part of a call: a segment, or the whole buffer, on its route. */
typedef struct nf_wire_part {
    nf_route_t route;
    uint64_t bytes, nsc; /* its bytes, and its scales per rank (integer routes:
                            its block maxes, nf_traffic_scales) */
} nf_wire_part_t;

/* A call cut into n parts across p nodes of r ranks each (p >= 2; fewer:
 * nothing crosses), as lib/core/coll.c and xnode.c send it: one verdict
 * (r = 1: with an area of `area` words, two nodes nf_pair_area_words
 * instead, and the whole call in it when it fits, and nothing else); the low-bit parts' scales from every rank, then their count lines
 * in one exchange (r = 1 and whole: the scales at its end); the fp32 parts'
 * floats, then the bf16 parts' (their sums are
 * floats between nodes), each in chunks of at most NF_FP32_CHUNK_XNODE. A
 * pmpi part makes the call pmpi's: a ring allreduce over the p r ranks
 * (Open MPI's schedule for large calls). What one node sends: NFCOLL_STATS's
 * internode_bytes, summed over the ranks, is p times it. Not modelled: the
 * per-segment figures health adds to the scales, and what a call that
 * falls back at run time sends again (with two one-rank nodes, a call
 * whose ranks' layouts differ also sent each rank's own area). */
/* The words of area a call's verdict carries across p nodes of r ranks:
 * two one-rank nodes, nf_pair_area_words of its own need; else `area`,
 * what the communicator's history gave (nf_inline_words). */
unsigned nf_traffic_area(const nf_wire_part_t *part, size_t n, unsigned p, unsigned r,
                         unsigned area);
void nf_traffic_internode_call(const nf_wire_part_t *part, size_t n, unsigned p, unsigned r,
                               unsigned area, nf_wire_t *w);
/* The need (nf_traffic_inline_need) of a call cut into these parts;
 * NF_INLINE_NONE for a pmpi call, which sends no verdict. */
uint64_t nf_traffic_inline_need_call(const nf_wire_part_t *part, size_t n);
/* One part: a whole call of bytes on route with nsc scales per rank, among
 * calls of its own size (nf_inline_steady). */
void nf_traffic_internode(nf_route_t route, uint64_t bytes, unsigned p, unsigned r, uint64_t nsc,
                          nf_wire_t *w);

/* Count one call of bytes on route into s[route], as NFCOLL_STATS does. */
void nf_traffic_count(nf_route_stats_t s[NF_ROUTE_COUNT], nf_route_t route, uint64_t bytes,
                      unsigned n, unsigned k);
void nf_traffic_count_scales(nf_route_stats_t s[NF_ROUTE_COUNT], nf_route_t route,
                             uint64_t bytes, unsigned n, unsigned k, uint64_t nsc);

/* The stats' writers (stats.c; nfcoll_replay): the route table, a line per
 * route, with an internode column when internode is not NULL and an "all"
 * line when all is set; and the JSON "routes" object's members. */
void nf_traffic_table(FILE *fp, const nf_route_stats_t s[NF_ROUTE_COUNT],
                      const uint64_t *internode, int all);
void nf_traffic_json(FILE *fp, const nf_route_stats_t s[NF_ROUTE_COUNT], const char *indent);
/* s as a JSON string, quotes and escapes included. */
void nf_json_str(FILE *fp, const char *s);

#endif
