/* Warm-up on fp32 (nf_warmup.h). */
#include "config.h"

#include <stdlib.h>

#include "nf_regstats.h"
#include "nf_segtab.h"
#include "nf_warmup.h"

#define NF_WARMUP_MAX 4096 /* segments counted per communicator */

struct nf_warmup_comm {
    nf_segtab_t calls;    /* per segment: the fp32 calls it has run (uint64_t) */
};

nf_warmup_comm_t *nf_warmup_comm_new(void)
{
    nf_warmup_comm_t *w = calloc(1, sizeof(*w));
    if (w != NULL)
        w->calls.size = sizeof(uint64_t), w->calls.max = NF_WARMUP_MAX;
    return w;
}

void nf_warmup_comm_free(nf_warmup_comm_t *w)
{
    if (w == NULL)
        return;
    nf_segtab_free(&w->calls);
    free(w);
}

void nf_warmup_comm_save(const nf_warmup_comm_t *w, nf_wbuf_t *b)
{
    nf_segtab_save(&w->calls, b);
}

int nf_warmup_comm_load(nf_warmup_comm_t *w, nf_rbuf_t *r, int commit)
{
    nf_segtab_t check = {.size = sizeof(uint64_t), .max = NF_WARMUP_MAX};
    int rc = nf_segtab_load(commit ? &w->calls : &check, r, commit, NULL);
    nf_segtab_free(&check);
    return rc;
}

void nf_warmup_apply(nf_warmup_comm_t *w, nf_seg_t *seg, nf_seg_note_t *note,
                     const nf_policy_action_t *act, size_t n, uint64_t call)
{
    char buf[40];
    for (size_t i = 0; i < n; i++) {
        if (act[i].warmup == 0 ||
            !(seg[i].route == NF_ROUTE_BINARY || seg[i].route == NF_ROUTE_TERNARY))
            continue;
        /* made on its first call; none when the table is full or out of
         * memory: the segment then runs without a warm-up */
        uint64_t *k = nf_segtab_get(&w->calls, seg, n, i, 1);
        if (k == NULL || *k >= act[i].warmup)
            continue;
        ++*k;
        seg[i].route = NF_ROUTE_FP32;
        note[i].warmup = 1;
        nf_regstats_warmup(nf_seg_name(seg[i].id, seg[i].m * sizeof(float), buf, sizeof(buf)),
                           call);
    }
}
