/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Interned names (intern.c): each distinct region name gets a small dense
 * id once, when it is bound (or a layout, profile or checkpoint names it);
 * per-call state (residuals, health, calibration, regstats) is then kept
 * by id, in arrays and integer-keyed tables, so that no call hashes,
 * compares, formats or copies a name. docs/design.md, "Regions".
 *
 * Names are never forgotten: an id and its name stay valid until the
 * process exits (a program binds a bounded set of layer names).
 */
#ifndef NF_INTERN_H
#define NF_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "nfcoll.h"

/* The id of name (1, 2, ...), made on first sight; 0 without memory or
 * past NF_INTERN_MAX names. Thread-safe. */
uint32_t nf_intern(const char *name);
/* The name and the FNV-1a hash of an id nf_intern returned (lock-free:
 * both are written before the id is handed out). NULL / 0 for id 0. */
const char *nf_intern_name(uint32_t id);
uint64_t nf_intern_hash(uint32_t id);
/* One past the largest id handed out so far: arrays indexed by id. */
uint32_t nf_intern_bound(void);

#define NF_INTERN_MAX (1u << 24)

/* An array indexed by id (*arr, of *cap elements of size bytes each)
 * grown, zero-filled, to hold index id. NF_OK; NF_ERR_NO_MEMORY, or
 * NF_ERR_CAPACITY for an id past NF_INTERN_MAX (the array is as it was). */
nf_status_t nf_id_array_grow(void *arr, uint32_t *cap, uint32_t id, size_t size);

/* ---- a map from two 64-bit words to an index, for state keyed by id ----
 * Open addressing, linear probing, grown at half full. Not thread-safe:
 * its owner locks. A zero-filled map is a valid empty one. */
typedef struct nf_keymap {
    struct nf_keymap_slot { uint64_t a, b; uint32_t v, used; } *slot;
    size_t n, cap;   /* cap: a power of two, or 0 */
} nf_keymap_t;

/* The index stored for (a, b), or UINT32_MAX when absent. */
uint32_t nf_keymap_get(const nf_keymap_t *m, uint64_t a, uint64_t b);
/* Store v for (a, b) (replacing). NF_OK, or NF_ERR_NO_MEMORY. */
nf_status_t nf_keymap_put(nf_keymap_t *m, uint64_t a, uint64_t b, uint32_t v);
void nf_keymap_free(nf_keymap_t *m);

#endif
