#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Held-back models: the training check's kinds of model, with other shapes,
trained as an unmodified MPI program would be: every gradient copied into one
buffer, reduced by mpi4py's comm.Allreduce, libnfcoll preloaded
(LD_PRELOAD), the regions named by a layout file (`regions =`), nothing
tuned for libnfcoll. It checks that a calibration run and `route = auto`
alone (policies naming no parameter) hold on models the check was not
developed on (docs/training.md, "Methods tried", 11).

    bench/train/heldback.py --build build --models mlp2,cnn2 --seeds 1,2,3,4

runs, per model and seed, fp32 (Open MPI's MPI_Allreduce, nothing preloaded),
a calibration run of 101 steps, and auto; then prints each seed's final test
accuracy, the mean (+- half the range) distance from fp32 of the same seed,
and auto's upstream bytes as % of FP32 (libnfcoll's stats). One run:

    mpirun -np 2 -x LD_PRELOAD=build/lib/.libs/libnfcoll.so \\
        -x NFCOLL_POLICY=auto.policy bench/train/heldback.py --run --model mlp2

Open MPI's mpirun (-x, --oversubscribe). NFCOLL_* settings of the caller's
environment are not passed to the runs: the policies decide.

Models: mlp2 (784-512-256-128-10), cnn2 (two convolutions of 24 and 48
channels, a hidden layer of 96). SGD momentum 0.9, weight decay 5e-4, lr
0.05 with a cosine decay per step, batch 64 per rank, Fashion-MNIST (the
settings of the check's CNN and MLP).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = "lib/.libs/libnfcoll.so"


def models():
    import torch
    import torch.nn.functional as F

    class MLP2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.Linear(784, 512)
            self.l2 = torch.nn.Linear(512, 256)
            self.l3 = torch.nn.Linear(256, 128)
            self.out = torch.nn.Linear(128, 10)

        def forward(self, x):
            x = F.relu(self.l1(x.flatten(1)))
            return self.out(F.relu(self.l3(F.relu(self.l2(x)))))

    class CNN2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(1, 24, 5, padding=2)
            self.c2 = torch.nn.Conv2d(24, 48, 3, padding=1)
            self.f1 = torch.nn.Linear(48 * 7 * 7, 96)
            self.out = torch.nn.Linear(96, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.c1(x)), 2)
            x = F.max_pool2d(F.relu(self.c2(x)), 2)
            return self.out(F.relu(self.f1(x.flatten(1))))

    return {"mlp2": MLP2, "cnn2": CNN2}


MODELS = ("mlp2", "cnn2")


def build_model(name, seed):
    import torch
    torch.manual_seed(seed)
    return models()[name]()


def write_layout(name, path):
    """The layout file of the model's one fused buffer: one line per
    parameter, `BYTES NAME OFFSET COUNT` (nfcoll-policy(5))."""
    params = list(build_model(name, 1).named_parameters())
    total = sum(p.numel() for _, p in params)
    with open(path, "w") as f:
        off = 0
        for n, p in params:
            f.write("%d %s %d %d\n" % (total * 4, n, off, p.numel()))
            off += p.numel()


def train(a):
    """One run, inside mpirun. Rank 0 writes --out."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from mpi4py import MPI
    sys.path.insert(0, HERE)
    from models import load_data, lr_factor

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)
    model = build_model(a.model, a.seed)
    params = [p for _, p in model.named_parameters()]
    buf = np.zeros(sum(p.numel() for p in params), dtype=np.float32)
    xtr, ytr, xte, yte = load_data(0)
    batch = 64
    per_epoch = len(ytr) // (batch * size)
    total = per_epoch * a.epochs
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: lr_factor(k, total, 0, "cosine"))
    step = 0
    for epoch in range(a.epochs):
        order = torch.from_numpy(np.random.default_rng([a.seed, epoch]).permutation(len(ytr)))
        mine = order[rank::size]
        for b in range(per_epoch):
            if a.steps and step >= a.steps:
                break
            i = mine[b * batch:(b + 1) * batch]
            opt.zero_grad()
            F.cross_entropy(model(xtr[i]), ytr[i]).backward()
            off = 0
            for p in params:
                buf[off:off + p.numel()] = p.grad.reshape(-1).numpy()
                off += p.numel()
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)  # preloaded: libnfcoll's
            off = 0
            for p in params:
                p.grad.copy_(torch.from_numpy(buf[off:off + p.numel()] / size).view_as(p))
                off += p.numel()
            opt.step()
            sched.step()
            step += 1
    model.eval()
    with torch.no_grad():
        correct = int((model(xte[rank::size]).argmax(1) == yte[rank::size]).sum())
    correct = sum(comm.allgather(correct))  # not an allreduce: that would be libnfcoll's
    digest = comm.allgather(sum(float(p.double().sum()) for p in params))
    if rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump({"model": a.model, "seed": a.seed, "steps": step,
                       "accuracy": 100.0 * correct / len(yte),
                       "same_weights": len(set(digest)) == 1}, f)


def policy(path, lines):
    with open(path, "w") as f:
        f.write("[policy]\nversion = 2\n%s\n[rule all]\ndatatype = float\nop = sum\n"
                "route = auto\n" % "".join(x + "\n" for x in lines))


def check_auto(m, lay, prof, stats):
    """Every layout region has a profile entry and was decided by it: the
    runs measured what they claim. Exits naming what is wrong."""
    regions = [line.split()[1] for line in open(lay)]
    if not os.path.exists(prof):
        sys.exit("heldback.py: %s: the calibration run wrote no profile %s" % (m, prof))
    entries = {line.split()[0] for line in open(prof) if line.strip() and not line.startswith("#")}
    adm = json.load(open(stats)).get("admission", {})
    bad = [r for r in regions if r not in entries or adm.get(r, {}).get("by") != "profile"]
    if bad:
        sys.exit("heldback.py: %s: not decided by the profile's entry: %s (see %s)"
                 % (m, ", ".join(bad), stats))


def run_all(a):
    """fp32, calibration and auto per model and seed; the table."""
    lib = os.path.join(os.path.abspath(a.build), LIB)
    if not os.path.exists(lib):
        sys.exit("heldback.py: no %s (build first, or --build DIR)" % lib)
    names = a.models.split(",")
    for m in names:
        if m not in MODELS:
            sys.exit("heldback.py: unknown model %r (expected some of %s)" % (m, ", ".join(MODELS)))
    try:
        seeds = [int(x) for x in a.seeds.split(",")]
    except ValueError:
        sys.exit("heldback.py: bad --seeds %r (expected integers separated by commas)" % a.seeds)
    out = os.path.abspath(a.out_dir)  # the policies name files by absolute path
    os.makedirs(out, exist_ok=True)
    me = os.path.abspath(__file__)
    # the runs' libnfcoll settings are the policies' alone
    env = {k: v for k, v in os.environ.items() if not k.startswith("NFCOLL_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    rows = []
    for m in names:
        lay = os.path.join(out, m + ".layout")
        write_layout(m, lay)
        for s in seeds:
            base = os.path.join(out, "%s.s%d" % (m, s))
            prof = base + ".profile"
            policy(base + ".calibrate.policy", ["calibrate = " + prof, "regions = " + lay])
            policy(base + ".auto.policy", ["profile = " + prof, "regions = " + lay])
            runs = (("fp32", [], 0), ("calibrate", ["-x", "LD_PRELOAD=" + lib, "-x",
                                                    "NFCOLL_POLICY=" + base + ".calibrate.policy"], 101),
                    ("auto", ["-x", "LD_PRELOAD=" + lib, "-x", "NFCOLL_POLICY=" + base + ".auto.policy",
                              "-x", "NFCOLL_STATS=" + base + ".auto.stats.json"], 0))
            res = {}
            for name, extra, steps in runs:
                cmd = ([a.mpirun, "-np", str(a.np), "--oversubscribe"] + a.mpirun_args.split() + extra +
                       [a.python, me, "--run", "--model", m, "--seed", str(s), "--epochs", str(a.epochs),
                        "--steps", str(min(steps, a.steps or steps) if steps else a.steps),
                        "--out", "%s.%s.json" % (base, name)])
                print("+ " + " ".join(cmd), flush=True)
                with open("%s.%s.log" % (base, name), "w") as log:
                    if subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env) != 0:
                        sys.exit("heldback.py: %s failed (see %s.%s.log)" % (name, base, name))
                with open("%s.%s.json" % (base, name)) as f:
                    res[name] = json.load(f)
            check_auto(m, lay, prof, base + ".auto.stats.json")
            st = json.load(open(base + ".auto.stats.json"))["routes"]
            up = 100.0 * sum(r["upstream_bytes"] for r in st.values()) / max(
                1, sum(r["fp32_ring_bytes"] for r in st.values()))
            rows.append((m, s, res["fp32"]["accuracy"], res["auto"]["accuracy"], up,
                         res["auto"]["same_weights"]))
            m_, s_, f_, x_, u_, same = rows[-1]
            print("%s seed %d: fp32 %.2f, auto %.2f (%+.2f), up %.2f %% of FP32, same weights: %s"
                  % (m_, s_, f_, x_, x_ - f_, u_, "yes" if same else "NO"), flush=True)
    print("\nmodel  fp32 (seeds)                auto (seeds)                vs fp32 (+- half range)  up %")
    for m in names:
        r = [x for x in rows if x[0] == m]
        d = [x[3] - x[2] for x in r]
        print("%-6s %.2f (%s)  %.2f (%s)  %+.2f (+-%.2f)  %.2f" % (
            m, statistics.mean(x[2] for x in r), " ".join("%.2f" % x[2] for x in r),
            statistics.mean(x[3] for x in r), " ".join("%.2f" % x[3] for x in r),
            statistics.mean(d), (max(d) - min(d)) / 2, statistics.mean(x[4] for x in r)))
    if not all(x[5] for x in rows):
        sys.exit("heldback.py: some run ended with different weights on different ranks")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp2,cnn2", help="some of %s" % ", ".join(MODELS))
    ap.add_argument("--seeds", default="1,2,3,4")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0, help="stop every run after N steps (0: the epochs)")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--build", default="build", help="a build tree: its libnfcoll.so is preloaded")
    ap.add_argument("--out-dir", default="heldback")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpirun-args", default="",
                    help="more mpirun options, one string: --mpirun-args='--mca btl self,vader'")
    ap.add_argument("--run", action="store_true", help="one run (inside mpirun)")
    ap.add_argument("--model", choices=MODELS, help="--run: the model")
    ap.add_argument("--seed", type=int, default=1, help="--run: the seed")
    ap.add_argument("--out", help="--run: rank 0 writes the result here (JSON)")
    a = ap.parse_args()
    if a.run:
        if a.model is None:
            ap.error("--run needs --model")
        train(a)
    else:
        run_all(a)


if __name__ == "__main__":
    main()
