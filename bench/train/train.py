#!/usr/bin/python3
"""One run of the libnfcoll training check: PyTorch DDP with nfcoll's comm
hook on Fashion-MNIST, one process per rank, launched by mpirun:

    mpirun -np 2 -x NFCOLL_POLICY=head-fp32.policy -x NFCOLL_STATS=s.json \\
        /usr/bin/python3 bench/train/train.py --model cnn --epochs 3 --out r.json

The gradients go through libnfcoll (the policy in NFCOLL_POLICY decides each
parameter's route by its name); everything else is plain PyTorch. Rank 0
writes --out: test accuracy and loss per epoch, wall time, and whether every
rank ended with the same weights (sha256 of the parameters).

The optimizers are the ones people train such models with, at common
settings, the same for every configuration (no per-route tuning):
  sgd    momentum 0.9, weight decay 5e-4, lr 0.05, cosine decay to 0 per step
  adamw  betas (0.9, 0.999), weight decay 0.05, lr 1e-3, linear warm-up over
         the first 10 % of the steps, then cosine decay to 0
The CNN and the MLP default to sgd, the Transformer (vit) to adamw.
"""

import argparse
import gzip
import hashlib
import json
import math
import os
import time

import nfcoll  # first: it starts MPI through libnfcoll
import nfcoll.torch
import numpy as np
import torch
import torch.nn.functional as F
from mpi4py import MPI

DATA = os.environ.get("NF_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
MEAN, STD = 0.2860, 0.3530  # of the Fashion-MNIST training images


def idx(path, header):
    """A gzipped IDX file as a uint8 array (the header's dimensions)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(header)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * header).reshape(dims)


def load(split):
    """(images as float32 N x 1 x 28 x 28, normalized; labels as int64)."""
    x = idx(os.path.join(DATA, "%s-images-idx3-ubyte.gz" % split), 3)
    y = idx(os.path.join(DATA, "%s-labels-idx1-ubyte.gz" % split), 1)
    x = ((x.astype(np.float32) / 255.0 - MEAN) / STD)[:, None, :, :]
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


class CNN(torch.nn.Module):
    """Two 5x5 conv layers, one hidden fully connected layer, a classifier head."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(8, 16, 5, padding=2)
        self.fc = torch.nn.Linear(16 * 7 * 7, 128)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(F.relu(self.fc(x.flatten(1))))


class MLP(torch.nn.Module):
    """784-256-128-10."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 256)
        self.fc2 = torch.nn.Linear(256, 128)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


class ViT(torch.nn.Module):
    """A small Vision Transformer: the 28x28 image cut into 16 patches of 7x7,
    each embedded to WIDTH, a class token, learned positions, LAYERS pre-norm
    encoder layers (HEADS heads, MLP 2x WIDTH, GELU, no dropout), a
    LayerNorm and a linear head on the class token."""

    WIDTH, LAYERS, HEADS, PATCH = 64, 3, 4, 7

    def __init__(self):
        super().__init__()
        w, p = self.WIDTH, self.PATCH
        self.embed = torch.nn.Linear(p * p, w)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, w))
        self.pos = torch.nn.Parameter(torch.randn(1, (28 // p) ** 2 + 1, w) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(w, self.HEADS, 2 * w, dropout=0.0,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, self.LAYERS,
                                                   enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(w)
        self.head = torch.nn.Linear(w, 10)

    def forward(self, x):
        p = self.PATCH
        b = x.shape[0]
        # (b, 1, 28, 28) -> (b, 16, 49): row-major 7x7 patches
        t = x.reshape(b, 28 // p, p, 28 // p, p).permute(0, 1, 3, 2, 4).reshape(b, -1, p * p)
        t = torch.cat([self.cls.expand(b, -1, -1), self.embed(t)], 1) + self.pos
        return self.head(self.norm(self.encoder(t)[:, 0]))


MODELS = {"cnn": CNN, "mlp": MLP, "vit": ViT}
OPTIMIZERS = {  # name: (lr, weight decay, warm-up fraction of the steps)
    "sgd": (0.05, 5e-4, 0.0),
    "adamw": (1e-3, 0.05, 0.1),
}
DEFAULT_OPTIMIZER = {"cnn": "sgd", "mlp": "sgd", "vit": "adamw"}


def lr_factor(step, total, warmup, schedule):
    """The learning rate's factor at step (0-based) of total: a linear warm-up
    over the first warmup steps, then cosine to 0 (or constant)."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / (total - warmup)))


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=tuple(MODELS), default="cnn")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-subset", type=int, default=0, help="first N training images (0: all)")
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--optimizer", choices=tuple(OPTIMIZERS),
                    help="default: sgd for cnn and mlp, adamw for vit")
    ap.add_argument("--lr", type=float, help="peak learning rate (default: the optimizer's)")
    ap.add_argument("--momentum", type=float, default=0.9, help="sgd only")
    ap.add_argument("--weight-decay", type=float, help="default: the optimizer's")
    ap.add_argument("--warmup", type=float,
                    help="fraction of the steps with a linear warm-up (default: the optimizer's)")
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: the epochs)")
    ap.add_argument("--health", action="store_true", help="nfcoll.health_report(loss) every step")
    ap.add_argument("--out", help="rank 0 writes the results here (JSON)")
    a = ap.parse_args()
    a.optimizer = a.optimizer or DEFAULT_OPTIMIZER[a.model]
    lr, wd, warm = OPTIMIZERS[a.optimizer]
    a.lr = lr if a.lr is None else a.lr
    a.weight_decay = wd if a.weight_decay is None else a.weight_decay
    a.warmup = warm if a.warmup is None else a.warmup

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)  # one core per rank
    nfcoll.torch.init_process_group()
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    if a.train_subset:
        xtr, ytr = xtr[:a.train_subset], ytr[:a.train_subset]

    torch.manual_seed(a.seed)
    model = MODELS[a.model]()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state, hook = nfcoll.torch.ddp_hook(model)
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
           "train_images": len(ytr), "batch_per_rank": a.batch, "optimizer": a.optimizer,
           "lr": a.lr, "momentum": a.momentum if a.optimizer == "sgd" else None,
           "weight_decay": a.weight_decay, "schedule": a.schedule, "warmup_steps": warmup,
           "total_steps": total, "seed": a.seed,
           "acc": [], "test_loss": [], "train_loss": [], "epoch_seconds": [],
           "library": nfcoll.library_path, "version": nfcoll.version()}
    steps, start = 0, time.perf_counter()
    for epoch in range(a.epochs):
        t0 = time.perf_counter()
        order = torch.from_numpy(np.random.default_rng([a.seed, epoch]).permutation(len(ytr)))
        mine = order[:len(order) // per_step * per_step][rank::n]
        losses = []
        for b in range(0, len(mine), a.batch):
            i = mine[b:b + a.batch]
            opt.zero_grad()
            loss = F.cross_entropy(ddp(xtr[i]), ytr[i])
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss))
            if a.health:  # this rank's loss: libnfcoll averages over the ranks that report
                nfcoll.health_report(losses[-1])
            steps += 1
            if a.steps and steps >= a.steps:
                break
        res["epoch_seconds"].append(time.perf_counter() - t0)
        acc, tl = evaluate(model, xte, yte, comm)
        res["acc"].append(acc)
        res["test_loss"].append(tl)
        res["train_loss"].append(float(np.mean(comm.allgather(float(np.mean(losses))))))
        if rank == 0:
            print("epoch %d: test accuracy %.2f %%, %.1f s" % (epoch + 1, acc,
                                                              res["epoch_seconds"][-1]), flush=True)
        if a.steps and steps >= a.steps:
            break
    res["wall_seconds"] = time.perf_counter() - start
    res["train_seconds"] = sum(res["epoch_seconds"])
    res["steps"] = steps
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
