#!/usr/bin/python3
"""DDP step time: how much gradient communication a step exposes, with
gloo DDP, nfcoll's synchronous hook, its asynchronous hook, and no
communication at all (compute only), all in one run, one process per rank:

    mpirun -np 2 /usr/bin/python3 bench/ddp_step.py --routes binary,fp32 \\
        --steps 20 --repeats 5

A communication-heavy model (an MLP of about 10 M parameters, 40 MB of
gradients), synthetic data, batch 8, 4 MB buckets. Every configuration has
its own copy of the model (same initial weights) and runs `--steps` timed
steps (forward, backward, SGD step) per block; the blocks alternate
between configurations `--repeats` times, so slow phases of a shared
machine fall on all of them alike. A configuration's figure is the median
step over all its timed steps, taken per rank, then the slowest rank's;
"exposed" is that minus the compute-only median: the communication the
step does not hide. Ratios are to compute only, in the same run.

Configurations: compute (the model without DDP), nocomm (DDP with a hook
that communicates nothing: what DDP's bucket copies cost, the floor of any
hook), gloo (DDP's own allreduce), and per route R in --routes: sync:R (ddp_hook(sync=True),
NF_Allreduce inside the hook) and async:R (ddp_hook(), NF_Iallreduce on
libnfcoll's progress thread). R is a route name, or "policy" for the
admission of NFCOLL_POLICY.
"""

import argparse
import json
import statistics
import time

import nfcoll  # first: it starts MPI through libnfcoll
import nfcoll.torch
import torch
import torch.distributed as dist
from mpi4py import MPI


class Named(torch.nn.Module):
    """The MLP under a configuration's name, so that each configuration's
    hook binds its own region names (a name is bound at one address)."""

    def __init__(self, name, width, depth, inputs, classes):
        super().__init__()
        layers, d = [], inputs
        for _ in range(depth):
            layers += [torch.nn.Linear(d, width), torch.nn.ReLU()]
            d = width
        layers.append(torch.nn.Linear(d, classes))
        setattr(self, name, torch.nn.Sequential(*layers))
        self.name = name

    def forward(self, x):
        return getattr(self, self.name)(x)


def _no_comm(state, bucket):
    """A comm hook that communicates nothing: the bucket back as it is."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def build(name, args):
    torch.manual_seed(1)
    model = Named(name.replace(":", "_"), args.width, args.depth, args.inputs, 10)
    if name == "compute":
        return model, model, None
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=args.bucket_mb, gradient_as_bucket_view=args.bucket_view)
    state = None
    if name == "nocomm":  # DDP's own cost: the bucket copies, the hook's call
        ddp.register_comm_hook(None, _no_comm)
    elif name != "gloo":
        how, route = name.split(":")
        state, hook = nfcoll.torch.ddp_hook(model, route=None if route == "policy" else route,
                                            sync=how == "sync")
        ddp.register_comm_hook(state, hook)
    return model, ddp, state


def steps(net, opt, data, n):
    out = []
    for x, y in data[:n]:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        out.append(time.perf_counter() - t0)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--routes", default="binary,fp32",
                   help="hook routes, comma-separated (a route name or policy)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per block")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per configuration")
    p.add_argument("--repeats", type=int, default=5, help="blocks per configuration")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=3, help="hidden layers")
    p.add_argument("--inputs", type=int, default=1024)
    p.add_argument("--bucket-mb", type=float, default=4.0)
    p.add_argument("--bucket-view", action="store_true",
                   help="DDP(gradient_as_bucket_view=True): gradients are views of the "
                        "buckets, no copy into them or back")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--json", help="rank 0 writes the medians here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    comm = MPI.COMM_WORLD
    nfcoll.torch.init_process_group()
    names = ["compute", "nocomm", "gloo"]
    for r in args.routes.split(","):
        names += ["sync:" + r, "async:" + r]
    runs = {n: build(n, args) for n in names}
    opts = {n: torch.optim.SGD(runs[n][0].parameters(), lr=1e-3) for n in names}
    gen = torch.Generator().manual_seed(100 + comm.Get_rank())
    data = [(torch.randn(args.batch, args.inputs, generator=gen),
             torch.randint(0, 10, (args.batch,), generator=gen))
            for _ in range(max(args.steps, args.warmup))]
    for n in names:
        steps(runs[n][1], opts[n], data, args.warmup)  # DDP rebuilds its buckets here
    times = {n: [] for n in names}
    for _ in range(args.repeats):
        for n in names:
            comm.Barrier()
            times[n] += steps(runs[n][1], opts[n], data, args.steps)
    mine = {n: statistics.median(times[n]) for n in names}
    worst = {n: max(v[n] for v in comm.allgather(mine)) for n in names}
    nparams = sum(p.numel() for p in runs["compute"][0].parameters())
    eager = comm.allreduce(nfcoll.stats()["fallbacks"].get("no-progress", 0))
    if comm.Get_rank() == 0:
        base = worst["compute"]
        print("# ddp_step: %d ranks, %.1f M parameters (%.0f MB of gradients), batch %d, "
              "%g MB buckets%s, %d x %d timed steps per configuration, %d torch thread(s)"
              % (comm.Get_size(), nparams / 1e6, nparams * 4 / 1e6, args.batch, args.bucket_mb,
                 " (gradients as bucket views)" if args.bucket_view else "",
                 args.repeats, args.steps, args.threads))
        print("# nonblocking calls run at issue (no progress thread), all ranks: %d" % eager)
        print("# %-16s %12s %12s %14s" % ("configuration", "step (ms)", "x compute",
                                          "exposed (ms)"))
        for n in names:
            print("  %-16s %12.2f %12.3f %14.2f" % (n, worst[n] * 1e3, worst[n] / base,
                                                   (worst[n] - base) * 1e3))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"args": vars(args), "median_step_s": worst}, f, indent=1)
    for n in names:
        if runs[n][2] is not None:
            runs[n][2].close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
