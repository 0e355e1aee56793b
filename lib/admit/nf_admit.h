/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Admission (admission.c): which route a call takes and why. Asks the
 * policy (loaded once at init), applies what only libnfcoll knows (the
 * call cannot take a route on this communicator, ranks hold different
 * policies) and caches each communicator's decisions. Decisions use only
 * what every rank sees alike. docs/design.md, "Admission".
 */
#ifndef NF_ADMIT_H
#define NF_ADMIT_H

#include <mpi.h>
#include <stdint.h>

#include "nf_coll.h"
#include "nf_comm.h"
#include "nf_health.h"
#include "nf_policy.h"
#include "nf_settings.h"

/* Load the policy at path (NULL: none). A policy that does not load leaves
 * every call on pmpi: the parser has said why (file:line), this adds what
 * it means. Opens the trace (NFCOLL_TRACE wins over the policy's). */
void nf_admit_init(const nf_settings_t *s, int rank);
void nf_admit_finalize(void);

const nf_policy_t *nf_admit_policy(void);
/* What ranks compare: 0 without a policy, a fixed value for one that failed
 * to load (so it differs from both), else the policy's hash. */
uint64_t nf_admit_hash(void);
/* Whether this rank wants calls admitted: a policy (even one that failed
 * to load: then its hash differs and every call takes pmpi) or a trace. */
int nf_admit_wanted(void);
/* Where stats go: NFCOLL_STATS wins over the policy's `stats`. */
const char *nf_admit_stats_dest(const nf_settings_t *s);

typedef struct nf_decision {
    nf_route_t route;  /* of the whole call (fp32 for a fused one) */
    uint64_t bytes;    /* count * type size, from the cache */
    nf_seg_t *seg;     /* what to run: &one, or a fused call's segments
                          (valid until the communicator's next call) */
    size_t nseg;
    nf_seg_t one;      /* an unfused call: one segment, the whole buffer */
    nf_seg_note_t *note; /* admission's notes of seg: &one_note, or a plan's */
    nf_seg_note_t one_note;
    int fused;
    int calibrate;     /* run it with nf_calib_run (nf_calib.h) */
    int health;        /* health watches this call: measure and exchange */
    double loss;       /* this rank's reported loss to exchange, NAN if none */
    double loss_mean;  /* filled by the run: the ranks' mean loss */
    uint64_t call;     /* the communicator's call index */
    const void *entry; /* admission's record of the decision, for the trace */
} nf_decision_t;

/* Decide the route of one call on c, whose input buffer is x (counted as
 * the communicator's next call for `calls` rules). Run it with
 * nf_run_plan(c, args, d->seg, d->nseg), then nf_admit_after. */
void nf_admit_decide(nf_comm_t *c, const void *x, int count, MPI_Datatype datatype, MPI_Op op,
                     nf_decision_t *out);

/* After the run (st its status): health observes the signals, then the
 * trace. */
void nf_admit_after(nf_comm_t *c, nf_decision_t *d, nf_status_t st);

#endif
