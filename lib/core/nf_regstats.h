/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-region counters (regstats.c): calls, elements and traffic per route
 * for every bound region a call reduced, for the stats report. Bounded:
 * past NF_REGSTATS_MAX names, further regions are counted under "(other)". */
#ifndef NF_REGSTATS_H
#define NF_REGSTATS_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "nfcoll.h"

#define NF_REGSTATS_MAX 1024

/* A region segment's call, by the region's interned id (nf_intern.h):
 * the route it ran on and, when that is not the route it was given, why
 * (an nf_fallback_t; NF_FALLBACK_NONE when it ran as given). */
void nf_regstats_add(uint32_t id, nf_route_t route, uint64_t elements, uint64_t upstream,
                     uint64_t total, int fallback);

/* Why a region runs the route admission gives it (nf_decide.h's reason,
 * in words and figures), recorded when admission decides a region's
 * segment anew; the stats' "admission" record prints the last. Strings are
 * cut to their room (a path keeps its tail). */
typedef struct nf_rs_why {
    nf_route_t route;        /* admission's route, before health and fallbacks */
    char by[16];             /* rule, profile, no-entry, stale-entry, calibrate */
    char rule[64];           /* the rule that matched */
    char where[192];         /* its file:line ("" for the built-in default) */
    char entry[192];         /* profile, stale-entry: the profile entry's file:line */
    uint64_t entry_elements; /* its element count */
    double cos_binary, cos_ternary; /* its figures (NAN without an entry) */
    double cos_int4;         /* its int4 cosine, what admits int4 (NAN without an entry
                                or in a v1 or v2 profile's) */
    double admit_cosine;     /* the policy's admit_cosine */
    uint64_t warmup;         /* the rule's warmup (calls on fp32 first; 0: none) */
    double lag_cosine;       /* the entry's lag cosine (NAN: none) */
    double ef_decay;         /* the decay that runs (NAN: error feedback off, or a route
                                without a residual) */
    char decay_by[12];       /* rule, profile, settings, calibrate, ef-off; "": a route
                                without a residual (nf_decide_params) */
    long scale_block;        /* elements per binary scale (0: one per segment; -1: not
                                binary) */
    char block_by[12];       /* rule, settings; "": not binary */
    long block;              /* integer routes: elements per scale block (-1: not an
                                integer route) */
    char int_block_by[12];   /* rule, default; "": not an integer route */
} nf_rs_why_t;
void nf_regstats_why(uint32_t id, const nf_rs_why_t *w);

/* Health events by signal, per segment name (a region, or buffer:BYTES). */
typedef enum nf_health_signal {
    NF_HEALTH_NONFINITE = 0,
    NF_HEALTH_EF_GROWTH,
    NF_HEALTH_LOSS_SPIKE,
    NF_HEALTH_N
} nf_health_signal_t;
const char *nf_health_signal_name(nf_health_signal_t s);
/* A cool-down of a segment starts at the communicator's call index call;
 * and the segment runs its route again (re-enters) at call. */
void nf_regstats_health(const char *name, nf_health_signal_t signal, uint64_t call);
void nf_regstats_reentry(const char *name, uint64_t call);
/* The segment ran call on fp32 for its rule's warm-up. */
void nf_regstats_warmup(const char *name, uint64_t call);

/* Collective over comm: rank 0 gets every rank's counters summed by name.
 * Then the table's text and JSON (an object keyed by region name) on fp. */
nf_status_t nf_regstats_gather(MPI_Comm comm);
void nf_regstats_table(FILE *fp);
void nf_regstats_json(FILE *fp);
void nf_regstats_health_table(FILE *fp);
void nf_regstats_health_json(FILE *fp);
/* Per region, why it ran where it ran: admission's reason, health's
 * cool-downs and re-entries, the runner's fallbacks. */
void nf_regstats_why_table(FILE *fp);
void nf_regstats_why_json(FILE *fp);

void nf_regstats_reset(void);

#endif
