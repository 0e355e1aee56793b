/* SPDX-License-Identifier: BSD-3-Clause */
/* Warm-up on fp32 (nf_warmup.h). */
#include "config.h"

#include "nf_regstats.h"
#include "nf_route.h"
#include "nf_segtab.h"
#include "nf_warmup.h"

void nf_warmup_save(const nf_segstate_t *s, nf_wbuf_t *b)
{
    nf_segstate_save(s, NF_SEG_WARMUP, b);
}

nf_status_t nf_warmup_load(nf_segstate_t *s, nf_rbuf_t *r, int commit)
{
    return nf_segstate_load(s, NF_SEG_WARMUP, r, commit);
}

void nf_warmup_apply(nf_segstate_t *s, nf_seg_t *seg, nf_seg_note_t *note,
                     const nf_policy_action_t *act, size_t n, uint64_t call)
{
    char buf[40];
    for (size_t i = 0; i < n; i++) {
        if (act[i].warmup == 0 ||
            !nf_route_lowbit(seg[i].route))
            continue;
        /* made on its first call; none when the table is full or out of
         * memory: the segment then runs without a warm-up */
        nf_segrec_t *r = nf_segstate_get(s, seg, n, i, NF_SEG_WARMUP, 1);
        if (r == NULL || r->warm >= act[i].warmup)
            continue;
        ++r->warm;
        seg[i].route = NF_ROUTE_FP32;
        note[i].warmup = 1;
        nf_regstats_warmup(nf_seg_name(seg[i].id, seg[i].m * sizeof(float), buf, sizeof(buf)),
                           call);
    }
}
