/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Warm-up (warmup.c): per communicator and segment (its count in the
 * segment's record, nf_segstate.h), a rule's `warmup = N`
 * runs the first N calls a segment asks for a low-bit route on fp32, so
 * that error feedback starts from a trained model's gradients rather than
 * an initial one's. docs/design.md, "Warm-up".
 */
#ifndef NF_WARMUP_H
#define NF_WARMUP_H

#include <stddef.h>
#include <stdint.h>

#include "nf_coll.h"
#include "nf_health.h" /* nf_seg_note_t */
#include "nf_policy.h"
#include "nf_segstate.h"
#include "nf_util.h"

/* The counts (the warm-up part of s's records) in a residual checkpoint,
 * and back (commit 0 checks only, s may be NULL; commit 1 replaces them).
 * NF_ERR_PARSE on malformed input, NF_ERR_NO_MEMORY. */
void nf_warmup_save(const nf_segstate_t *s, nf_wbuf_t *b);
nf_status_t nf_warmup_load(nf_segstate_t *s, nf_rbuf_t *r, int commit);

/* Before a call: each low-bit segment whose action (act[i]) asks for a
 * warm-up and has run fewer calls than it asks for runs fp32 and counts
 * one (note->warmup; the stats' record counts it at the communicator's
 * call index call). Every rank sees the same calls and segments, so
 * every rank counts alike. A segment without a record (past
 * NF_SEGSTATE_MAX) runs its route without a warm-up (on every rank alike). */
void nf_warmup_apply(nf_segstate_t *s, nf_seg_t *seg, nf_seg_note_t *note,
                     const nf_policy_action_t *act, size_t n, uint64_t call);

#endif
