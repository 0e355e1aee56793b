/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Training-health monitoring (health.c): per communicator and low-bit
 * segment, signals agreed across ranks (a NaN or Inf, error-feedback
 * growth, a loss spike) send the segment to fp32 for a cool-down, then back
 * to its route; a repeat doubles the cool-down up to a cap.
 * docs/design.md, "Health".
 */
#ifndef NF_HEALTH_H
#define NF_HEALTH_H

#include <stdint.h>

#include "nf_coll.h"
#include "nf_decide.h"
#include "nf_policy.h"
#include "nf_regstats.h" /* nf_health_signal_t */
#include "nf_segstate.h"
#include "nf_util.h"

/* Process-wide: the policy's settings (NULL or health off: nothing
 * watched) and the loss reports waiting for the next low-bit call. */
void nf_health_init(const nf_policy_health_t *cfg);
int nf_health_on(void);
void nf_health_report(double loss);
/* The loss reported since the last call took it, NAN when none. */
double nf_health_take_loss(void);

/* What admission keeps of a segment besides core's nf_seg_t, one per
 * segment of a decision. */
typedef struct nf_seg_note {
    nf_route_t asked;     /* the route before a warm-up or health cool-down */
    int warmup;           /* runs fp32 for a warm-up (nf_warmup.h) */
    int cooling;          /* runs fp32 for a health cool-down */
    const char *health;   /* the signal of that cool-down, "reentry" on the first
                             call back on its route after one, or NULL */
    nf_decide_reason_t why; /* why admission gave it its route (kept with a plan) */
} nf_seg_note_t;

typedef struct nf_health_comm nf_health_comm_t;
/* A communicator's health, its segments' cool-downs in segs's records. */
nf_health_comm_t *nf_health_comm_new(nf_segstate_t *segs);
void nf_health_comm_free(nf_health_comm_t *h);
/* Cool-downs (the health part of the records) and the loss window in a
 * residual checkpoint, and back (commit 0 checks, h may be NULL; commit 1
 * replaces them). NF_ERR_PARSE on
 * malformed input or a loss window of another length than the policy's,
 * NF_ERR_NO_MEMORY (commit). */
void nf_health_comm_save(const nf_health_comm_t *h, nf_wbuf_t *b);
nf_status_t nf_health_comm_load(nf_health_comm_t *h, nf_rbuf_t *r, int commit);

/* Before the communicator's call index call: segments cooling down run
 * fp32 (note->cooling, and note->health names the signal for the trace);
 * one whose cool-down ended re-enters (note->health "reentry", counted in
 * the stats). */
void nf_health_apply(nf_health_comm_t *h, nf_seg_t *seg, nf_seg_note_t *note, size_t n,
                     uint64_t call);

/* After a call: the agreed signals of its low-bit segments (their
 * nonfinite flag and ef ratio) and the agreed mean loss (NAN when no rank
 * reported one) start cool-downs, counted in the stats. */
void nf_health_observe(nf_health_comm_t *h, nf_seg_t *seg, const nf_seg_note_t *note, size_t n,
                       double loss, uint64_t call);

#endif
