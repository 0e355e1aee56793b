/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * LD_PRELOAD for tests/mpi_faults_shm.sh: the first NF_FIXED_RANDOM calls
 * getrandom(buf, 8, GRND_NONBLOCK) in the process ("all": every one) get
 * zero bytes, so the shared memory object libnfcoll tries first is
 * /nfcoll.0000000000000000, a name the test can take before it. Each such
 * call says so on stderr, so the test knows it happened. Other calls get
 * real random bytes. The call is recognised by its arguments, not its
 * caller: under a sanitizer, the runtime's interceptor calls us.
 * Test code only: libnfcoll has no such hook.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

/* The build hides symbols by default: this one must interpose. */
__attribute__((visibility("default"))) ssize_t getrandom(void *buf, size_t len,
                                                         unsigned int flags);

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    static long calls;
    static ssize_t (*real)(void *, size_t, unsigned int);
    const char *e = getenv("NF_FIXED_RANDOM");
    long fixed = e == NULL ? 0 : strcmp(e, "all") == 0 ? -1 : atol(e);

    if (len == 8 && flags == GRND_NONBLOCK && (fixed < 0 || calls < fixed)) {
        calls++;
        memset(buf, 0, len);
        fprintf(stderr, "fixed_random: zero bytes for call %ld\n", calls);
        return (ssize_t)len;
    }
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "getrandom");
    return real(buf, len, flags);
}
