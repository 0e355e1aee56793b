#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""mpi4py started MPI, not libnfcoll (imported second, not preloaded), so the
ranks never agreed at MPI_Init which of them run progress threads
(docs/design.md, "The progress engine"): rank 0 at thread level L0, the
others at L1 (mpi4py.rc.thread_level).

    test_first.py L0 L1     NFCOLL_POLICY=tests/policy_shim/engine.policy

Y is made by mpi4py (libnfcoll does not see it made) and set up with
nfcoll.prepare(Y), where the ranks agree whether every one runs progress
threads. A rank with MPI_THREAD_MULTIPLE returns from its first
allreduce_async on Y at once though rank 1 issues it 1 s late. Where every
rank has MULTIPLE, every result is bit for bit the blocking allreduce's on
a twin communicator; where not every rank has, all are the exact sums
(PMPI_Iallreduce everywhere). The last call is issued before a message on
rank 0 and after receiving it on rank 1: a rank never waits at issue for a
call the others have not reached. Then Z, made by mpi4py and not prepared:
its first allreduce_async calls are MPI's own exact sums (fallback
"setup"), and after its first blocking allreduce they take the policy's
route.
"""

import os
import sys
import time

import mpi4py

_rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
mpi4py.rc.thread_level = sys.argv[2] if int(_rank) != 0 and len(sys.argv) > 2 else sys.argv[1]

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402 - first: mpi4py starts MPI

import nfcoll  # noqa: E402
import nfref  # noqa: E402

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
t = nfref.Tap(comm)
level = MPI.Query_thread()
some = comm.allreduce(level == MPI.THREAD_MULTIPLE, op=MPI.LOR)
every = comm.allreduce(level == MPI.THREAD_MULTIPLE, op=MPI.LAND)
t.ok(not nfcoll._lib.started_mpi, "mpi4py started MPI, not nfcoll (level %d)" % level)
X, Y = comm.Dup(), comm.Dup()
nfcoll.prepare(Y)
m, same, first, twins = 70001, True, 0.0, 0
# one buffer per path: an unbound buffer's residual is found by its address
x, y = np.empty(m, dtype=np.float32), np.empty(m, dtype=np.float32)
for call in range(7):
    xs = nfref.inputs(n, m, 7, call)
    x[:] = y[:] = xs[rank]
    if every:  # the twin: the jobs run this very call
        nfcoll.allreduce(x, comm=X)
        twins += 1
    else:
        x[:] = nfref.fp32(xs)
    if call == 0 and rank == 1:
        time.sleep(1.0)
    if call == 6 and rank == 1 and n > 1:
        comm.recv(source=0, tag=6)
    t0 = time.perf_counter()
    req = nfcoll.allreduce_async(y, comm=Y)
    if call == 0:
        first = time.perf_counter() - t0
    if call == 6 and rank == 0 and n > 1:
        comm.send(None, dest=1, tag=6)
    req.wait()
    same &= np.array_equal(x.view(np.uint32), y.view(np.uint32))
kind = "every rank" if every else "some ranks" if some else "no rank"
t.ok(same, "7 calls, %s with MULTIPLE: bit for bit %d blocking calls' and %d exact sums, "
     "the last issued around a message" % (kind, twins, 7 - twins))
late = rank == 0 and level == MPI.THREAD_MULTIPLE and first > 0.5
t.ok(not late, "rank 0 (level %d): its first call on a communicator took %.0f ms at issue, "
     "rank 1 1000 ms late" % (level, first * 1e3))
calls = nfcoll.stats()["routes"]["binary"]["calls"]
t.ok(calls == 2 * twins, "binary calls: %d (want %d)" % (calls, 2 * twins))
# Z: not prepared; two nonblocking calls, a blocking one, two more
Z = comm.Dup()
exact, setup0 = True, nfcoll.stats()["fallbacks"]["setup"]
for call in range(5):
    xs = nfref.inputs(n, m, 9, call)
    y[:] = xs[rank]
    if call == 2:
        nfcoll.allreduce(y, comm=Z)  # the blocking call sets Z up
        continue
    nfcoll.allreduce_async(y, comm=Z).wait()
    if call < 2:
        exact &= np.array_equal(y.view(np.uint32), nfref.fp32(xs).view(np.uint32))
setup = nfcoll.stats()["fallbacks"]["setup"] - setup0
after = nfcoll.stats()["routes"]["binary"]["calls"] - calls
want = 3 if every else 1  # not every rank has a thread: only the blocking call is binary
t.ok(exact and setup == 2 and after == want,
     "a communicator not set up: its first 2 nonblocking calls exact sums (%s), 'setup' "
     "fallbacks %d (want 2); binary from its first blocking call: %d calls (want %d)"
     % (exact, setup, after, want))
X.Free()
Y.Free()
Z.Free()
t.exit()
