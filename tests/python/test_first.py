#!/usr/bin/python3
"""mpi4py started MPI, not libnfcoll (imported second, not preloaded), so the
ranks never agreed at MPI_Init which of them run progress threads
(docs/design.md, "The progress engine"): rank 0 at thread level L0, the
others at L1 (mpi4py.rc.thread_level).

    test_first.py L0 L1     NFCOLL_POLICY=tests/policy_shim/engine.policy

A rank with MPI_THREAD_MULTIPLE returns from its first allreduce_async on a
communicator at once though rank 1 issues it 1 s late; every result is bit
for bit the blocking allreduce's on a twin communicator where some rank has
MULTIPLE (the ranks without it run their calls at issue), the exact sum where
none has (PMPI_Iallreduce).
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
t.ok(not nfcoll._lib.started_mpi, "mpi4py started MPI, not nfcoll (level %d)" % level)
X, Y = comm.Dup(), comm.Dup()
m, same, first = 70001, True, 0.0
# one buffer per path: an unbound buffer's residual is found by its address
x, y = np.empty(m, dtype=np.float32), np.empty(m, dtype=np.float32)
for call in range(6):
    xs = nfref.inputs(n, m, 7, call)
    x[:] = y[:] = xs[rank]
    if some:
        nfcoll.allreduce(x, comm=X)  # the twin: the jobs run this very call
    else:
        x[:] = nfref.fp32(xs)
    if call == 0 and rank == 1:
        time.sleep(1.0)
    t0 = time.perf_counter()
    req = nfcoll.allreduce_async(y, comm=Y)
    if call == 0:
        first = time.perf_counter() - t0
    req.wait()
    same &= np.array_equal(x.view(np.uint32), y.view(np.uint32))
t.ok(same, "6 calls, %s: bit for bit %s" % (
    "some rank has MULTIPLE" if some else "no rank has MULTIPLE",
    "the blocking calls'" if some else "the exact sums"))
late = rank == 0 and level == MPI.THREAD_MULTIPLE and first > 0.5
t.ok(not late, "rank 0 (level %d): its first call on a communicator took %.0f ms at issue, "
     "rank 1 1000 ms late" % (level, first * 1e3))
calls = nfcoll.stats()["routes"]["binary"]["calls"]
t.ok(calls == (12 if some else 0), "binary calls: %d (want %d)" % (calls, 12 if some else 0))
X.Free()
Y.Free()
t.exit()
