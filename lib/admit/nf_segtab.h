/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-communicator records of segments (segtab.c), for the state admission
 * keeps per segment across calls: health's cool-downs, the warm-up's
 * counts. docs/design.md, "Health" and "Warm-up".
 */
#ifndef NF_SEGTAB_H
#define NF_SEGTAB_H

#include <stddef.h>
#include <stdint.h>

#include "nf_coll.h"
#include "nf_intern.h"
#include "nf_util.h"

/* Segment i's key, integers only (no name is formatted or hashed per
 * call): a region by its interned id, (id, 0); a gap or a whole unbound
 * buffer by the regions on either side of it and its size, (prev id << 32 |
 * next id, bytes + 1), so that two gaps of one size are two records. Ids
 * are per process: keys are never exchanged (what ranks agree on is per
 * segment index). */
void nf_seg_key(const nf_seg_t *seg, size_t n, size_t i, uint64_t *a, uint64_t *b);

/* A segment's name as calibration and the stats name it: its region (id),
 * else buffer:BYTES in buf. */
const char *nf_seg_name(uint32_t id, size_t bytes, char *buf, size_t len);

/* Records of `size` bytes, one per segment key, at most `max` (beyond it,
 * further segments have none: on every rank alike, since every rank sees
 * the same calls). A zero-filled table with size and max set is empty. */
typedef struct nf_segtab {
    unsigned char *v;     /* n records */
    size_t size, max;
    size_t n, cap;
    nf_keymap_t index;    /* key -> index in v */
} nf_segtab_t;

/* The record of seg[i]; a new zero-filled one when make (NULL when the
 * table is full or out of memory, or when !make and none exists). */
void *nf_segtab_get(nf_segtab_t *t, const nf_seg_t *seg, size_t n, size_t i, int make);
static inline void *nf_segtab_at(const nf_segtab_t *t, size_t k) { return t->v + k * t->size; }
void nf_segtab_free(nf_segtab_t *t);

/* The table in a residual checkpoint (nf_comm_slot_ops_t): u64 records,
 * u64 record bytes, then per record its key by names, since ids are per
 * process (kind 0: a region, its name; kind 1: a gap or whole buffer, the
 * names of the regions before and after it, "" for none, and its bytes +
 * 1), and the record's bytes. */
void nf_segtab_save(const nf_segtab_t *t, nf_wbuf_t *b);
/* Read such a table: commit 0 checks it only, commit 1 (after a check
 * passed) replaces t's records, calling fix(record, region id or 0) on
 * each. NF_ERR_PARSE on malformed input, NF_ERR_NO_MEMORY (commit 1),
 * NF_ERR_CAPACITY for records of more than 256 bytes. */
nf_status_t nf_segtab_load(nf_segtab_t *t, nf_rbuf_t *r, int commit,
                           void (*fix)(void *rec, uint32_t id));

/* The same for one part of records that begin with an unsigned bit set of
 * the parts they hold: the records holding part bit, its size bytes at
 * off (bit 0: every record, whole). Loading a part (commit) clears that
 * part of every record, then sets it in the records its keys name (made
 * when new; NF_ERR_PARSE past max records) and calls fix(part, id). */
void nf_segtab_save_part(const nf_segtab_t *t, nf_wbuf_t *b, size_t off, size_t size,
                         unsigned bit);
nf_status_t nf_segtab_load_part(nf_segtab_t *t, nf_rbuf_t *r, int commit, size_t off,
                                size_t size, unsigned bit, void (*fix)(void *part, uint32_t id));

#endif
