/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Node-local synchronization through flags in the shared segment (flags.c),
 * the way Open MPI's coll/sm and coll/xhc do it: no PMPI call between the
 * ranks of a node. docs/design.md, "Protocol".
 *
 * Each local rank owns one control block (nf_ctl_t) at the start of the
 * segment. A barrier is a generation: every rank of the node runs the same
 * sequence of barriers on a communicator, so each keeps its own counter
 * (nf_comm_t.gen), stores the new value into its arrive flag with release
 * order after writing what it publishes, and waits with acquire loads until
 * every local rank's flag has reached that value. Flags only grow, so a
 * barrier never has to be reset; a new segment starts again from zero.
 * The node leader publishes what it alone computed (an inter-node exchange)
 * through its pub flag, with the status of that exchange, so a failed PMPI
 * call on the leader is returned by every local rank instead of hanging them.
 */
#ifndef NF_FLAGS_H
#define NF_FLAGS_H

#include <stdatomic.h>
#include <stdint.h>

#include "nf_comm.h"

/* One rank's control block: the flags on their own cache lines, the call
 * header (by call parity) and the small-call area (by call parity). */
typedef struct nf_ctl {
    _Alignas(64) _Atomic uint64_t arrive; /* last barrier generation reached */
    _Alignas(64) _Atomic uint64_t pub;    /* leader: last generation published */
    int64_t pub_status;                   /* leader: its status for that generation */
    int64_t stage_status[2];              /* leader: its status per pipeline stage parity */
    uint64_t verdict[NF_HDR_WORDS];       /* leader: the inter-node header verdict */
    _Alignas(64) uint64_t hdr[2][NF_HDR_WORDS]; /* this rank's header, by call parity */
    _Alignas(64) uint8_t small[2][NF_SMALL_BYTES]; /* a small call's data, by call parity */
} nf_ctl_t;

_Static_assert(sizeof(nf_ctl_t) % 64 == 0, "control blocks are whole cache lines");
_Static_assert(sizeof(nf_ctl_t) <= NF_CTL_BYTES, "NF_CTL_BYTES holds a control block");

static inline nf_ctl_t *nf_ctl(const nf_comm_t *c, int lrank)
{
    return (nf_ctl_t *)(c->ctl + (size_t)lrank * NF_CTL_BYTES);
}

/* Wait until *f >= gen: spin with a pause, then yield the core, so ranks
 * oversubscribed on fewer cores still let the one they wait for run. */
void nf_flag_wait(const _Atomic uint64_t *f, uint64_t gen);

/* The local ranks (at most max, into lranks) whose arrive flag is behind
 * the furthest one's: those a node barrier waits for. For a report of a
 * stalled call, read from another thread (against a remap: c->probe): a
 * snapshot, not a fact; 0 while the segment is being remapped. */
int nf_node_late(nf_comm_t *c, int *lranks, int max);

/* Node barrier: publish everything written before it, see everything the
 * other local ranks wrote before theirs. */
static inline void nf_node_barrier(nf_comm_t *c)
{
    uint64_t gen = ++c->gen;
    atomic_store_explicit(&nf_ctl(c, c->lrank)->arrive, gen, memory_order_release);
    for (int i = 0; i < c->lsize; i++)
        if (i != c->lrank)
            nf_flag_wait(&nf_ctl(c, i)->arrive, gen);
}

/* Leader: publish what it wrote after the last barrier, with its status. */
static inline void nf_leader_publish(nf_comm_t *c, nf_status_t st)
{
    nf_ctl_t *l = nf_ctl(c, 0);
    l->pub_status = st;
    atomic_store_explicit(&l->pub, c->gen, memory_order_release);
}

/* Everyone: wait for the leader's publication after the last barrier and
 * return its status (the leader returns its own). */
static inline nf_status_t nf_leader_wait(nf_comm_t *c, nf_status_t mine)
{
    if (c->lrank == 0) {
        nf_leader_publish(c, mine);
        return mine;
    }
    nf_ctl_t *l = nf_ctl(c, 0);
    nf_flag_wait(&l->pub, c->gen);
    return (nf_status_t)l->pub_status;
}

#endif
