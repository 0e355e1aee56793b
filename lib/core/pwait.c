/* Collectives that leave the core while they wait (nf_pwait.h). */
#include "config.h"

#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "nf_pwait.h"

/* Tests before the first sleep (each one runs MPI's progress once: a reply
 * already on its way costs no sleep), then sleeps doubling from the first
 * to the last, in nanoseconds. 200 us is 25 KB at 1 Gbit/s, well inside a
 * socket's buffers: the wire does not wait for the next test. */
#define NF_PWAIT_TESTS 16
#define NF_PWAIT_FIRST_NS 10000L
#define NF_PWAIT_LAST_NS 200000L

static __thread int nf_pwait_polite;

void nf_pwait_thread(int on)
{
    nf_pwait_polite = on;
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
    /* the default 50 us of slack would stretch every short sleep */
    if (on)
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
}

static int nf_pwait(MPI_Request *req)
{
    long ns = NF_PWAIT_FIRST_NS;
    for (unsigned i = 0;; i++) {
        int done = 0, rc = PMPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        if (i < NF_PWAIT_TESTS)
            continue;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        ns = ns * 2 > NF_PWAIT_LAST_NS ? NF_PWAIT_LAST_NS : ns * 2;
    }
}

/* The nonblocking call's return code, or its wait's. */
static int nf_pwait_started(int rc, MPI_Request *req)
{
    return rc != MPI_SUCCESS ? rc : nf_pwait(req);
}

int nf_pmpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                      MPI_Comm comm)
{
    MPI_Request r;
    if (!nf_pwait_polite)
        return PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm);
    return nf_pwait_started(PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, &r), &r);
}

int nf_pmpi_allgather(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                      int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    MPI_Request r;
    if (!nf_pwait_polite)
        return PMPI_Allgather(sendbuf, scount, sdt, recvbuf, rcount, rdt, comm);
    return nf_pwait_started(
        PMPI_Iallgather(sendbuf, scount, sdt, recvbuf, rcount, rdt, comm, &r), &r);
}

int nf_pmpi_allgatherv(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                       const int *rcounts, const int *displs, MPI_Datatype rdt, MPI_Comm comm)
{
    MPI_Request r;
    if (!nf_pwait_polite)
        return PMPI_Allgatherv(sendbuf, scount, sdt, recvbuf, rcounts, displs, rdt, comm);
    return nf_pwait_started(
        PMPI_Iallgatherv(sendbuf, scount, sdt, recvbuf, rcounts, displs, rdt, comm, &r), &r);
}

int nf_pmpi_alltoallv(const void *sendbuf, const int *scounts, const int *sdispls,
                      MPI_Datatype sdt, void *recvbuf, const int *rcounts, const int *rdispls,
                      MPI_Datatype rdt, MPI_Comm comm)
{
    MPI_Request r;
    if (!nf_pwait_polite)
        return PMPI_Alltoallv(sendbuf, scounts, sdispls, sdt, recvbuf, rcounts, rdispls, rdt,
                              comm);
    return nf_pwait_started(PMPI_Ialltoallv(sendbuf, scounts, sdispls, sdt, recvbuf, rcounts,
                                            rdispls, rdt, comm, &r),
                            &r);
}
