/*
 * LD_PRELOAD for tests/mpi_faults_shm.sh: getrandom() called from libnfcoll
 * returns zero bytes for its first NF_FIXED_RANDOM calls in the process
 * ("all": every call), so the shared memory object libnfcoll tries first is
 * /nfcoll.0000000000000000, a name the test can take before it. Calls from
 * anywhere else, and later calls, get real random bytes. Test code only:
 * libnfcoll has no such hook.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

/* The build hides symbols by default: this one must interpose. */
__attribute__((visibility("default"))) ssize_t getrandom(void *buf, size_t len,
                                                         unsigned int flags);

static int from_libnfcoll(const void *caller)
{
    Dl_info info;
    return dladdr(caller, &info) != 0 && info.dli_fname != NULL &&
           strstr(info.dli_fname, "libnfcoll") != NULL;
}

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    static long calls;
    static ssize_t (*real)(void *, size_t, unsigned int);
    const char *e = getenv("NF_FIXED_RANDOM");
    long fixed = e == NULL ? 0 : strcmp(e, "all") == 0 ? -1 : atol(e);

    if (from_libnfcoll(__builtin_return_address(0)) && (fixed < 0 || calls++ < fixed)) {
        memset(buf, 0, len);
        return (ssize_t)len;
    }
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "getrandom");
    return real(buf, len, flags);
}
