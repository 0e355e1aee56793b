#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
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

--timeline FILE adds where each step's time goes, per configuration with a
hook: medians over the timed steps of rank 0 (ms from the step's start) of
backward's start, each bucket's hook call and the moment its future is
done (the result in the bucket), backward's return and the step's end;
every step's raw times go to FILE (JSON).

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


# --timeline: the current step's bucket events (index, elements, hook
# called, hook returned, future done), appended from DDP's thread and the
# waiter's; DDP waits for every future before backward returns.
_events = []


def _timed(hook):
    """hook, recording each bucket's call and the moment its future is done."""
    def timed_hook(state, bucket):
        t0 = time.perf_counter()
        fut = hook(state, bucket)
        t1 = time.perf_counter()
        ev = [bucket.index(), bucket.buffer().numel(), t0, t1, None]
        _events.append(ev)

        def done(f):
            ev[4] = time.perf_counter()
            return f.value()
        return fut.then(done)
    return timed_hook


def build(name, args):
    torch.manual_seed(1)
    model = Named(name.replace(":", "_"), args.width, args.depth, args.inputs, 10)
    if name == "compute":
        return model, model, None
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=args.bucket_mb, gradient_as_bucket_view=args.bucket_view)
    state = None
    wrap = _timed if args.timeline else (lambda h: h)
    if name == "nocomm":  # DDP's own cost: the bucket copies, the hook's call
        ddp.register_comm_hook(None, wrap(_no_comm))
    elif name != "gloo":
        how, route = name.split(":")
        state, hook = nfcoll.torch.ddp_hook(model, route=None if route == "policy" else route,
                                            sync=how == "sync")
        ddp.register_comm_hook(state, wrap(hook))
    return model, ddp, state


def steps(net, opt, data, n, timeline=None):
    """n steps' times; timeline: a list that gets each step's events."""
    out = []
    for x, y in data[:n]:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        del _events[:]
        tb = time.perf_counter()
        loss.backward()
        te = time.perf_counter()
        opt.step()
        out.append(time.perf_counter() - t0)
        if timeline is not None:
            timeline.append({"start": 0.0, "backward": tb - t0, "backward_end": te - t0,
                             "end": out[-1],
                             "buckets": [[i, m, a - t0, b - t0, d - t0 if d else None]
                                         for i, m, a, b, d in _events]})
    return out


def print_timeline(name, tl):
    """Rank 0's medians over its timed steps, ms from the step's start."""
    ms = lambda v: 1e3 * statistics.median(v)  # noqa: E731
    print("# timeline of %s (rank 0, median of %d steps, ms from the step's start): "
          "backward %.2f, returns %.2f, step ends %.2f"
          % (name, len(tl), ms([s["backward"] for s in tl]),
             ms([s["backward_end"] for s in tl]), ms([s["end"] for s in tl])))
    nb = min(len(s["buckets"]) for s in tl)
    for k in range(nb):
        b = [s["buckets"][k] for s in tl]
        done = [e[4] for e in b if e[4] is not None]
        print("#   bucket %d (%d elements): hook called %.2f, returned %.2f, done %s"
              % (b[0][0], b[0][1], ms([e[2] for e in b]), ms([e[3] for e in b]),
                 "%.2f" % ms(done) if done else "-"))


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
    p.add_argument("--timeline", metavar="FILE",
                   help="print rank 0's per-bucket timeline of each configuration with a "
                        "hook, and write every step's times to FILE (JSON)")
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
    tls = {n: [] for n in names if n not in ("compute", "gloo")} if args.timeline else {}
    for _ in range(args.repeats):
        for n in names:
            comm.Barrier()
            times[n] += steps(runs[n][1], opts[n], data, args.steps, tls.get(n))
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
        for n, tl in tls.items():
            print_timeline(n, tl)
        if args.timeline:
            with open(args.timeline, "w") as f:
                json.dump({"args": vars(args), "rank": 0, "steps_s": tls}, f)
    for n in names:
        if runs[n][2] is not None:
            runs[n][2].close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
