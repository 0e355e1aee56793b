/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layout files (layout.c; format also in nfcoll-policy(5)). No MPI calls.
 * The file `[policy] regions` names binds regions in the buffers of a
 * program that does not call NF_Region_bind, by message size. One entry per
 * line, whitespace-separated:
 *
 *     BYTES NAME OFFSET COUNT
 *
 * applies to every MPI_FLOAT call of exactly BYTES bytes and binds NAME to
 * its elements [OFFSET, OFFSET + COUNT). BYTES takes nf_policy_parse_size's
 * syntax and is a positive multiple of 4; NAME is 1-127 bytes of printable
 * ASCII without spaces; OFFSET and COUNT are plain decimal element counts,
 * COUNT > 0 and OFFSET + COUNT <= BYTES / 4. Entries of one BYTES do not
 * overlap and do not repeat a NAME. Lines whose first non-blank character
 * is '#', and blank lines, are comments.
 *
 * A bad line is reported (NF_POLICY_DISABLED, file:line) and dropped; the
 * rest loads. Loaded once, then only read: lookups from several threads are
 * safe.
 */
#ifndef NF_LAYOUT_H
#define NF_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "nf_policy.h"

typedef struct nf_layout nf_layout_t;

typedef struct nf_layout_entry {
    uint64_t bytes;     /**< size of the calls it applies to */
    const char *name;   /**< region name; lives as long as the layout */
    uint64_t off, count; /**< elements (floats) [off, off + count) */
    int line;           /**< where the entry is in its file */
} nf_layout_entry_t;

/** Read and parse a layout file. Diagnostics go to fn as for nf_policy_load.
 * NF_OK with *out set (possibly with lines dropped, possibly empty);
 * NF_ERR_IO when the file cannot be opened or read or is not a regular file,
 * NF_ERR_PARSE when it is too large, NF_ERR_NO_MEMORY. *out is set only on
 * success. */
nf_status_t nf_layout_load(const char *path, nf_policy_diag_fn fn, void *arg, nf_layout_t **out);

/** The same on len bytes of text (need not be NUL-terminated); name is the
 * file name for diagnostics. */
nf_status_t nf_layout_parse(const char *text, size_t len, const char *name, nf_policy_diag_fn fn, void *arg,
                            nf_layout_t **out);

/** The entries for calls of exactly `bytes`, sorted by offset: *first and the
 * count (0: none, and *first is NULL). No allocation (hot path). */
size_t nf_layout_find(const nf_layout_t *l, uint64_t bytes, const nf_layout_entry_t **first);

/** Hash of the entries (sizes, names, ranges), independent of line order,
 * comments and spelling (64K or 65536). 0 for NULL; never 0 otherwise. */
uint64_t nf_layout_hash(const nf_layout_t *l);

/** Number of entries loaded (dropped lines not counted); 0 for NULL. */
size_t nf_layout_count(const nf_layout_t *l);

void nf_layout_free(nf_layout_t *l);

#endif /* NF_LAYOUT_H */
