#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""One run of the libnfcoll training check: PyTorch DDP with nfcoll's comm
hook on Fashion-MNIST (cnn, mlp, vit) or on WordNet's glosses (lm, a
byte-level language model), one process per rank, launched by mpirun:

    mpirun -np 2 -x NFCOLL_POLICY=head-fp32.policy -x NFCOLL_STATS=s.json \\
        /usr/bin/python3 bench/train/train.py --model cnn --epochs 3 --out r.json

The gradients go through libnfcoll (the policy in NFCOLL_POLICY decides each
parameter's route by its name); everything else is plain PyTorch. Rank 0
writes --out: test accuracy and loss per epoch (lm: validation loss in nats
per byte and perplexity), wall time, and whether every rank ended with the
same weights (sha256 of the parameters).

The optimizers are the ones people train such models with, at common
settings, the same for every configuration (no per-route tuning):
  sgd    momentum 0.9, weight decay 5e-4, lr 0.05, cosine decay to 0 per step
  adamw  betas (0.9, 0.999), weight decay 0.05, lr 1e-3, linear warm-up over
         the first 10 % of the steps, then cosine decay to 0
The CNN and the MLP default to sgd, the Transformers (vit, lm) to adamw.

--inject makes a run diverge on purpose, to see libnfcoll's health monitor
catch it (tests/python_train.sh); steps count from 0, over the whole run:
  lrF:STEP:N               the learning rate times F for N steps from STEP
                           (lr20:100:5: 20 times for steps 100-104)
  corrupt:RANK:STEP:N[:S]  for N steps from STEP, RANK's gradients times S
                           (default 100) plus Gaussian noise of S times their
                           RMS, in the comm hook before the allreduce
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import nfcoll  # first: it starts MPI through libnfcoll
import nfcoll.torch
import numpy as np
import torch
import torch.nn.functional as F
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import (DEFAULT_OPTIMIZER, MODELS, OPTIMIZERS, TEXT_MODELS, load_data,  # noqa: E402
                    load_text, lr_factor)

def evaluate(model, x, y, comm):
    """Test accuracy (%) and mean loss, each rank a share of the test set."""
    r, n = comm.Get_rank(), comm.Get_size()
    model.eval()
    with torch.no_grad():
        out = model(x[r::n])
        correct = int((out.argmax(1) == y[r::n]).sum())
        loss = float(F.cross_entropy(out, y[r::n], reduction="sum"))
    model.train()
    parts = comm.allgather((correct, loss))  # not an allreduce: preloaded, that is libnfcoll's
    return 100.0 * sum(c for c, _ in parts) / len(y), sum(v for _, v in parts) / len(y)


def lm_loss(model, windows, reduction="mean"):
    """Cross-entropy (nats per byte) of predicting each window's bytes 1..T
    from the bytes before them."""
    out = model(windows[:, :-1])
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), windows[:, 1:].reshape(-1),
                           reduction=reduction)


def evaluate_lm(model, valid, comm, batch=64):
    """Validation perplexity and loss (nats per byte), each rank a share of
    the windows."""
    r, n = comm.Get_rank(), comm.Get_size()
    mine, loss = valid[r::n], 0.0
    model.eval()
    with torch.no_grad():
        for b in range(0, len(mine), batch):
            loss += float(lm_loss(model, mine[b:b + batch], "sum"))
    model.train()
    total = sum(comm.allgather(loss)) / (valid.shape[0] * (valid.shape[1] - 1))
    return math.exp(total), total


def parse_inject(spec):
    """One --inject value as a dict; ArgumentTypeError names what is wrong."""
    f = spec.split(":")
    try:
        if f[0].startswith("lr") and len(f) == 3:
            return {"kind": "lr", "factor": float(f[0][2:]), "step": int(f[1]),
                    "steps": int(f[2]), "spec": spec}
        if f[0] == "corrupt" and len(f) in (4, 5):
            return {"kind": "corrupt", "rank": int(f[1]), "step": int(f[2]),
                    "steps": int(f[3]), "scale": float(f[4]) if len(f) == 5 else 100.0,
                    "spec": spec}
    except ValueError:
        pass
    raise argparse.ArgumentTypeError("bad --inject %r (expected lrF:STEP:N or "
                                     "corrupt:RANK:STEP:N[:SCALE])" % spec)


def injecting(inject, kind, step):
    """The --inject entries of this kind active at this step."""
    return [j for j in inject if j["kind"] == kind and j["step"] <= step < j["step"] + j["steps"]]


def corrupting_hook(hook, inject, rank, seed, at):
    """hook, with this rank's bucket corrupted first at the steps --inject
    corrupt names (at[0]: the current step)."""
    def wrapped(state, bucket):
        for j in injecting(inject, "corrupt", at[0]):
            if j["rank"] == rank:
                buf = bucket.buffer()
                g = torch.Generator().manual_seed(seed * 1000003 + at[0])
                rms = float(buf.pow(2).mean().sqrt())
                buf.mul_(j["scale"]).add_(torch.randn(buf.shape, generator=g) *
                                          (j["scale"] * rms))
        return hook(state, bucket)
    return wrapped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=tuple(MODELS), default="cnn")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-subset", type=int, default=0,
                    help="first N training images (0: all); lm: N windows (0: 2048)")
    ap.add_argument("--batch", type=int, help="per rank (default 64; lm: 8 windows)")
    ap.add_argument("--optimizer", choices=tuple(OPTIMIZERS),
                    help="default: sgd for cnn and mlp, adamw for vit and lm")
    ap.add_argument("--lr", type=float, help="peak learning rate (default: the optimizer's)")
    ap.add_argument("--momentum", type=float, default=0.9, help="sgd only")
    ap.add_argument("--weight-decay", type=float, help="default: the optimizer's")
    ap.add_argument("--warmup", type=float,
                    help="fraction of the steps with a linear warm-up (default: the optimizer's)")
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: the epochs)")
    ap.add_argument("--health", action="store_true", help="nfcoll.health_report(loss) every step")
    ap.add_argument("--inject", type=parse_inject, action="append", default=[],
                    metavar="SPEC", help="make the run diverge: lrF:STEP:N or "
                    "corrupt:RANK:STEP:N[:SCALE] (see above); may repeat")
    ap.add_argument("--out", help="rank 0 writes the results here (JSON)")
    a = ap.parse_args()
    a.optimizer = a.optimizer or DEFAULT_OPTIMIZER[a.model]
    lr, wd, warm = OPTIMIZERS[a.optimizer]
    a.lr = lr if a.lr is None else a.lr
    a.weight_decay = wd if a.weight_decay is None else a.weight_decay
    a.warmup = warm if a.warmup is None else a.warmup
    text = a.model in TEXT_MODELS
    a.batch = a.batch or (8 if text else 64)

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)  # one core per rank
    nfcoll.torch.init_process_group()
    if text:  # windows of bytes; the targets are the windows shifted by one
        xtr, xte = load_text(a.train_subset)
        ytr = xtr
    else:
        xtr, ytr, xte, yte = load_data(a.train_subset)

    torch.manual_seed(a.seed)
    model = MODELS[a.model]()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state, hook = nfcoll.torch.ddp_hook(model)
    at = [0]  # the step, for the corrupting hook
    if any(j["kind"] == "corrupt" for j in a.inject):
        hook = corrupting_hook(hook, a.inject, rank, a.seed, at)
    ddp.register_comm_hook(state, hook)
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum,
                              weight_decay=a.weight_decay)
    else:
        opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    per_step = n * a.batch
    total = a.epochs * (len(ytr) // per_step)  # --steps stops early on the same schedule
    warmup = int(round(a.warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: lr_factor(k, total, warmup, a.schedule))

    res = {"model": a.model, "ranks": n, "params": sum(p.numel() for p in model.parameters()),
           "regions": {k: p.numel() for k, p in model.named_parameters()},
           "metric": "perplexity" if text else "accuracy",
           "train_images": len(ytr), "batch_per_rank": a.batch, "optimizer": a.optimizer,
           "lr": a.lr, "momentum": a.momentum if a.optimizer == "sgd" else None,
           "weight_decay": a.weight_decay, "schedule": a.schedule, "warmup_steps": warmup,
           "total_steps": total, "seed": a.seed,
           "inject": [j["spec"] for j in a.inject], "step_calls": [], "step_loss": [],
           "acc": [], "ppl": [], "test_loss": [], "train_loss": [], "epoch_seconds": [],
           "library": nfcoll.library_path, "version": nfcoll.version()}
    steps, start = 0, time.perf_counter()
    for epoch in range(a.epochs):
        t0 = time.perf_counter()
        order = torch.from_numpy(np.random.default_rng([a.seed, epoch]).permutation(len(ytr)))
        mine = order[:len(order) // per_step * per_step][rank::n]
        losses = []
        for b in range(0, len(mine), a.batch):
            i = mine[b:b + a.batch]
            at[0] = steps
            res["step_calls"].append(state.calls)  # the hook's calls before this step
            opt.zero_grad()
            loss = lm_loss(ddp, xtr[i]) if text else F.cross_entropy(ddp(xtr[i]), ytr[i])
            loss.backward()
            for j in injecting(a.inject, "lr", steps):  # the schedule sets it again next step
                for grp in opt.param_groups:
                    grp["lr"] *= j["factor"]
            opt.step()
            sched.step()
            losses.append(float(loss))
            if a.inject:  # the mean over the ranks, to see the injection
                res["step_loss"].append(float(np.mean(comm.allgather(losses[-1]))))
            # this rank's loss: libnfcoll averages over the ranks that report. It
            # refuses a NaN or Inf: the gradients' own NaN or Inf is that signal.
            if a.health and np.isfinite(losses[-1]):
                nfcoll.health_report(losses[-1])
            steps += 1
            if a.steps and steps >= a.steps:
                break
        res["epoch_seconds"].append(time.perf_counter() - t0)
        if text:
            ppl, tl = evaluate_lm(model, xte, comm)
            res["ppl"].append(ppl)
        else:
            acc, tl = evaluate(model, xte, yte, comm)
            res["acc"].append(acc)
        res["test_loss"].append(tl)
        res["train_loss"].append(float(np.mean(comm.allgather(float(np.mean(losses))))))
        if rank == 0:
            print("epoch %d: %s, %.1f s" % (
                epoch + 1, "validation perplexity %.4f (%.4f nats per byte)" % (ppl, tl) if text
                else "test accuracy %.2f %%" % acc, res["epoch_seconds"][-1]), flush=True)
        if a.steps and steps >= a.steps:
            break
    res["wall_seconds"] = time.perf_counter() - start
    res["train_seconds"] = sum(res["epoch_seconds"])
    res["steps"] = steps
    res["score"] = res["ppl"] if text else res["acc"]
    res["final_score"] = res["score"][-1]
    if not text:
        res["final_acc"] = res["acc"][-1]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    digests = comm.allgather(hashlib.sha256(flat.numpy().tobytes()).hexdigest())
    res["weights_sha256"] = digests[0]
    res["identical_weights"] = len(set(digests)) == 1
    res["hook_calls"], res["hook_rebinds"] = state.calls, state.rebinds
    if rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    if not res["identical_weights"]:
        raise SystemExit("ranks ended with different weights: %s" % digests)


if __name__ == "__main__":
    main()
