/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_replay --link (replay_time.c): each traced call's time predicted
 * per route under a link, from the codec rates measured on this machine
 * (nf_codec.h) and the bytes that cross nodes (nf_traffic_internode), and
 * the call size from which each low-bit route beats the exact one.
 * docs/design.md, "Predicting a call's time". No MPI.
 */
#ifndef NF_REPLAY_TIME_H
#define NF_REPLAY_TIME_H

#include <stdint.h>
#include <stdio.h>

#include "nf_codec.h"
#include "nf_traffic.h"
#include "nfcoll.h"

typedef struct replay_link {
    double bw;        /* bytes per second, each way, per node */
    double lat;       /* seconds per exchange */
    double burst;     /* bytes a token bucket lets through at once (0: none) */
    unsigned per_node; /* ranks per node (1 unless --ranks-per-node) */
} replay_link_t;

/* "RATE[,LATENCY[,BURST]]": RATE in tc's units (bit, kbit, mbit, gbit,
 * tbit: bits per second; bps, kbps, mbps, gbps, tbps: bytes per second;
 * k = 1000), LATENCY in s, ms or us (a number alone: seconds; default 0),
 * BURST in tc's sizes (b, kb, mb: 1024; default 0: no token bucket). 0, or
 * 1 with the reason in err. */
int replay_link_parse(const char *spec, replay_link_t *l, char *err, size_t errlen);

/* The calls of one size decided one way: the parts (routes, bytes and
 * scales), and how many rank records of such a call came (each rank traces
 * a call: records / ranks is the number of calls when every rank's trace
 * is read). */
typedef struct replay_tcall {
    uint64_t bytes, records;
    unsigned ranks;
    nf_wire_part_t *part; /* as decided */
    size_t npart;
    unsigned area;        /* words of the verdict's area (one rank per node),
                             from the calls before on its communicator */
} replay_tcall_t;

/* A rank's communicator: the needs of its last calls (nf_inline_hist_t). */
typedef struct replay_stream {
    uint64_t key;
    nf_inline_hist_t hist;
} replay_stream_t;

typedef struct replay_times {
    replay_tcall_t *call; /* by (bytes, ranks, decision) */
    size_t n, cap;
    size_t *slot, nslot;  /* their index */
    nf_wire_part_t *cur;  /* the call being added */
    size_t ncur, capcur;
    uint64_t cur_bytes;
    unsigned cur_ranks;
    uint64_t cur_key;
    replay_stream_t *stream; /* by key, in order of first use */
    size_t nstream, capstream, last; /* last: the stream used last */
    int open;
    unsigned ranks;       /* after the end: replay_times_ranks */
} replay_times_t;

/* A rank's record of a traced call begins (the previous one, if any, is
 * kept); its parts follow, one per segment or one for the whole call, with
 * the route the replay counted. key: the rank and communicator, whose
 * calls come in their order (the verdict's area follows them). Exit
 * without memory. */
void replay_times_begin(replay_times_t *t, uint64_t bytes, unsigned ranks, uint64_t key);
void replay_times_part(replay_times_t *t, nf_route_t route, uint64_t bytes, uint64_t nsc);
/* After the last call: keep it, sort the sizes, find the ranks. */
void replay_times_end(replay_times_t *t);
void replay_times_free(replay_times_t *t);

/* The ranks the codec's reduce stage should be measured with: the most
 * common communicator size among the calls (by records), within [2, 64];
 * valid after replay_times_end. */
unsigned replay_times_ranks(const replay_times_t *t);

/* Seconds a call of bytes on route takes over l with these codec rates on
 * ranks ranks (nsc scales each); pmpi is Open MPI's ring with fp32's sum. */
double replay_time_route(const replay_link_t *l, const nf_codec_rates_t *r, nf_route_t route,
                         uint64_t bytes, unsigned ranks, uint64_t nsc);

/* Text: a line per call size, predicted ms per route and as decided; the
 * trace's total per route; the crossovers. JSON: the "link" object's
 * members. */
void replay_times_table(FILE *fp, const replay_times_t *t, const replay_link_t *l,
                        const nf_codec_rates_t *r);
void replay_times_json(FILE *fp, const replay_times_t *t, const replay_link_t *l,
                       const nf_codec_rates_t *r, const char *indent);

#endif
