/* The node-shared aggregation segment: a POSIX shm object created by local
 * rank 0, bound to the placement node before its first touch, mapped by the
 * other local ranks, unlinked once everyone has it mapped. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "nf_core.h"
#include "nf_placement.h"

#define NF_SHM_NAME_MAX 64

static atomic_uint nf_shm_seq; /* threads may set up communicators at once */

static nf_status_t nf_shm_room(size_t bytes)
{
    struct statvfs sv;
    if (statvfs("/dev/shm", &sv) != 0)
        return NF_OK; /* not a tmpfs mount we can ask: let mmap/touch tell */
    unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
    if (avail < bytes) {
        nf_log_error("/dev/shm has %llu bytes free, the aggregation buffer needs %zu",
                     avail, bytes);
        return NF_ERR_NO_MEMORY;
    }
    return NF_OK;
}

static void *nf_shm_map(const char *name, size_t bytes, int create)
{
    int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0) {
        nf_log_error("shm_open(%s) failed: %m", name);
        return NULL;
    }
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        nf_log_error("ftruncate(%s, %zu) failed: %m", name, bytes);
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        nf_log_error("mmap of %zu bytes of %s failed: %m", bytes, name);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* Local rank 0: create, bind, touch. Returns the status the others see. */
static nf_status_t nf_shm_make(nf_shm_t *shm, size_t bytes, char *name)
{
    snprintf(name, NF_SHM_NAME_MAX, "/nfcoll.%ld.%u", (long)getpid(), atomic_fetch_add(&nf_shm_seq, 1u));
    nf_status_t st = nf_shm_room(bytes);
    if (st != NF_OK)
        return st;
    shm->base = nf_shm_map(name, bytes, 1);
    if (shm->base == NULL) {
        shm_unlink(name);
        return NF_ERR_NO_MEMORY;
    }
    shm->bytes = bytes;
    st = nf_place_bind_touch(shm->base, bytes, &shm->resident_frac);
    if (st != NF_OK) {
        nf_shm_destroy(shm);
        shm_unlink(name);
    }
    return st;
}

nf_status_t nf_shm_create(nf_shm_t *shm, size_t bytes, MPI_Comm node)
{
    char name[NF_SHM_NAME_MAX] = "";
    int lrank, st = NF_OK;
    memset(shm, 0, sizeof(*shm));
    PMPI_Comm_rank(node, &lrank);
    if (lrank == 0)
        st = nf_shm_make(shm, bytes, name);
    PMPI_Bcast(&st, 1, MPI_INT, 0, node);
    if (st != NF_OK)
        return (nf_status_t)st;
    PMPI_Bcast(name, NF_SHM_NAME_MAX, MPI_CHAR, 0, node);
    PMPI_Bcast(&shm->resident_frac, 1, MPI_DOUBLE, 0, node);
    if (lrank != 0) {
        shm->base = nf_shm_map(name, bytes, 0);
        shm->bytes = shm->base != NULL ? bytes : 0;
    }
    /* Unlink only after every rank has mapped it; agree on success. */
    int ok = shm->base != NULL, all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
    if (lrank == 0)
        shm_unlink(name);
    if (!all) {
        nf_shm_destroy(shm);
        return NF_ERR_NO_MEMORY;
    }
    return NF_OK;
}

void nf_shm_destroy(nf_shm_t *shm)
{
    if (shm->base != NULL)
        munmap(shm->base, shm->bytes);
    shm->base = NULL;
    shm->bytes = 0;
}
