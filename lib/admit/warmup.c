/* Warm-up on fp32 (nf_warmup.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "nf_intern.h"
#include "nf_regstats.h"
#include "nf_warmup.h"

#define NF_WARMUP_MAX 4096 /* segments counted per communicator */

struct nf_warmup_comm {
    uint64_t *calls;      /* fp32 calls each counted segment has run */
    size_t n, cap;
    nf_keymap_t index;    /* nf_seg_key -> index in calls */
};

nf_warmup_comm_t *nf_warmup_comm_new(void) { return calloc(1, sizeof(nf_warmup_comm_t)); }

void nf_warmup_comm_free(nf_warmup_comm_t *w)
{
    if (w == NULL)
        return;
    free(w->calls);
    nf_keymap_free(&w->index);
    free(w);
}

/* Segment i's counter, made on its first call; NULL when the table is
 * full or out of memory (the segment then runs without a warm-up). */
static uint64_t *nf_warmup_count(nf_warmup_comm_t *w, const nf_seg_t *seg, size_t n, size_t i)
{
    uint64_t a, b;
    nf_seg_key(seg, n, i, &a, &b);
    uint32_t at = nf_keymap_get(&w->index, a, b);
    if (at != UINT32_MAX)
        return &w->calls[at];
    if (w->n >= NF_WARMUP_MAX)
        return NULL;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 32;
        uint64_t *v = realloc(w->calls, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        w->calls = v, w->cap = cap;
    }
    if (nf_keymap_put(&w->index, a, b, (uint32_t)w->n) != 0)
        return NULL;
    w->calls[w->n] = 0;
    return &w->calls[w->n++];
}

void nf_warmup_apply(nf_warmup_comm_t *w, nf_seg_t *seg, nf_seg_note_t *note,
                     const nf_policy_action_t *act, size_t n, uint64_t call)
{
    char buf[40];
    for (size_t i = 0; i < n; i++) {
        if (act[i].warmup == 0 ||
            !(seg[i].route == NF_ROUTE_BINARY || seg[i].route == NF_ROUTE_TERNARY))
            continue;
        uint64_t *k = nf_warmup_count(w, seg, n, i);
        if (k == NULL || *k >= act[i].warmup)
            continue;
        ++*k;
        seg[i].route = NF_ROUTE_FP32;
        note[i].warmup = 1;
        /* named as health and calibration name it: the region, else buffer:BYTES */
        if (seg[i].name == NULL)
            snprintf(buf, sizeof(buf), "buffer:%zu", seg[i].m * sizeof(float));
        nf_regstats_warmup(seg[i].name != NULL ? seg[i].name : buf, call);
    }
}
