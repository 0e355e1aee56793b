/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Residual checkpoints (checkpoint.c): a communicator's error-feedback
 * residuals saved to one file per rank, PREFIX.RANK, and loaded back all or
 * nothing. docs/design.md, "Checkpoints"; the format is below and in
 * NF_Residuals_save(3).
 *
 * File (little-endian):
 *   header, 64 bytes: magic "NFCRESID", u32 version (3; 1 and 2 are read too), u32 header bytes
 *     (64), u32 communicator size, u32 rank, u64 save id (the same in every
 *     rank's file of one save), u64 file bytes, u64 hash of this rank's
 *     bound regions (sorted names and counts), u32 bound regions, u32
 *     entries, u64 checksum of the 56 bytes before it.
 *   entries, in order of first use: u8 kind (0 region, 1 unbound), u8 form
 *     (0 Y, 1 E, 2 TY), u16 name bytes (region: 1..127, unbound: 0), u32
 *     aprev (float bits: a_i for Y, b_i for TY), u64 count, u64 order
 *     (unbound: its place among the file's unbound residuals, 0, 1, ...;
 *     region: 0), u32 tprev (TY: the gate's float bits; else 0), u32 zero;
 *     the name;
 *     count floats (the current buffer); u64 checksum of all of the entry
 *     before it.
 *   from version 2: the layers' state (nf_comm_slots_save: warm-up counts,
 *     health's cool-downs, admission's call index): u64 bytes, the bytes,
 *     u64 checksum of both.
 *   The checksums are XXH3-64 (seed 0) from version 3, FNV-1a 64 in
 *   versions 1 and 2. Otherwise the versions 2 and 3 are the same.
 */
#ifndef NF_CHECKPOINT_H
#define NF_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "nf_comm.h"
#include "nf_residual.h"

#define NF_CKPT_VERSION 3

/* Collective over c's ranks. NF_OK, or on every rank alike the agreed MPI
 * error code as an MPI failure (nf_mpi_status: NF_ERR_MPI): MPI_ERR_ARG (no prefix,
 * a path too long, a file written for another communicator size or rank
 * or with other bound regions), MPI_ERR_FILE (not a checkpoint, another
 * version, corrupted, truncated, not a regular file, files of different
 * saves), MPI_ERR_IO (a file that cannot be opened, read, written or
 * renamed), MPI_ERR_NO_MEM (no memory, or more than NFCOLL_RESIDUAL_MAX),
 * MPI_ERR_UNSUPPORTED_OPERATION (no libnfcoll state on c). The rank that
 * found the problem logs it with the file's name; a failed load changes no
 * residual, a failed save replaces no file (but when renaming fails on
 * some rank after others renamed theirs: the set then mixes saves, which
 * load refuses). Or the MPI error of a failed agreement. */
nf_status_t nf_ckpt_save(nf_comm_t *c, const char *prefix);
nf_status_t nf_ckpt_load(nf_comm_t *c, const char *prefix);

/* ---- the reader (no MPI calls): load and nfcoll_info --checkpoint ---- */

typedef struct nf_ckpt_head {
    uint32_t version, size, rank, nregions, nentries;
    uint64_t id, file_bytes, region_hash;
    unsigned char *state; /* the layers' state (version 2), malloc'd: the caller frees */
    size_t state_len;
} nf_ckpt_head_t;

typedef struct nf_ckpt_entry {
    int unbound;
    char name[NF_RES_NAME_MAX]; /* "" when unbound */
    uint64_t order;             /* unbound: among the file's unbound residuals */
    size_t count;
    nf_res_form_t form;
    float aprev;
    float tprev;                /* NF_RES_TY: the previous gate */
} nf_ckpt_entry_t;

/* Called with each entry (once the header is read into *head) before its
 * floats: where they go, or NULL to check them only. A status other than
 * NF_OK in *st (with why filled in) stops the reading with it. */
typedef float *(*nf_ckpt_sink_t)(void *arg, const nf_ckpt_head_t *head,
                                 const nf_ckpt_entry_t *e, nf_status_t *st, char *why,
                                 size_t whylen);

/* Read path and check it whole: a regular file, the header, every entry's
 * bounds and checksum, nothing after the last. NF_OK; NF_ERR_IO (open or
 * read failed), NF_ERR_PARSE (not a valid checkpoint), or the sink's
 * status. On failure why holds what was wrong (for a message that names
 * the file). *head is set once the header is read. */
nf_status_t nf_ckpt_read(const char *path, nf_ckpt_head_t *head, nf_ckpt_sink_t sink,
                         void *arg, char *why, size_t whylen);

#endif
