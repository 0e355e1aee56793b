/*
 * Warm-up (warmup.c): per communicator and segment, a rule's `warmup = N`
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
#include "nf_util.h"

typedef struct nf_warmup_comm nf_warmup_comm_t;
nf_warmup_comm_t *nf_warmup_comm_new(void);
void nf_warmup_comm_free(nf_warmup_comm_t *w);
/* The counts in a residual checkpoint, and back (nf_segtab_load's
 * commit; w may be NULL to check). -1 on malformed input. */
void nf_warmup_comm_save(const nf_warmup_comm_t *w, nf_wbuf_t *b);
int nf_warmup_comm_load(nf_warmup_comm_t *w, nf_rbuf_t *r, int commit);

/* Before a call: each low-bit segment whose action (act[i]) asks for a
 * warm-up and has run fewer calls than it asks for runs fp32 and counts
 * one (note->warmup; the stats' record counts it at the communicator's
 * call index call). Every rank sees the same calls and segments, so
 * every rank counts alike. Past NF_WARMUP_MAX segments per communicator,
 * further ones run their route without a warm-up (on every rank alike). */
void nf_warmup_apply(nf_warmup_comm_t *w, nf_seg_t *seg, nf_seg_note_t *note,
                     const nf_policy_action_t *act, size_t n, uint64_t call);

#endif
