/* SPDX-License-Identifier: BSD-3-Clause */
/* Flag waits for the node-local synchronization (nf_flags.h). */
#include "config.h"

#include <sched.h>

#include <mpi.h>

#include "nf_flags.h"

/* A few microseconds of pauses before the first yield (a pause is ~50 ns on
 * the EPYC build machine, 10-140 cycles elsewhere): a peer on another core
 * answers within it; a peer that shares our core needs it back, and 512
 * pauses (25 us) made every small call that waited on such a peer cost as
 * much. */
#define NF_SPIN_PAUSES 64

static inline void nf_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Yields between two pokes of MPI's progress in a long wait. */
#define NF_SPIN_POKE 32u

/* A peer may be unable to reach its call until this rank's MPI progresses
 * a request of the program's (a large MPI_Isend without single-copy
 * transport, a send across nodes): a long wait lets MPI progress now and
 * then. MPI_Iprobe never receives. */
static void nf_flag_poke(void)
{
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

void nf_flag_wait(const _Atomic uint64_t *f, uint64_t gen)
{
    unsigned spins = 0;
    while (atomic_load_explicit(f, memory_order_acquire) < gen) {
        if (spins < NF_SPIN_PAUSES) {
            spins++;
            nf_cpu_relax();
        } else {
            if (++spins % NF_SPIN_POKE == 0)
                nf_flag_poke();
            sched_yield();
        }
    }
}

int nf_node_late(nf_comm_t *c, int *lranks, int max)
{
    uint64_t most = 0;
    int n = 0;
    atomic_fetch_add(&c->probe, 1);
    if (atomic_load(&c->remap) || c->ctl == NULL) {
        atomic_fetch_sub(&c->probe, 1);
        return 0;
    }
    for (int i = 0; i < c->lsize; i++) {
        uint64_t g = atomic_load_explicit(&nf_ctl(c, i)->arrive, memory_order_acquire);
        most = g > most ? g : most;
    }
    for (int i = 0; i < c->lsize && n < max; i++)
        if (atomic_load_explicit(&nf_ctl(c, i)->arrive, memory_order_acquire) < most)
            lranks[n++] = i;
    atomic_fetch_sub(&c->probe, 1);
    return n;
}
