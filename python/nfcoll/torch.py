# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch DistributedDataParallel through libnfcoll.

Launch with mpirun, one process per rank; gloo carries DDP's own traffic
(the parameter broadcast at construction), libnfcoll the gradients:

    # mpirun -np 2 [-x LD_PRELOAD=libnfcoll.so] -x NFCOLL_POLICY=p.ini python3 train.py
    import torch
    import nfcoll.torch
    nfcoll.torch.init_process_group()           # gloo, from Open MPI's environment
    model = Net()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(*nfcoll.torch.ddp_hook(model))

init_process_group() takes the rank and size from OMPI_COMM_WORLD_RANK and
OMPI_COMM_WORLD_SIZE (the MPI world's otherwise), the rendezvous from
MASTER_ADDR (default 127.0.0.1 when every rank is on one host, else rank
0's host name) and MASTER_PORT (default: a free port rank 0 picks and
broadcasts over MPI, so runs side by side do not collide).

The hook names each parameter's slice of every gradient bucket after
model.named_parameters() (NF_Region_bind), so a policy's `region = head.*`
and a calibration profile speak the model's own names; it allreduces the
bucket in one call over MPI_COMM_WORLD and divides by the world size. The
call is nonblocking (NF_Iallreduce, run by libnfcoll's progress thread),
and a waiter thread completes the Future DDP waits for at the end of
backward, so communication overlaps the rest of backward;
ddp_hook(model, sync=True) reduces inside the hook (NF_Allreduce), as
before. DDP rebuilds its buckets after the first iteration (other order,
other buffers): the hook binds every bucket again at the second step;
residuals are kept by region name, so they follow the parameters into the
new buckets (a forced route's one residual per bucket starts over). The regions are unbound
when the hook's state is freed with its DDP model (or by state.close()).
"""

import os
import queue
import socket
import threading

import torch
import torch.distributed as dist
from mpi4py import MPI

import nfcoll


def init_process_group(backend="gloo", comm=None, **kwargs):
    """torch.distributed.init_process_group for a job started by mpirun."""
    comm = MPI.COMM_WORLD if comm is None else comm
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", comm.Get_rank()))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", comm.Get_size()))
    if (rank, size) != (comm.Get_rank(), comm.Get_size()):
        raise RuntimeError("nfcoll.torch: OMPI_COMM_WORLD_RANK/SIZE %d/%d differ from the "
                           "communicator's %d/%d" % (rank, size, comm.Get_rank(), comm.Get_size()))
    addr = os.environ.get("MASTER_ADDR")
    if not addr:
        hosts = comm.allgather(socket.gethostname())
        addr = "127.0.0.1" if len(set(hosts)) == 1 else hosts[0]
    port = os.environ.get("MASTER_PORT")
    if not port:
        port = comm.bcast(_free_port() if rank == 0 else None, root=0)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)
    dist.init_process_group(backend, rank=rank, world_size=size, **kwargs)


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class HookState:
    """What the hook keeps between calls: parameter names, the regions it
    bound per bucket, and the counts it reports (calls, rebinds)."""

    def __init__(self, model, route, comm):
        module = getattr(model, "module", model)  # a DDP wrapper: its module's names
        self.names = {id(p): n for n, p in module.named_parameters()}
        self.route, self.comm = route, comm
        self.size = (MPI.COMM_WORLD if comm is None else comm).Get_size()
        self.layouts = {}   # bucket index -> (data_ptr, numel, ((offset, count, name), ...))
        self.bound = {}     # address -> (bucket index, bytes), every region bound now
        self.where = {}     # parameter name -> its address in self.bound
        self.named = {}     # address in self.bound -> its parameter name
        self.calls = 0
        self.rebinds = 0    # bucket layouts that changed (DDP's rebuild)
        self.steps = 0      # backward passes seen (last buckets)
        self.waiter = None  # the asynchronous hook's _Waiter
        self.again = set()  # buckets bound again at the second step

    def layout(self, bucket):
        buf = bucket.buffer()
        parts, offset = [], 0
        for p, g in zip(bucket.parameters(), bucket.gradients()):
            n = p.numel()
            at = (g.data_ptr() - buf.data_ptr()) // buf.element_size()
            if g.numel() != n or at != offset:
                raise RuntimeError("nfcoll.torch: bucket %d: a gradient is not where its "
                                   "parameter's place in the bucket says" % bucket.index())
            parts.append((offset, n, self.names.get(id(p))))
            offset += n
        return buf.data_ptr(), buf.numel(), tuple(parts)

    def bind(self, bucket):
        """Bind the bucket's parameters as regions unless already bound so."""
        index, buf = bucket.index(), bucket.buffer()
        lay = self.layout(bucket)
        # DDP rebuilds its buckets before the second step, maybe at the very
        # addresses it freed and in the same order: the layout then looks the
        # same. Every bucket is bound again at that step, so that what is kept
        # by address (a forced route's residual: binding restarts it,
        # NF_Region_bind(3)) restarts wherever the new buffers landed.
        again = self.steps == 1 and index not in self.again
        if self.layouts.get(index) != lay or again:
            self.rebinds += self.layouts.get(index) != lay
            if again:
                self.again.add(index)
            # this bucket's old regions, and any left inside its new buffer (freed by
            # the rebuild; a live buffer overlaps no other)
            start, end, size = lay[0], lay[0] + lay[1] * buf.element_size(), buf.element_size()
            self._unbind(lambda a, i, nb: i == index or (a < end and a + nb > start))
            for offset, n, name in lay[2]:
                if name is not None:  # a parameter the model does not name stays a gap
                    # a parameter that moved from a bucket not rebuilt yet: a name is
                    # bound at one address at a time (NF_Region_bind(3))
                    if name in self.where:
                        self._drop(self.where[name])
                    nfcoll.bind(buf[offset:offset + n], name)
                    self.bound[start + offset * size] = (index, n * size)
                    self.where[name] = start + offset * size
                    self.named[start + offset * size] = name
            self.layouts[index] = lay
        if bucket.is_last():  # buckets after the last are gone (a rebuild made fewer)
            self.steps += 1
            self._unbind(lambda a, i, nb: i > index)
            for i in [i for i in self.layouts if i > index]:
                del self.layouts[i]

    def close(self):
        """Unbind every region this hook bound (done when the state is freed,
        with the DDP model that holds it): bound regions outlive buffers
        and would name whatever memory comes next. The asynchronous hook's
        calls in flight finish first."""
        if self.waiter is not None:
            self.waiter.stop()
        self._unbind(lambda a, i, nb: True)
        self.layouts.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing to report to
            pass

    def _unbind(self, stale):
        for addr in [a for a, (i, nb) in self.bound.items() if stale(a, i, nb)]:
            self._drop(addr)

    def _drop(self, addr):
        nfcoll.unbind(addr)
        del self.bound[addr]
        name = self.named.pop(addr)
        if self.where.get(name) == addr:
            del self.where[name]


def _outcome(fut):
    """then() callback of a bucket's future: its bucket, or the failure
    raised, which marks the future DDP holds as failed (torch 1.13's
    Future.set_exception only wraps the exception for Python's wait(); DDP,
    in C++, would take it for the tensor)."""
    v = fut.value()
    if isinstance(v, Exception):
        raise v
    return v


class _Waiter:
    """The thread that completes an asynchronous hook's futures: it waits
    for each bucket's request in issue order, divides the bucket by the
    world size and sets the future's result, or the exception (DDP then
    raises it from backward instead of waiting forever). Started at the
    first bucket, stopped when the hook's state is closed or freed."""

    def __init__(self, size):
        self.size, self.queue, self.thread = size, queue.SimpleQueue(), None

    def put(self, req, buf, fut):
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="nfcoll-ddp-waiter",
                                           args=(self.queue, self.size), daemon=True)
            self.thread.start()
        self.queue.put((req, buf, fut))

    @staticmethod
    def _run(q, size):  # no reference to the state: the thread must not keep it alive
        while True:
            item = q.get()
            if item is None:
                return
            req, buf, fut = item
            try:
                req.wait()
                buf.div_(size)
            except Exception as e:  # noqa: BLE001 - any failure goes to DDP through the future
                buf = e
            fut.set_result(buf)
            del item, req, buf, fut

    def stop(self):
        """Finish what is queued, then end the thread."""
        if self.thread is not None:
            self.queue.put(None)
            if self.thread is not threading.current_thread():
                self.thread.join()
            self.thread = None


def ddp_hook(model, route=None, comm=None, sync=False):
    """(state, hook) for DistributedDataParallel.register_comm_hook.

    model: the module (or its DDP wrapper) whose named_parameters() name the
    regions. route None: the policy's admission decides per region (the
    usual choice). A route name forces it (NF_Allreduce_route) on the whole
    bucket: one scale and residual for the bucket, no per-region routes or
    per-region stats; the residual restarts when DDP rebuilds the bucket
    (binding its regions there marks it, NF_Region_bind(3)), wherever the
    new buffer lands. comm: the mpi4py communicator (default COMM_WORLD),
    whose ranks must be DDP's. Collective: every rank calls it (the
    asynchronous hook sets libnfcoll up for comm here, nfcoll.prepare).

    The hook starts each bucket's allreduce (NF_Iallreduce, on libnfcoll's
    progress thread) and returns a torch.futures.Future that a waiter thread
    completes with the bucket divided by the world size, so the
    communication overlaps the rest of backward as DDP's own does; a failed
    call sets the future's exception, which DDP raises. sync=True: the old
    hook, which reduces the bucket inside the call (NF_Allreduce) and
    returns a completed future. Both give the same weights, bit for bit.
    """
    state = HookState(model, route, comm)
    if dist.is_initialized() and dist.get_world_size() != state.size:
        raise RuntimeError("nfcoll.torch: DDP has %d ranks, the communicator %d"
                           % (dist.get_world_size(), state.size))
    if not sync and nfcoll._lib.has("NF_Comm_prepare"):
        # collective, as this call is on every rank: the first bucket's
        # nonblocking call then takes libnfcoll's route, not MPI's own
        nfcoll.prepare(comm)

    def nfcoll_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buf = bucket.buffer()
        state.bind(bucket)
        nfcoll.allreduce(buf, route=state.route, comm=state.comm)
        buf.div_(state.size)
        state.calls += 1
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    def nfcoll_async_hook(state: HookState,
                          bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buf = bucket.buffer()
        fut = torch.futures.Future()
        try:
            state.bind(bucket)
            req = nfcoll.allreduce_async(buf, route=state.route, comm=state.comm)
        except Exception as e:  # noqa: BLE001 - raised by DDP from the future
            fut.set_result(e)
        else:
            state.calls += 1
            state.waiter.put(req, buf, fut)
        return fut.then(_outcome)

    if sync:
        return state, nfcoll_hook
    state.waiter = _Waiter(state.size)
    return state, nfcoll_async_hook
