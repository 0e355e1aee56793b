/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The routing decision (decide.c), without MPI: what a call's policy,
 * region layout, calibration profile, calibration flag and count lanes make
 * of it, as one immutable decision (nf_decide). Admission (lib/admit) calls
 * it on a call its cache cannot answer; nfcoll_replay on every traced call.
 * docs/design.md, "Admission".
 */
#ifndef NF_DECIDE_H
#define NF_DECIDE_H

#include <stddef.h>
#include <stdint.h>

#include "nf_layout.h"
#include "nf_policy.h"
#include "nf_profile.h"
#include "nf_settings.h"

/* What a run decides by, besides the call: fixed for the run. */
typedef struct nf_decide_ctx {
    const nf_policy_t *pol;
    const nf_layout_t *layout;  /* the policy's `regions`, or NULL */
    const nf_profile_t *prof;   /* what route = auto reads, or NULL */
    int calibrate;              /* a calibration run: float sums take fp32 */
    unsigned count_bits;        /* NFCOLL_COUNT_BITS */
} nf_decide_ctx_t;

/* Why a segment, or a call run whole, takes the route nf_decide gives it:
 * the evidence the stats and the trace record (docs/design.md,
 * "Admission"). Names: nf_decide_why_name. */
typedef enum nf_decide_why {
    NF_WHY_RULE = 0,  /* its rule's route */
    NF_WHY_PROFILE,   /* route = auto: its profile entry's route */
    NF_WHY_NO_ENTRY,  /* route = auto, no profile entry (or no profile): fp32 */
    NF_WHY_STALE,     /* route = auto, its entry measured another element count: fp32 */
    NF_WHY_CALIBRATE, /* a calibration run reduces it exactly: fp32 */
    NF_WHY_COUNT
} nf_decide_why_t;

typedef struct nf_decide_reason {
    nf_decide_why_t why;
    const nf_profile_entry_t *pe; /* NF_WHY_PROFILE, NF_WHY_STALE: the entry; else NULL */
    int pe_decay;                 /* 1: the entry's ef_decay runs (the rule names none) */
} nf_decide_reason_t;

/* "rule", "profile", "no-entry", "stale-entry", "calibrate". */
const char *nf_decide_why_name(nf_decide_why_t w);

/* A region bound in a call's buffer (elements from its first). */
typedef struct nf_decide_part {
    uint64_t off, m;
    const char *name;
} nf_decide_part_t;

/* A call, as every rank sees it. */
typedef struct nf_decide_call {
    const char *comm_name;      /* NULL or "" for an unnamed communicator */
    int comm_size;
    nf_dtype_t dt;
    nf_opkind_t op;
    uint64_t bytes, count;      /* count * the datatype's size; elements */
    uint64_t call;              /* the communicator's call index */
    const nf_decide_part_t *parts; /* bound regions, in offset order; with none */
    size_t nparts;              /* a float sum is cut by the layout for its bytes */
} nf_decide_call_t;

/* One segment of a cut call: a part, or a gap between parts. */
typedef struct nf_decide_seg {
    uint64_t off, m;
    const char *name;           /* the part's or layout entry's; NULL for a gap */
    nf_policy_action_t act;     /* its match, as a call of its own */
    nf_route_t route;           /* act's route, route = auto resolved */
    nf_decide_reason_t why;     /* why route (calibrate in a calibration run) */
} nf_decide_seg_t;

/* Whether and how a call is cut into segments. */
typedef enum nf_decide_cut {
    NF_CUT_ALL_PMPI = -1, /* cut, every segment pmpi: the call runs whole on pmpi */
    NF_CUT_NONE = 0,      /* not cut: the call is one segment */
    NF_CUT_FUSED = 1      /* cut: the segments run in one fused call */
} nf_decide_cut_t;

/* A call's decision: nf_decide fills every field. Admission keeps it as
 * made and never writes into it afterwards. */
typedef struct nf_decide {
    nf_policy_action_t whole;   /* the match of the whole call (region NULL) */
    nf_decide_cut_t cut;
    nf_route_t route;           /* of the whole call: fp32 when fused, route = auto
                                   resolved (buffer:BYTES), pmpi when it cannot leave
                                   pmpi; before the runner's own fallbacks */
    int calibrate;              /* a calibration run reduces it (fp32) */
    nf_decide_reason_t why;     /* why route, for a call not fused */
    nf_decide_seg_t *seg;       /* the cut's segments (cut != NF_CUT_NONE); owned */
    size_t nseg, cap;
    /* route = auto: the first profile entry ignored because it measured
     * another element count than its segment has (NULL: none). */
    const nf_profile_entry_t *stale;
    uint64_t stale_m;
} nf_decide_t;

/* A sum of 4-byte floats (float, or a 4-byte Fortran REAL): the calls the
 * protocol and the fused cut take. */
int nf_decide_float_sum(nf_dtype_t dt, nf_opkind_t op, uint64_t bytes, uint64_t count);

/* The profile's name of a segment: its region, else buffer:BYTES. */
const char *nf_decide_profile_name(const char *name, uint64_t m, char *buf, size_t len);

/* The whole call's route from d->whole and d->cut (and d->calibrate for a
 * float sum): fp32 when fused or calibrated, pmpi when every segment is;
 * comm_ok 0 (fewer than 2 ranks, an intercommunicator, ranks that
 * disagree on the policy) keeps it on pmpi. route = auto is not resolved. */
nf_route_t nf_decide_want(const nf_decide_t *d, int comm_ok);

/* The decision for one call: the policy's match of the whole call; a
 * float sum whose match does not say `segment = buffer` cut by c's parts
 * (bound regions), else by the layout's entries for its bytes, each
 * segment matched as a call of its own with route = auto resolved by the
 * profile (fp32 without an entry, or with one measured on another element
 * count: d->stale); the whole call's route (nf_decide_want), route = auto
 * resolved when the call is not fused. Admission calls it on a cache
 * miss, nfcoll_replay for each traced call. NF_OK, or NF_ERR_NO_MEMORY
 * (d->cut NF_CUT_NONE: the call runs whole). */
nf_status_t nf_decide(const nf_decide_ctx_t *x, const nf_decide_call_t *c, int comm_ok,
                      nf_decide_t *d);

/* What the runner makes of route for a (part of a) call of this
 * communicator size, as far as the call tells (not a NaN, not resources):
 * pmpi for what fp32 cannot take (whole: not a float sum), fp32 for a
 * low-bit route whose counts NFCOLL_COUNT_BITS cannot hold. Inside a fused
 * call (seg 1) a pmpi segment runs fp32. */
nf_route_t nf_decide_runs(const nf_decide_ctx_t *x, const nf_decide_call_t *c, int seg,
                          nf_route_t route);

/* The error feedback and scale blocks a segment runs with, and where each
 * came from: what the stats' admission record and nfcoll_replay print.
 * The explicit key (the rule's) wins, then the profile entry's choice
 * (route = auto, r->pe_decay), then the settings s (NFCOLL_EF,
 * NFCOLL_EF_DECAY, NFCOLL_SCALE_BLOCK). An integer route's block is the
 * rule's (or [default]'s) `block`, else NF_INT_BLOCK_DEFAULT: no setting. */
typedef struct nf_decide_params {
    double ef_decay;      /* NAN when error feedback is off or the route keeps no
                             residual */
    const char *decay_by; /* "rule", "profile", "settings", "calibrate"; "ef-off";
                             NULL: the route keeps no residual */
    long scale_block;     /* elements per binary scale, 0: one per segment; -1: not
                             binary */
    const char *block_by; /* "rule", "settings"; NULL: not binary */
    long block;           /* integer routes: elements per scale block; -1: not an
                             integer route */
    const char *int_block_by; /* "rule", "default" (NF_INT_BLOCK_DEFAULT); NULL: not
                                 an integer route */
} nf_decide_params_t;
/* route: the segment's, as decided. In a calibration run (r->why
 * NF_WHY_CALIBRATE) they are what its low-bit shadows ran: the settings'
 * error feedback, the rule's decay or nf_decide_shadow_decay, the rule's
 * scale_block and block. */
void nf_decide_params(const nf_policy_action_t *a, const nf_decide_reason_t *r, nf_route_t route,
                      const nf_settings_t *s, nf_decide_params_t *p);

/* The decay calibration's shadows run where the rule names none: the
 * settings' when NFCOLL_EF_DECAY gave one, else NF_PROFILE_DECAY_CUT, the
 * decay the lag cosine separates the optimizers best at and most segments
 * then run (docs/design.md, "Calibration"). */
double nf_decide_shadow_decay(const nf_settings_t *s);

void nf_decide_free(nf_decide_t *d);

#endif
