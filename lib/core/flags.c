/* Flag waits for the node-local synchronization (nf_flags.h). */
#include "config.h"

#include <sched.h>

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

void nf_flag_wait(const _Atomic uint64_t *f, uint64_t gen)
{
    unsigned spins = 0;
    while (atomic_load_explicit(f, memory_order_acquire) < gen) {
        if (spins < NF_SPIN_PAUSES) {
            spins++;
            nf_cpu_relax();
        } else {
            sched_yield();
        }
    }
}
