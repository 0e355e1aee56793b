/*
 * Collectives that leave the core while they wait (pwait.c). On libnfcoll's
 * progress thread the exchanges of a call (the leaders' allgathers and
 * alltoallv, the agreements' allreduces) run as nonblocking PMPI calls
 * polled with a sleep between tests: Open MPI's blocking calls poll without
 * sleeping, and on a machine with as many ranks as cores the thread, waiting
 * for the wire or for a peer still computing, would take its rank's core
 * from the computation it exists to overlap. Anywhere else they are the
 * blocking calls. Same arguments, same results (every one moves or combines
 * integers or whole floats: no sum order depends on the schedule).
 * docs/design.md, "Nonblocking calls".
 */
#ifndef NF_PWAIT_H
#define NF_PWAIT_H

#include <mpi.h>

/* This thread waits politely from now on (on: the progress thread). */
void nf_pwait_thread(int on);

int nf_pmpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                      MPI_Comm comm);
int nf_pmpi_allgather(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                      int rcount, MPI_Datatype rdt, MPI_Comm comm);
int nf_pmpi_allgatherv(const void *sendbuf, int scount, MPI_Datatype sdt, void *recvbuf,
                       const int *rcounts, const int *displs, MPI_Datatype rdt, MPI_Comm comm);
int nf_pmpi_alltoallv(const void *sendbuf, const int *scounts, const int *sdispls,
                      MPI_Datatype sdt, void *recvbuf, const int *rcounts, const int *rdispls,
                      MPI_Datatype rdt, MPI_Comm comm);

#endif
