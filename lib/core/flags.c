/* Flag waits for the node-local synchronization (nf_flags.h). */
#include "config.h"

#include <sched.h>

#include "nf_flags.h"

/* About a microsecond of pauses before the first yield: a peer on another
 * core answers well within it; a peer that shares our core needs it back. */
#define NF_SPIN_PAUSES 512

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
